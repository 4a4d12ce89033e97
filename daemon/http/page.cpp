// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/page.h"

#include "daemon/export/exports.h"
#include "daemon/export/utf8_text.h"
#include "daemon/http/page_assets.h"

namespace stackmapd::http {

namespace {

// stack_map_stat's "name: value" lines as table rows: the same names a
// script greps for.
std::string counter_rows(const TableStats& st) {
  std::string out;
  const std::string stat = format_stat(st);
  for (size_t pos = 0; pos < stat.size();) {
    size_t nl = stat.find('\n', pos);
    std::string line = stat.substr(pos, nl - pos);
    pos = nl == std::string::npos ? stat.size() : nl + 1;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    out += "<tr><th>" + markup_text(line.substr(0, colon)) + "</th><td>" + markup_text(value) +
           "</td></tr>\n";
  }
  return out;
}

constexpr const char* kFlamePanel = R"HTML(<section id="flame" class="panel">
<noscript><p>The flame graph needs JavaScript; the counters are below, the data at
<a href="/flame.json">/flame.json</a>.</p></noscript>
<div id="controls">
<label>window <select id="window"><option value="all">since start</option>
<option value="10m">last 10 minutes</option><option value="1m">last minute</option></select></label>
<label>compare with <select id="base"><option value="">nothing</option>
<option value="prev" disabled>the window before</option><option value="all">since start</option>
<option value="10m">last 10 minutes</option><option value="1m">last minute</option></select></label>
<span id="filter">filter <select id="key"></select> <select id="exclude" hidden aria-label="include or exclude">
<option value="">only</option><option value="1">all but</option></select> <select id="value" hidden></select></span>
<input id="search" type="search" placeholder="search functions (regex)" aria-label="search">
<span id="matched"></span>
<button id="layout" type="button">icicle</button>
<button id="reset" type="button" disabled>reset zoom</button>
<a id="download" href="/flame.pprof" download>download pprof</a>
<span id="status">loading...</span>
</div>
<div id="legend" hidden><span class="swatch grew"></span>share grew <span class="swatch shrank"></span>shrank
<span class="swatch same"></span>held (widths: the window; colour: its share less the base's, deepest at
<select id="scale" aria-label="colour scale"><option value="">the largest change</option>
<option value="1">&plusmn;1 point</option><option value="10">&plusmn;10 points</option></select>)</div>
<div id="graph" data-updates="0"></div>
<div id="tip" hidden></div>
<div id="sandwich" hidden><h2>Sandwich: <span id="sandwich-name"></span>
<button id="sandwich-close" type="button">close</button></h2>
<p class="note">Its callers above it, its callees below; click a frame for its own sandwich.</p>
<div id="callers" class="graph"></div><div id="callees" class="graph"></div></div>
<h2>Functions</h2>
<p class="note">Click a row to search for the function, its <b>sandwich</b> button for its callers and callees.</p>
<table id="functions"><thead><tr><th data-sort="name">function</th><th data-sort="self">self</th>
<th data-sort="total">total</th>
<th data-sort="change" id="change" hidden>base &#8594; change</th></tr></thead><tbody></tbody></table>
</section>
)HTML";

}  // namespace

std::string render_page(const TableStats& stats, const PageOptions& opt) {
  const std::string host = markup_text(opt.host);
  // An empty icon of its own: the browser asks the server for none.
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<link rel=\"icon\" href=\"data:,\">\n";
  out += "<title>stackmapd on " + host + "</title>\n<style>";
  out += kPageStyle;
  out += "</style></head>\n<body data-refresh=\"" + std::to_string(opt.refresh_seconds) + "\">\n";
  out += "<header><h1>stackmapd on " + host +
         "</h1><nav id=\"tabs\"><a href=\"#flame\" data-tab=\"flame\">Flame graph</a>"
         "<a href=\"#counters\" data-tab=\"counters\">Counters</a></nav></header>\n";
  out += kFlamePanel;
  out += "<section id=\"counters\" class=\"panel\">\n<h2>Counters</h2>\n";
  out += "<table id=\"counters-table\"><tbody>\n" + counter_rows(stats) + "</tbody></table>\n";
  out +=
      "<p>Also: <a href=\"/metrics\">/metrics</a>, <a "
      "href=\"/stack_map.json\">/stack_map.json</a>, "
      "<a href=\"/flame.json\">/flame.json</a>, <a "
      "href=\"/debug/pprof/stackmapd?seconds=10\">/debug/pprof/stackmapd</a>.</p>\n</section>\n";
  out += "<script>";
  out += kPageScript;
  return out + "</script>\n</body></html>\n";
}

}  // namespace stackmapd::http

// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/page.h"

#include <algorithm>
#include <cstdio>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/utf8_text.h"

namespace stackmapd::http {

namespace {

constexpr size_t kKeysShown = 5;

std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<unsigned char>(in[i + 2]);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < in.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? k[v & 63] : '=';
  }
  return out;
}

std::string percent(uint64_t part, uint64_t whole) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%.1f%%", whole ? 100.0 * part / whole : 0.0);
  return buf;
}

// stack_map_stat's "name: value" lines as table rows: the same names a
// script greps for.
std::string counters_table(const TableStats& st) {
  std::string out = "<table id=\"counters\">\n";
  std::string stat = format_stat(st);
  for (size_t pos = 0; pos < stat.size();) {
    size_t nl = stat.find('\n', pos);
    std::string line = stat.substr(pos, nl - pos);
    pos = nl == std::string::npos ? stat.size() : nl + 1;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    out += "<tr><th>" + markup_text(line.substr(0, colon)) + "</th><td>" + markup_text(value) +
           "</td></tr>\n";
  }
  return out + "</table>\n";
}

std::string frame_text(uint64_t ip, const Kallsyms* ksyms, bool addresses) {
  std::string s = symbolize(ip, ksyms);
  return !addresses && s.rfind("0x", 0) == 0 ? "[unknown]" : s;
}

std::string top_table(const Snapshot& snap, const Kallsyms* ksyms, size_t n, bool addresses) {
  const bool weighted = !snap.weight_unit.empty();
  std::vector<const StackRecord*> order;
  uint64_t total = 0;
  for (const auto& s : snap.stacks) {
    order.push_back(&s);
    total += weighted ? s.weight : s.ref_count;
  }
  auto rank = [&](const StackRecord* s) { return weighted ? s->weight : s->ref_count; };
  n = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](const StackRecord* a, const StackRecord* b) {
                      return rank(a) != rank(b) ? rank(a) > rank(b) : a->stack_id < b->stack_id;
                    });
  std::string out = "<table id=\"top\">\n<tr><th>#</th><th>share</th><th>events</th>";
  if (weighted) out += "<th>" + markup_text(snap.weight_unit) + "</th>";
  out += "<th>stack (innermost first)</th><th>by " +
         markup_text(snap.keys_requested ? snap.keys.str() : "process") + "</th></tr>\n";
  for (size_t i = 0; i < n; ++i) {
    const StackRecord& s = *order[i];
    out += "<tr class=\"stack\" data-stack-id=\"" + std::to_string(s.stack_id) + "\"><td>" +
           std::to_string(i + 1) + "</td><td>" + percent(rank(&s), total) + "</td><td>" +
           std::to_string(s.ref_count) + "</td>";
    if (weighted) out += "<td>" + markup_text(format_weight(s.weight, snap.weight_unit)) + "</td>";
    out += "<td><ol class=\"frames\">";
    for (uint64_t ip : s.ips)
      out += "<li>" + markup_text(frame_text(ip, ksyms, addresses)) + "</li>";
    out += "</ol></td><td><ul class=\"keys\">";
    for (size_t k = 0; k < std::min(s.by.size(), kKeysShown); ++k)
      out += "<li>" + markup_text(key_label(snap.keys, s.by[k])) + ": " +
             std::to_string(s.by[k].count) + "</li>";
    if (s.by.size() > kKeysShown)
      out += "<li>" + std::to_string(s.by.size() - kKeysShown) + " more</li>";
    out += "</ul></td></tr>\n";
  }
  return out + "</table>\n";
}

constexpr const char* kStyle =
    "body{font-family:\"DejaVu Sans\",sans-serif;margin:1em 2em;color:#222}"
    "table{border-collapse:collapse;margin-bottom:1.5em}th,td{padding:2px 8px;text-align:left;"
    "vertical-align:top;border-bottom:1px solid #ddd}#counters th{font-weight:normal;color:#555}"
    "ol.frames,ul.keys{margin:0;padding-left:1.4em;font-family:monospace;font-size:12px}"
    "object{width:100%;border:1px solid #ccc}";

}  // namespace

std::string render_page(const Snapshot& snap, const Kallsyms* ksyms, const PageOptions& opt) {
  FlameGraphOptions fg;
  fg.title = "Kernel stacks on " + opt.host;
  std::vector<SymbolizedStack> stacks = flame_stacks(snap, FrameNames(snap, ksyms));
  if (!opt.addresses)
    for (auto& s : stacks)
      for (auto& f : s.frames)
        if (f.rfind("0x", 0) == 0) f = "[unknown]";
  std::string svg = render_flamegraph_svg(stacks, fg);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  if (opt.refresh_seconds > 0)
    out +=
        "<meta http-equiv=\"refresh\" content=\"" + std::to_string(opt.refresh_seconds) + "\">\n";
  out += "<title>stackmapd on " + markup_text(opt.host) + "</title>\n<style>" +
         std::string(kStyle) + "</style></head>\n<body>\n<h1>stackmapd on " +
         markup_text(opt.host) + "</h1>\n";
  out += "<p>" + std::to_string(snap.stats.events()) + " events in " +
         std::to_string(snap.stacks.size()) + " unique stacks this epoch";
  if (opt.refresh_seconds > 0)
    out += "; reloads every " + std::to_string(opt.refresh_seconds) +
           " s (<a href=\"/?refresh=0\">stop</a>)";
  out +=
      ". Also: <a href=\"/metrics\">/metrics</a>, <a "
      "href=\"/stack_map.json\">/stack_map.json</a>.</p>\n";
  out += "<h2>Counters</h2>\n" + counters_table(snap.stats);
  out +=
      "<h2>Flame graph</h2>\n<object id=\"flamegraph\" type=\"image/svg+xml\" "
      "data=\"data:image/svg+xml;base64," +
      base64(svg) + "\">flame graph (needs SVG)</object>\n";
  out += "<h2>Top stacks</h2>\n" + top_table(snap, ksyms, opt.top, opt.addresses);
  return out + "</body></html>\n";
}

}  // namespace stackmapd::http

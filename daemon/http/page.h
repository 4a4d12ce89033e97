// SPDX-License-Identifier: GPL-2.0
// The live page (GET /): one self-contained HTML document, no external
// assets (its script and style sheet are embedded, page_assets.h). Two
// tabs: the flame graph (or icicle) with a table of functions and a
// function's sandwich, which the script draws from /flame.json
// (flame_json.h) and updates in place every `refresh_seconds`; and the
// counters, which are in the HTML itself, so the page reads without
// JavaScript too (both panels then show). The script keeps the view in the
// URL's hash, so a reload or a link shows it again.
#pragma once

#include <string>

#include "daemon/model/table_stats.h"

namespace stackmapd::http {

struct PageOptions {
  std::string host;         // the machine's name, for the title
  int refresh_seconds = 5;  // between updates of the data; 0: none
};

std::string render_page(const TableStats& stats, const PageOptions& opt);

}  // namespace stackmapd::http

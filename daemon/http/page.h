// SPDX-License-Identifier: GPL-2.0
// The live page (GET /): one self-contained HTML document, no external
// assets. The counters and the top stacks with their breakdown are plain
// HTML tables, readable without JavaScript; the flame graph is the SVG the
// exports draw (flamegraph.h), embedded as a data: object so that its own
// script (click to zoom) runs on its own document. The page reloads itself
// every `refresh_seconds` (a meta refresh, no script).
#pragma once

#include <cstddef>
#include <string>

#include "daemon/model/snapshot.h"

namespace stackmapd {
class Kallsyms;
}

namespace stackmapd::http {

struct PageOptions {
  std::string host;         // the machine's name, for the title
  int refresh_seconds = 5;  // 0: no reload
  size_t top = 20;          // stacks in the table
  // false: frames that do not resolve show as "[unknown]", not as the raw
  // address (which defeats KASLR), for a listener any local user can reach.
  bool addresses = true;
};

std::string render_page(const Snapshot& snap, const Kallsyms* ksyms, const PageOptions& opt);

}  // namespace stackmapd::http

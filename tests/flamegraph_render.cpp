// SPDX-License-Identifier: GPL-2.0
// Writes the flame graph of a stack_map.json as SVG, through the library the daemon uses:
//   flamegraph_render STACK_MAP_JSON OUT_SVG [OUT_FOLDED]
// The driver of flamegraph_render_test.sh, which screenshots the SVG in headless Chromium.
#include <fstream>
#include <iostream>
#include <sstream>

#include "daemon/export/breakdown.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/json_snapshot.h"
#include "daemon/sys/error.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: " << argv[0] << " STACK_MAP_JSON OUT_SVG [OUT_FOLDED]\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw stackmapd::Error(std::string("cannot read ") + argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    const stackmapd::JsonExport doc = stackmapd::read_json_export(text.str(), argv[1]);
    const auto stacks =
        stackmapd::flame_stacks(doc.snap, stackmapd::FrameNames(doc.snap, nullptr, &doc.functions));
    stackmapd::FlameGraphOptions opt;
    opt.title = "kmem:kmem_cache_alloc";
    auto write = [](const char* path, const std::string& content) {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << content;
      if (!out.flush()) throw stackmapd::Error(std::string("cannot write ") + path);
    };
    write(argv[2], stackmapd::render_flamegraph_svg(stacks, opt));
    if (argc == 4) write(argv[3], stackmapd::format_folded(stacks));
  } catch (const stackmapd::Error& e) {
    std::cerr << "flamegraph_render: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * What an unwind table costs the daemon (daemon/unwind/): for each ELF file,
 * the time to build its table from its CFI and the table's rows and bytes.
 * The first build of the process is reported apart: it includes libdw's
 * one-time setup (loading its x86_64 backend), which a daemon pays once.
 *
 *   cfi_bench [--rounds R] FILE...
 *
 * Output: one JSON object {"files": [{path, section, fdes, rows, bytes,
 * first_ms, median_ms, min_ms, max_ms}]}, ms over R rounds after the first.
 * Figures only; nothing here fails on time.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/sys/error.h"
#include "daemon/unwind/cfi_table.h"

using namespace stackmapd;

namespace {

double build_ms(const std::string& path, CfiTable* out) {
  const auto t0 = std::chrono::steady_clock::now();
  *out = build_cfi_table(path);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(1, atoi(argv[++i]));
    else files.push_back(argv[i]);
  }
  if (files.empty()) {
    fprintf(stderr, "usage: cfi_bench [--rounds R] FILE...\n");
    return 2;
  }
  try {
    printf("{\"files\": [");
    for (size_t f = 0; f < files.size(); ++f) {
      CfiTable t;
      const double first = build_ms(files[f], &t);
      std::vector<double> ms;
      for (int r = 0; r < rounds; ++r) ms.push_back(build_ms(files[f], &t));
      std::sort(ms.begin(), ms.end());
      printf(
          "%s{\"path\": \"%s\", \"section\": \"%s\", \"fdes\": %zu, \"rows\": %zu, \"bytes\": %zu, "
          "\"first_ms\": %.2f, \"median_ms\": %.2f, \"min_ms\": %.2f, \"max_ms\": %.2f}",
          f ? ", " : "", files[f].c_str(), t.section.c_str(), t.fdes, t.rows.size(), t.bytes(),
          first, ms[ms.size() / 2], ms.front(), ms.back());
    }
    printf("]}\n");
  } catch (const Error& e) {
    fprintf(stderr, "cfi_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

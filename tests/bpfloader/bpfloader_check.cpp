// SPDX-License-Identifier: GPL-2.0
// Checks objects for Android's platform bpfloader against every rule of their
// layout family (tests/bpfloader/loader_rules.h) and prints what each release
// loads. Usage: bpfloader_check FAMILY OBJECT.o [FAMILY OBJECT.o ...]
// (FAMILY r or s). Exit 1 with one line per broken rule.
#include <cstdio>
#include <exception>
#include <string>

#include "tests/bpfloader/loader_rules.h"

using namespace stackmapd::bpfloader;

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) {
    std::fprintf(stderr, "usage: bpfloader_check FAMILY OBJECT.o [FAMILY OBJECT.o ...]\n");
    return 2;
  }
  int failed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const Family* family = family_named(argv[i]);
    const std::string path = argv[i + 1];
    if (!family) {
      std::fprintf(stderr, "bpfloader_check: family %s: use r (32/20-byte) or s (120/92-byte)\n",
                   argv[i]);
      return 2;
    }
    try {
      LoaderElf elf(path);
      const auto broken = check(elf, *family);
      for (const auto& line : broken) std::fprintf(stderr, "%s: %s\n", path.c_str(), line.c_str());
      if (!broken.empty()) {
        ++failed;
        continue;
      }
      const ObjectDefs defs = read_defs(elf, *family);
      std::printf("%s: family %s (%s..%s): %zu maps of %u bytes, programs:", path.c_str(),
                  family->name, release_name(family->first), release_name(family->last),
                  defs.maps.size(), family->map_size);
      for (const auto& p : defs.programs)
        std::printf(" %s (from %s)", p.code->name.c_str(),
                    release_name(std::max(p.known_from, family->first)));
      std::printf("\n");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bpfloader_check: %s\n", e.what());
      ++failed;
    }
  }
  return failed ? 1 : 0;
}

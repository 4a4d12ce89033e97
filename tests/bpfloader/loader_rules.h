// SPDX-License-Identifier: GPL-2.0
// The rules an object for Android's platform bpfloader must meet in each
// layout family (include/stackmapd/bpfloader_abi.h), from
// ../shared/notes/android-bpfloader.md: what makes a loader of the family
// skip a definition, fail the object, abort (a boot loop) or load something
// other than what was meant. check() is the CI gate (bpfloader_check) and
// the host test's loader (tests/pinned/pin_loader.cpp) refuses what it lists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stackmapd/bpfloader_abi.h"
#include "tests/bpfloader/loader_elf.h"

namespace stackmapd::bpfloader {

// Platform loader releases, oldest first.
enum Release { kR, kS, kT, kU, kUQpr2, kV, kB, kReleases };
const char* release_name(Release r);
// Version constants of S..U QPR2 (V and B check none).
uint32_t loader_version(Release r);

struct Family {
  const char* name;  // "r" or "s": the build folder
  Release first, last;
  uint32_t map_size, prog_size;
};
// The family named by its folder, or nullptr.
const Family* family_named(const std::string& name);

struct MapDef {
  std::string name;
  smt_bpfloader_map_def def;  // an R definition widened with S's defaults
};

struct Program {
  const Section* code = nullptr;
  std::string function;  // the first symbol of the section, by value
  uint32_t prog_type = 0;
  Release known_from = kR;  // older releases ignore the section
  std::optional<smt_bpfloader_prog_def> def;
  std::vector<Relocation> relocations;
};

struct ObjectDefs {
  std::vector<MapDef> maps;
  std::vector<Program> programs;
  std::string license;
};

// The definitions as the family's loaders split and name them. Code sections
// of no known prefix are left out (every loader ignores them).
ObjectDefs read_defs(const LoaderElf& elf, const Family& family);

// Every rule the object breaks, one line each naming the problem and the fix;
// empty when a loader of every release of the family loads all of it.
std::vector<std::string> check(const LoaderElf& elf, const Family& family);

}  // namespace stackmapd::bpfloader

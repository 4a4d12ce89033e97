// SPDX-License-Identifier: GPL-2.0
// SymbolIndex against its reference, elfutils' own dwfl_module_addrinfo,
// on real binaries of this machine.
#include "daemon/symbols/symbol_index.h"

#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace stackmapd {
namespace {

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

struct Module {
  Dwfl* dwfl = dwfl_begin(&kCallbacks);
  Dwfl_Module* mod = nullptr;
  explicit Module(const std::string& path) {
    mod = dwfl_report_offline(dwfl, path.c_str(), path.c_str(), -1);
    dwfl_report_end(dwfl, nullptr, nullptr);
  }
  ~Module() { dwfl_end(dwfl); }
  // Every `step`th address of the executable sections, bias included.
  std::vector<Dwarf_Addr> code_addresses(uint64_t step, bool edges) const {
    std::vector<Dwarf_Addr> out;
    GElf_Addr bias = 0;
    Elf* elf = dwfl_module_getelf(mod, &bias);
    for (Elf_Scn* scn = nullptr; elf && (scn = elf_nextscn(elf, scn));) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR)) continue;
      for (uint64_t a = sh.sh_addr; a < sh.sh_addr + sh.sh_size; a += step) out.push_back(a + bias);
    }
    // And the edges, where off-by-ones live: each function's first, last and one-past byte.
    for (int i = 1; edges && i < dwfl_module_getsymtab(mod); ++i) {
      GElf_Sym sym;
      GElf_Addr a = 0;
      if (!dwfl_module_getsym_info(mod, i, &sym, &a, nullptr, nullptr, nullptr) || !a) continue;
      const int type = GELF_ST_TYPE(sym.st_info);
      if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
      out.insert(out.end(), {a, a + sym.st_size - (sym.st_size > 0), a + sym.st_size});
    }
    return out;
  }
};

std::string addrinfo(Dwfl_Module* mod, Dwarf_Addr a) {
  GElf_Off off = 0;
  GElf_Sym sym;
  const char* n = dwfl_module_addrinfo(mod, a, &off, &sym, nullptr, nullptr, nullptr);
  return n ? std::string(n) + "+" + std::to_string(off) : "-";
}

std::string indexed(const SymbolIndex& idx, Dwarf_Addr a) {
  GElf_Off off = 0;
  const char* n = idx.lookup(a, &off);
  return n ? std::string(n) + "+" + std::to_string(off) : "-";
}

void expect_same_as_addrinfo(const std::string& path, uint64_t step) {
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not on this machine";
  Module m(path);
  ASSERT_NE(m.mod, nullptr) << path;
  ASSERT_GT(dwfl_module_getsymtab(m.mod), 0) << path;
  const SymbolIndex idx(m.mod);
  const auto addrs = m.code_addresses(step, true);
  ASSERT_GT(addrs.size(), 100u) << path;
  size_t named = 0, wrong = 0;
  for (Dwarf_Addr a : addrs) {
    const std::string want = addrinfo(m.mod, a);
    named += want != "-";
    if (indexed(idx, a) != want && ++wrong <= 5)
      ADD_FAILURE() << path << " @0x" << std::hex << a << ": " << indexed(idx, a)
                    << ", dwfl_module_addrinfo: " << want;
  }
  EXPECT_EQ(wrong, 0u) << "of " << addrs.size() << " addresses";
  EXPECT_GT(named, addrs.size() / 2) << path;
}

TEST(SymbolIndex, MatchesAddrinfoOnThisTestBinary) {
  expect_same_as_addrinfo("/proc/self/exe", 97);
}

TEST(SymbolIndex, MatchesAddrinfoOnLibc) {
  expect_same_as_addrinfo("/usr/lib/x86_64-linux-gnu/libc.so.6", 97);
}

// Large C++ library: also prints the time per lookup, old and new.
TEST(SymbolIndex, MatchesAddrinfoOnLibLLVM) {
  const std::string path = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1";
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not on this machine";
  Module m(path);
  ASSERT_NE(m.mod, nullptr);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  const SymbolIndex idx(m.mod);
  const double build_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  const auto addrs = m.code_addresses(99991, false);  // addrinfo: ~10 ms each
  std::vector<std::string> want, got;
  t0 = clock::now();
  for (Dwarf_Addr a : addrs) want.push_back(addrinfo(m.mod, a));
  const double old_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
  t0 = clock::now();
  for (Dwarf_Addr a : addrs) got.push_back(indexed(idx, a));
  const double new_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
  EXPECT_EQ(got, want);
  printf(
      "libLLVM-14: %d symbols, index built in %.1f ms; %zu lookups: addrinfo %.1f us each, "
      "index %.2f us each\n",
      dwfl_module_getsymtab(m.mod), build_ms, addrs.size(), old_us / addrs.size(),
      new_us / addrs.size());
}

}  // namespace
}  // namespace stackmapd

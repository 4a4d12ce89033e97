// SPDX-License-Identifier: GPL-2.0
// Address-to-symbol lookup for one libdwfl module by binary search, giving
// what dwfl_module_addrinfo gives: elfutils scans the whole symbol table per
// address, which for libLLVM (100k+ symbols) dominated --user-stacks.
#pragma once

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <vector>

namespace stackmapd {

class SymbolIndex {
 public:
  // Reads the module's symbol table once. Names are not copied: the index
  // keeps symbol table indices, and the names stay in the ELF the Dwfl owns,
  // so the index must not outlive the module.
  explicit SymbolIndex(Dwfl_Module* mod);

  // dwfl_module_addrinfo's answer for `addr` (bias included): the name and
  // *off = addr - symbol address, or nullptr.
  const char* lookup(Dwarf_Addr addr, GElf_Off* off) const;

 private:
  struct Entry {
    uint64_t addr;     // symbol address, bias included
    uint64_t size;     // st_size; for a sizeless symbol, up to what may follow it
    uint64_t max_end;  // highest end of sized entries up to this one (sized list)
    uint32_t ndx;      // symbol table index: elfutils' tie order, and the name
    uint8_t bind;      // elfutils' binding_value: global 3, weak 2, local 1, else 0
    bool global;       // in the global part of the table, searched first
  };
  const char* name_of(const Entry& e) const;

  Dwfl_Module* mod_;
  std::vector<Entry> sized_;     // by addr
  std::vector<Entry> sizeless_;  // by addr (assembly labels: the fallback)
};

}  // namespace stackmapd

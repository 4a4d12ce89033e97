// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/symbol_index.h"

#include <gelf.h>

#include <algorithm>

namespace stackmapd {

namespace {

uint8_t binding_value(const GElf_Sym& s) {
  switch (GELF_ST_BIND(s.st_info)) {
    case STB_GLOBAL: return 3;
    case STB_WEAK: return 2;
    case STB_LOCAL: return 1;
    default: return 0;
  }
}

// The section's end, bias included, or 0 when unknown: a sizeless symbol
// names only addresses in its own section (elfutils' same_section).
uint64_t section_end(Elf* elf, GElf_Word shndx, Dwarf_Addr sym_addr, GElf_Addr value) {
  if (!elf || shndx == SHN_UNDEF || shndx >= SHN_LORESERVE) return 0;
  GElf_Shdr sh;
  Elf_Scn* scn = elf_getscn(elf, shndx);
  if (!scn || !gelf_getshdr(scn, &sh)) return 0;
  return sh.sh_addr + sh.sh_size + (sym_addr - value);
}

}  // namespace

SymbolIndex::SymbolIndex(Dwfl_Module* mod) : mod_(mod) {
  const int n = dwfl_module_getsymtab(mod);
  const int first_global = dwfl_module_getsymtab_first_global(mod);
  if (n <= 0 || first_global < 0) return;
  std::vector<uint64_t> sizeless_limit;  // section end per sizeless entry
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    GElf_Word shndx = 0;
    Elf* elf = nullptr;
    const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, nullptr);
    // The symbols elfutils' search considers.
    if (!name || !name[0] || sym.st_shndx == SHN_UNDEF) continue;
    const int type = GELF_ST_TYPE(sym.st_info);
    if (type == STT_SECTION || type == STT_FILE || type == STT_TLS) continue;
    Entry e{addr,
            sym.st_size,
            0,
            static_cast<uint32_t>(i),
            binding_value(sym),
            first_global == 0 || i >= first_global};
    if (sym.st_size) {
      sized_.push_back(e);
    } else if (shndx < SHN_LORESERVE) {  // absolute labels match only exactly: never code
      e.size = section_end(elf, shndx, addr, sym.st_value);
      sizeless_.push_back(e);
    }
  }
  const auto by_addr = [](const Entry& a, const Entry& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.ndx < b.ndx;
  };
  std::sort(sized_.begin(), sized_.end(), by_addr);
  std::sort(sizeless_.begin(), sizeless_.end(), by_addr);
  uint64_t max_end = 0;
  for (Entry& e : sized_) max_end = e.max_end = std::max(max_end, e.addr + e.size);
  // A sizeless symbol reaches to the next symbol of either kind, within its section
  // (e.size holds the section end until here).
  size_t j = 0;
  for (size_t i = 0; i < sizeless_.size(); ++i) {
    Entry& e = sizeless_[i];
    uint64_t end = e.size ? e.size : UINT64_MAX;
    while (j < sized_.size() && sized_[j].addr <= e.addr) ++j;
    if (j < sized_.size()) end = std::min(end, sized_[j].addr);
    for (size_t k = i + 1; k < sizeless_.size(); ++k)
      if (sizeless_[k].addr > e.addr) {
        end = std::min(end, sizeless_[k].addr);
        break;
      }
    e.size = end > e.addr ? end - e.addr : 0;
  }
  sized_.shrink_to_fit();
  sizeless_.shrink_to_fit();
}

const char* SymbolIndex::name_of(const Entry& e) const {
  GElf_Sym sym;
  GElf_Addr addr = 0;
  return dwfl_module_getsym_info(mod_, static_cast<int>(e.ndx), &sym, &addr, nullptr, nullptr,
                                 nullptr);
}

const char* SymbolIndex::lookup(Dwarf_Addr addr, GElf_Off* off) const {
  const auto after = [](Dwarf_Addr a, const Entry& e) { return a < e.addr; };
  // Sized symbols containing addr: walk back while an earlier one may still
  // reach it. Usually one or two (aliases at one address).
  auto it = std::upper_bound(sized_.begin(), sized_.end(), addr, after);
  const uint64_t reach = it == sized_.begin() ? 0 : std::prev(it)->max_end;
  std::vector<const Entry*> hits;  // few; elfutils picks among them in table order
  for (auto i = it; i != sized_.begin() && std::prev(i)->max_end > addr;) {
    --i;
    if (addr - i->addr < i->size) hits.push_back(&*i);
  }
  std::sort(hits.begin(), hits.end(), [](auto* a, auto* b) { return a->ndx < b->ndx; });
  // elfutils' try_sym_value for sized symbols, globals first, then locals.
  const Entry* best = nullptr;
  for (bool global : {true, false}) {
    for (const Entry* e : hits) {
      if (e->global != global) continue;
      if (!best || best->addr < e->addr || best->bind < e->bind ||
          (best->addr == e->addr && ((best->size > e->size && best->bind <= e->bind) ||
                                     (best->size >= e->size && best->bind < e->bind))))
        best = e;
    }
    if (best) break;
  }
  // Else the nearest label below, unless a sized symbol ends past it.
  if (!best) {
    auto l = std::upper_bound(sizeless_.begin(), sizeless_.end(), addr, after);
    if (l != sizeless_.begin()) {
      --l;
      // Aliases at one address: the best binding, then the first in the table.
      auto first = l;
      while (first != sizeless_.begin() && std::prev(first)->addr == l->addr) --first;
      const Entry* pick = &*first;
      for (auto k = first; k <= l; ++k)
        if (k->bind > pick->bind) pick = &*k;
      if (addr - pick->addr < pick->size && pick->addr >= reach) best = pick;
    }
  }
  if (!best) return nullptr;
  *off = addr - best->addr;
  return name_of(*best);
}

}  // namespace stackmapd

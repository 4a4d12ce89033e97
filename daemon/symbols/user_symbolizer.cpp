// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/user_symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "daemon/symbols/symbol_index.h"

namespace stackmapd {

namespace {

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,  // debuginfod too, with DEBUGINFOD_URLS
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  free(d);
  return out;
}

std::string with_offset(const std::string& name, uint64_t off) {
  char buf[24];
  snprintf(buf, sizeof(buf), "+0x%llx", static_cast<unsigned long long>(off));
  return name + buf;
}

}  // namespace

// One ELF file reported to its own Dwfl session, which owns the file, its
// symbol table and debug info until dwfl_end.
struct UserSymbolizer::Binary {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  std::optional<SymbolIndex> symbols;  // points into mod: reset before dwfl_end
  uint64_t last_use = 0;
  ~Binary() {
    symbols.reset();
    if (dwfl) dwfl_end(dwfl);
  }
};

UserSymbolizer::UserSymbolizer(size_t max_binaries) : max_binaries_(max_binaries) {}
UserSymbolizer::~UserSymbolizer() = default;

UserSymbolizer::Binary* UserSymbolizer::binary(const std::string& key, const std::string& file) {
  auto it = binaries_.find(key);
  if (it == binaries_.end()) {
    if (binaries_.size() >= max_binaries_) {
      auto lru = binaries_.begin();
      for (auto i = binaries_.begin(); i != binaries_.end(); ++i)
        if (i->second->last_use < lru->second->last_use) lru = i;
      binaries_.erase(lru);
      ++evictions_;
    }
    auto b = std::make_unique<Binary>();
    b->dwfl = dwfl_begin(&kCallbacks);
    if (b->dwfl) {
      b->mod = dwfl_report_offline(b->dwfl, key.c_str(), file.c_str(), -1);
      dwfl_report_end(b->dwfl, nullptr, nullptr);
      if (b->mod) b->symbols.emplace(b->mod);
    }
    // A file that cannot be read stays cached as such: it is not retried per frame.
    it = binaries_.emplace(key, std::move(b)).first;
  }
  it->second->last_use = ++clock_;
  return it->second.get();
}

UserSymbolizer::Result UserSymbolizer::resolve(const std::string& key, const std::string& file,
                                               uint64_t file_offset, bool is_return) {
  Result r;
  Binary* b = binary(key, file);
  if (!b->mod) return r;
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(b->mod, &bias);  // owned by the Dwfl
  if (!elf) return r;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return r;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    if (file_offset >= ph.p_offset && file_offset < ph.p_offset + ph.p_filesz) {
      r.elf_addr = file_offset - ph.p_offset + ph.p_vaddr;
      break;
    }
  }
  if (!r.elf_addr) return r;
  const Dwarf_Addr at = r.elf_addr + bias;
  const Dwarf_Addr lookup = is_return && at > 0 ? at - 1 : at;

  // Inlined functions around the address, innermost first (perf's order).
  Dwarf_Addr cu_bias = 0;
  if (Dwarf_Die* cu = dwfl_module_addrdie(b->mod, lookup, &cu_bias)) {
    Dwarf_Die* scopes = nullptr;
    const int n = dwarf_getscopes(cu, lookup - cu_bias, &scopes);  // malloc'd, freed below
    for (int i = 0; i < n; ++i) {
      if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine) continue;
      Dwarf_Attribute attr;
      const char* name = dwarf_formstring(dwarf_attr_integrate(&scopes[i], DW_AT_name, &attr));
      r.symbols.push_back(name ? demangle(name) : "[inlined]");
    }
    free(scopes);
  }
  GElf_Off off = 0;
  if (const char* name = b->symbols->lookup(lookup, &off)) {
    // The offset of the address itself, as perf and addr2line print it.
    r.symbols.push_back(with_offset(demangle(name), at - (lookup - off)));
  } else {
    r.symbols.clear();  // inlined names without their function would mislead
  }
  if (Dwfl_Line* line = dwfl_module_getsrc(b->mod, lookup)) {
    int lineno = 0;
    if (const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr))
      r.srcline = std::string(src) + ":" + std::to_string(lineno);
  }
  return r;
}

}  // namespace stackmapd

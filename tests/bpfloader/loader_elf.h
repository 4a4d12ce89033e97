// SPDX-License-Identifier: GPL-2.0
// An object for Android's platform bpfloader, read the way that loader reads
// it (../shared/notes/android-bpfloader.md, section 2): every name through
// the section-header string table, definitions split by a fixed stride and
// named by the symbols of their section sorted by value, a program's
// definition found as "<first symbol of its section>_def". Shared by the rule
// check (loader_rules.h) and the host test's loader (tests/pinned/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stackmapd::bpfloader {

struct Section {
  size_t index = 0;
  std::string name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint32_t link = 0, info = 0;
  std::vector<uint8_t> data;
};

struct Symbol {
  std::string name;  // resolved through e_shstrndx, as the loader does
  uint64_t value = 0, size = 0;
  uint16_t shndx = 0;
  uint8_t type = 0, bind = 0;
  size_t order = 0;  // position in .symtab: ties in value keep this order
};

struct Relocation {
  uint64_t offset = 0;
  std::string symbol;
};

class LoaderElf {
 public:
  // Throws std::runtime_error naming the file and what is wrong.
  explicit LoaderElf(const std::string& path);

  const std::string& path() const { return path_; }
  bool elf64_le_bpf = false;
  uint16_t elf_type = 0;
  size_t shstrndx = 0;
  size_t symtab_strtab = 0;  // .symtab's sh_link
  std::vector<Section> sections;
  std::vector<Symbol> symbols;

  const Section* section(const std::string& name) const;
  // The symbols in section `index`, sorted by value (stable), as the loader
  // lists the names of its definitions.
  std::vector<Symbol> symbols_in(size_t index) const;
  // The first 4 bytes of a section as a little-endian u32; nullopt if absent.
  std::optional<uint32_t> section_u32(const std::string& name) const;
  // The relocations in `.rel<section>` right after it (the only place the
  // loader looks); empty when there is none.
  std::vector<Relocation> relocations(const Section& code) const;

 private:
  std::string path_;
};

}  // namespace stackmapd::bpfloader

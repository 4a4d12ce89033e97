// SPDX-License-Identifier: GPL-2.0
#include "tests/bpfloader/loader_elf.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace stackmapd::bpfloader {

namespace {

struct ElfFile {
  int fd = -1;
  Elf* elf = nullptr;
  ~ElfFile() {
    if (elf) elf_end(elf);
    if (fd >= 0) close(fd);
  }
};

}  // namespace

LoaderElf::LoaderElf(const std::string& path) : path_(path) {
  auto fail = [&](const std::string& why) { throw std::runtime_error(path + ": " + why); };
  if (elf_version(EV_CURRENT) == EV_NONE) fail("libelf is too old");
  ElfFile f;
  f.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) fail(std::strerror(errno));
  f.elf = elf_begin(f.fd, ELF_C_READ, nullptr);
  if (!f.elf || elf_kind(f.elf) != ELF_K_ELF) fail("not an ELF file");
  GElf_Ehdr eh;
  if (!gelf_getehdr(f.elf, &eh)) fail("no ELF header");
  elf_type = eh.e_type;
  elf64_le_bpf = eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB &&
                 eh.e_machine == EM_BPF;
  if (elf_getshdrstrndx(f.elf, &shstrndx) != 0) fail("no section-header string table");

  Elf_Scn* scn = nullptr;
  size_t symtab = 0;
  while ((scn = elf_nextscn(f.elf, scn))) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) fail("bad section header");
    Section s;
    s.index = elf_ndxscn(scn);
    const char* name = elf_strptr(f.elf, shstrndx, sh.sh_name);
    s.name = name ? name : "";
    s.type = sh.sh_type;
    s.flags = sh.sh_flags;
    s.link = sh.sh_link;
    s.info = sh.sh_info;
    if (sh.sh_type != SHT_NOBITS) {
      Elf_Data* d = elf_getdata(scn, nullptr);
      if (d && d->d_buf)
        s.data.assign(static_cast<uint8_t*>(d->d_buf), static_cast<uint8_t*>(d->d_buf) + d->d_size);
    }
    if (sh.sh_type == SHT_SYMTAB) {
      symtab = s.index;
      symtab_strtab = sh.sh_link;
    }
    sections.push_back(std::move(s));
  }
  if (!symtab) fail("no symbol table: the loader names maps and programs by their symbols");
  Elf_Data* d = elf_getdata(elf_getscn(f.elf, symtab), nullptr);
  GElf_Sym sym;
  for (size_t i = 0; d && gelf_getsym(d, static_cast<int>(i), &sym); ++i) {
    Symbol s;
    // Like the loader: the section-header string table, whatever sh_link says.
    const char* name = elf_strptr(f.elf, shstrndx, sym.st_name);
    s.name = name ? name : "";
    s.value = sym.st_value;
    s.size = sym.st_size;
    s.shndx = sym.st_shndx;
    s.type = GELF_ST_TYPE(sym.st_info);
    s.bind = GELF_ST_BIND(sym.st_info);
    s.order = i;
    symbols.push_back(std::move(s));
  }
}

const Section* LoaderElf::section(const std::string& name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<Symbol> LoaderElf::symbols_in(size_t index) const {
  std::vector<Symbol> out;
  for (const auto& s : symbols)
    if (s.shndx == index && s.order != 0) out.push_back(s);
  std::stable_sort(out.begin(), out.end(),
                   [](const Symbol& a, const Symbol& b) { return a.value < b.value; });
  return out;
}

std::optional<uint32_t> LoaderElf::section_u32(const std::string& name) const {
  const Section* s = section(name);
  if (!s) return std::nullopt;
  if (s->data.size() < 4) return 0;  // too short: the rules reject it
  uint32_t v;
  std::memcpy(&v, s->data.data(), 4);  // little-endian hosts only (x86-64, arm64)
  return v;
}

std::vector<Relocation> LoaderElf::relocations(const Section& code) const {
  std::vector<Relocation> out;
  if (code.index >= sections.size()) return out;
  const Section& rel = sections[code.index];  // sections[] starts at index 1
  if (rel.type != SHT_REL || rel.name != ".rel" + code.name) return out;
  for (size_t off = 0; off + sizeof(Elf64_Rel) <= rel.data.size(); off += sizeof(Elf64_Rel)) {
    Elf64_Rel r;
    std::memcpy(&r, rel.data.data() + off, sizeof(r));
    const size_t sym = ELF64_R_SYM(r.r_info);
    out.push_back({r.r_offset, sym < symbols.size() ? symbols[sym].name : ""});
  }
  return out;
}

}  // namespace stackmapd::bpfloader

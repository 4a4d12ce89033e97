// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/elf_probes.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

namespace {

constexpr uint32_t kStapsdtNoteType = 3;  // <sys/sdt.h>'s _SDT_NOTE_TYPE (version 3)

// An open ELF file, ended with its owner.
class ElfFile {
 public:
  explicit ElfFile(const std::string& path) : fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (!fd_) throw Error("cannot open " + path + ": " + std::strerror(errno));
    elf_version(EV_CURRENT);
    elf_ = elf_begin(fd_.get(), ELF_C_READ_MMAP, nullptr);
    if (!elf_ || elf_kind(elf_) != ELF_K_ELF) {
      if (elf_) elf_end(elf_);
      throw Error(path + " is no ELF file: -u takes an executable or a shared library");
    }
  }
  ~ElfFile() { elf_end(elf_); }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;
  Elf* get() const { return elf_; }

 private:
  UniqueFd fd_;
  Elf* elf_ = nullptr;
};

// The loadable segments, where a virtual address becomes a file offset.
struct Segment {
  uint64_t vaddr, memsz, offset;
  bool exec;
};

std::vector<Segment> load_segments(Elf* elf) {
  std::vector<Segment> out;
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return out;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
      out.push_back({ph.p_vaddr, ph.p_memsz, ph.p_offset, (ph.p_flags & PF_X) != 0});
  }
  return out;
}

// The file offset of `addr`, in a segment that is code (or data); 0: none.
uint64_t file_offset(const std::vector<Segment>& segs, uint64_t addr, bool code) {
  for (const Segment& s : segs)
    if (s.exec == code && addr >= s.vaddr && addr < s.vaddr + s.memsz)
      return addr - s.vaddr + s.offset;
  return 0;
}

void read_functions(Elf* elf, Elf_Scn* scn, const GElf_Shdr& sh, const std::vector<Segment>& segs,
                    std::map<std::string, ElfFunction>& out, std::set<std::string>& ifuncs) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || !sh.sh_entsize) return;
  const size_t count = sh.sh_size / sh.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
    const int type = GELF_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
      continue;
    const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
    if (!name || !*name) continue;
    if (type == STT_GNU_IFUNC) {
      ifuncs.insert(name);
      continue;
    }
    const uint64_t off = file_offset(segs, sym.st_value, true);
    if (off) out.try_emplace(name, ElfFunction{name, off, sym.st_size});
  }
}

// One .note.stapsdt note's descriptor: pc, base and semaphore addresses,
// then provider, name and arguments, each NUL-terminated.
bool parse_stapsdt(const char* desc, size_t size, size_t addr_size, uint64_t addrs[3],
                   std::string strs[3]) {
  if (size < 3 * addr_size) return false;
  for (int k = 0; k < 3; ++k) {
    if (addr_size == 8) {
      std::memcpy(&addrs[k], desc + 8 * k, 8);
    } else {
      uint32_t a;
      std::memcpy(&a, desc + 4 * k, 4);
      addrs[k] = a;
    }
  }
  size_t at = 3 * addr_size;
  for (int k = 0; k < 3; ++k) {
    const void* end = std::memchr(desc + at, '\0', size - at);
    if (!end) return false;
    strs[k].assign(desc + at, static_cast<const char*>(end));
    at = static_cast<const char*>(end) - desc + 1;
    if (at > size) return false;
  }
  return true;
}

}  // namespace

ElfProbes read_elf_probes(const std::string& path) {
  ElfFile file(path);
  Elf* elf = file.get();
  const std::vector<Segment> segs = load_segments(elf);
  const size_t addr_size = gelf_getclass(elf) == ELFCLASS32 ? 4 : 8;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0)
    throw Error(path + ": cannot read its section headers: " + elf_errmsg(-1));
  std::map<std::string, ElfFunction> functions;
  std::set<std::string> ifuncs;
  std::vector<Elf_Scn*> notes;
  uint64_t stapsdt_base = 0;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
      read_functions(elf, scn, sh, segs, functions, ifuncs);
    else if (sh.sh_type == SHT_NOTE && name && std::strcmp(name, ".note.stapsdt") == 0)
      notes.push_back(scn);
    else if (name && std::strcmp(name, ".stapsdt.base") == 0) stapsdt_base = sh.sh_addr;
  }
  ElfProbes out;
  for (auto& [name, fn] : functions) out.functions.push_back(std::move(fn));
  out.ifuncs.assign(ifuncs.begin(), ifuncs.end());
  for (Elf_Scn* scn : notes) {
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    GElf_Nhdr nh;
    size_t off = 0, name_at = 0, desc_at = 0;
    while ((off = gelf_getnote(data, off, &nh, &name_at, &desc_at)) > 0) {
      const char* base = static_cast<const char*>(data->d_buf);
      if (nh.n_type != kStapsdtNoteType || nh.n_namesz != sizeof("stapsdt") ||
          std::memcmp(base + name_at, "stapsdt", sizeof("stapsdt")) != 0)
        continue;
      uint64_t addrs[3];  // pc, .stapsdt.base at link time, semaphore
      std::string strs[3];
      if (!parse_stapsdt(base + desc_at, nh.n_descsz, addr_size, addrs, strs)) continue;
      // prelink moves .stapsdt.base's section header but not the notes:
      // the difference applies to the pc and the semaphore alike
      // (systemtap's UserSpaceProbeImplementation).
      const uint64_t slide = stapsdt_base && addrs[1] ? stapsdt_base - addrs[1] : 0;
      const uint64_t pc = file_offset(segs, addrs[0] + slide, true);
      if (!pc) continue;
      const uint64_t sema = addrs[2] ? file_offset(segs, addrs[2] + slide, false) : 0;
      out.usdt.push_back({strs[0], strs[1], strs[2], pc, sema});
    }
  }
  return out;
}

std::string elf_soname(const std::string& path) {
  try {
    ElfFile file(path);
    Elf* elf = file.get();
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
        GElf_Dyn dyn;
        if (gelf_getdyn(data, static_cast<int>(i), &dyn) && dyn.d_tag == DT_SONAME) {
          const char* s = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
          return s ? s : "";
        }
      }
    }
  } catch (const Error&) {
  }
  return "";
}

}  // namespace stackmapd

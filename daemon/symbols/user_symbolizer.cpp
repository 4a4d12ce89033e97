// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/user_symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "daemon/symbols/symbol_index.h"
#include "daemon/sys/untrusted_file.h"

namespace stackmapd {

namespace {

// The standard search, debuginfod included, only when DEBUGINFOD_URLS names
// a server: elfutils 0.188 otherwise still dlopens libdebuginfod (curl,
// gnutls, libcrypto: 5 MB of RSS) for every binary without a local debug
// file. Files are opened as /proc/self/fd/N, so the build id is the one
// local way to find debug info: .gnu_debuglink's directories are the fd's.
int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, GElf_Addr base,
                   const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                   char** debuginfo_file_name) {
  static const bool debuginfod = [] {
    const char* urls = getenv("DEBUGINFOD_URLS");
    return urls && urls[0];
  }();
  return (debuginfod ? dwfl_standard_find_debuginfo : dwfl_build_id_find_debuginfo)(
      mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
}

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo,
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

// One ELF file reported to its own Dwfl session, which owns the file's
// mapping, its symbol table and debug info until dwfl_end.
struct UserSymbolizer::Session {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  std::optional<SymbolIndex> symbols;  // points into mod: reset before dwfl_end
  std::chrono::steady_clock::time_point last_use;
  // Reads the file through a copy of `fd`, never by a path: in the parser
  // sandbox (nobody) a path may not open what the daemon could.
  Session(const std::string& name, int fd) {
    dwfl = dwfl_begin(&kCallbacks);
    if (!dwfl) return;
    const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // libdwfl's on success
    if (own < 0) return;
    mod = dwfl_report_offline(dwfl, name.c_str(), name.c_str(), own);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (mod) symbols.emplace(mod);
  }
  ~Session() {
    symbols.reset();
    if (dwfl) dwfl_end(dwfl);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

// A binary as long as it is cached: its file, held open so that it can be
// read again after its process (or the file) is gone, and the names found.
struct UserSymbolizer::Binary {
  UniqueFd fd;  // closed: unreadable, every frame unnamed
  std::unique_ptr<Session> session;
  std::unordered_map<uint64_t, Result> frames;  // (file offset << 1 | is_return) -> names
  uint64_t last_use = 0;
};

UserSymbolizer::UserSymbolizer(size_t max_binaries) : max_binaries_(max_binaries) {}
UserSymbolizer::~UserSymbolizer() = default;

UserSymbolizer::Binary* UserSymbolizer::binary(const std::string& key,
                                               const std::function<UniqueFd()>& open) {
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
    b->fd = open();
    // A file that cannot be read stays cached as such: it is not retried per frame.
    it = binaries_.emplace(key, std::move(b)).first;
  }
  it->second->last_use = ++clock_;
  return it->second.get();
}

size_t UserSymbolizer::open_sessions() const {
  size_t n = 0;
  for (const auto& [key, b] : binaries_) n += b->session != nullptr;
  return n;
}

size_t UserSymbolizer::close_idle(std::chrono::steady_clock::time_point now) {
  size_t closed = 0;
  for (auto& [key, b] : binaries_)
    if (b->session && now - b->session->last_use >= kIdle) {
      b->session.reset();
      ++closed;
    }
  // libdw's buffers are freed into this thread's arena: return them.
  if (closed) malloc_trim(0);
  return closed;
}

UserSymbolizer::Result UserSymbolizer::resolve(const std::string& key, const std::string& file,
                                               uint64_t file_offset, bool is_return) {
  return resolve(
      key,
      [&file] {
        std::optional<OpenedFile> f = open_regular(file, Links::kernel, nullptr);
        return f ? std::move(f->fd) : UniqueFd();
      },
      file_offset, is_return);
}

UserSymbolizer::Result UserSymbolizer::resolve(const std::string& key, UniqueFd fd,
                                               uint64_t file_offset, bool is_return) {
  return resolve(
      key, [&fd] { return std::move(fd); }, file_offset, is_return);
}

UserSymbolizer::Result UserSymbolizer::resolve(const std::string& key,
                                               const std::function<UniqueFd()>& open,
                                               uint64_t file_offset, bool is_return) {
  Binary* b = binary(key, open);
  if (!b->fd) return {};
  const uint64_t frame = file_offset << 1 | is_return;
  if (auto it = b->frames.find(frame); it != b->frames.end()) return it->second;
  if (!b->session) {
    b->session = std::make_unique<Session>(key, b->fd.get());
    if (!b->session->mod) {  // no ELF
      b->session.reset();
      b->fd.reset();
      return {};
    }
  }
  b->session->last_use = std::chrono::steady_clock::now();
  if (b->frames.size() >= kMaxFramesPerBinary) b->frames.clear();
  return b->frames[frame] = lookup(*b->session, file_offset, is_return);
}

UserSymbolizer::Result UserSymbolizer::lookup(Session& s, uint64_t file_offset, bool is_return) {
  Result r;
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(s.mod, &bias);  // owned by the Dwfl
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
  if (Dwarf_Die* cu = dwfl_module_addrdie(s.mod, lookup, &cu_bias)) {
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
  if (const char* name = s.symbols->lookup(lookup, &off)) {
    // The offset of the address itself, as perf and addr2line print it.
    r.symbols.push_back(with_offset(demangle(name), at - (lookup - off)));
  } else {
    r.symbols.clear();  // inlined names without their function would mislead
  }
  if (Dwfl_Line* line = dwfl_module_getsrc(s.mod, lookup)) {
    int lineno = 0;
    if (const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr))
      r.srcline = std::string(src) + ":" + std::to_string(lineno);
  }
  return r;
}

}  // namespace stackmapd

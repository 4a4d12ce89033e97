// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/uprobe_sources.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "daemon/symbols/elf_probes.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/sys/error.h"
#include "daemon/sys/untrusted_file.h"

namespace stackmapd {

namespace {

// Each site is a link of its own (a uprobe perf event): a bound keeps a
// broad glob from opening thousands.
constexpr size_t kMaxUprobes = 512;

constexpr const char* kForm =
    "use BINARY:SYMBOL[+OFFSET] or BINARY:usdt:PROVIDER:NAME, e.g. /usr/bin/bash:readline";

bool is_glob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

bool matches(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

struct Spec {
  std::string binary;
  bool usdt = false;
  std::string symbol;  // or the USDT provider
  std::string name;    // USDT
  uint64_t offset = 0;
};

Spec parse_spec(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return Error("bad -u '" + spec + "'" + (why.empty() ? "" : " (" + why + ")") + ": " + kForm);
  };
  // BINARY ends at the first ':' after its last '/'.
  const size_t slash = spec.rfind('/');
  const size_t colon = spec.find(':', slash == std::string::npos ? 0 : slash);
  if (colon == std::string::npos || colon == 0) throw bad("");
  Spec s;
  s.binary = spec.substr(0, colon);
  const std::string rest = spec.substr(colon + 1);
  if (rest.rfind("usdt:", 0) == 0) {
    const std::string probe = rest.substr(5);
    const size_t c = probe.find(':');
    if (c == std::string::npos || c == 0 || c + 1 == probe.size() ||
        probe.find(':', c + 1) != std::string::npos)
      throw bad("a USDT probe is PROVIDER:NAME");
    s.usdt = true;
    s.symbol = probe.substr(0, c);
    s.name = probe.substr(c + 1);
    return s;
  }
  const size_t plus = rest.find('+');
  s.symbol = rest.substr(0, plus);
  if (s.symbol.empty() || s.symbol.find(':') != std::string::npos) throw bad("");
  if (plus != std::string::npos) {
    const std::string off = rest.substr(plus + 1);
    char* end = nullptr;
    errno = 0;
    s.offset = std::strtoull(off.c_str(), &end, 0);
    if (off.empty() || !std::isdigit(static_cast<unsigned char>(off[0])) || *end || errno)
      throw bad("the offset is a number of bytes, such as +4 or +0x10");
    if (is_glob(s.symbol)) throw bad("an offset applies to one function, not a glob");
  }
  return s;
}

bool regular_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// A file the process maps, by file name or soname ("libc.so.6"), or by
// their stem ("libc").
std::optional<std::string> mapped_binary(const std::string& name, uint32_t pid) {
  std::optional<ProcessMaps> maps = ProcessMaps::read(pid);
  if (!maps) return std::nullopt;
  auto named = [&](const std::string& n) { return n == name || n.rfind(name + ".so", 0) == 0; };
  for (const MappedFile& f : maps->files())
    // The soname read through the kernel's link: the path is the process's.
    if (f.path[0] == '/' && (named(base_name(f.path)) || named(elf_soname(f.open_path))))
      return f.path;
  return std::nullopt;
}

std::optional<std::string> in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + name;
    if (regular_file(file) && access(file.c_str(), X_OK) == 0) return file;
  }
  return std::nullopt;
}

// The ELF machine of `path` (e_machine), 0 when no ELF file: a library
// directory may hold another architecture's (multiarch, cross toolchains).
uint16_t elf_machine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char h[20] = {};
  if (!in.read(reinterpret_cast<char*>(h), sizeof(h)) || std::memcmp(h, "\177ELF", 4) != 0)
    return 0;
  return static_cast<uint16_t>(h[18] | h[19] << 8);  // little-endian hosts
}

// A library as the dynamic linker would find it by name: the directories of
// /etc/ld.so.conf.d, then the default ones; one of this machine's
// architecture, named NAME or NAME.so*.
std::optional<std::string> in_library_dirs(const std::string& name) {
  std::vector<std::string> dirs;
  std::error_code ec;
  std::vector<std::filesystem::path> confs;
  for (const auto& e : std::filesystem::directory_iterator("/etc/ld.so.conf.d", ec))
    if (e.path().extension() == ".conf") confs.push_back(e.path());
  std::sort(confs.begin(), confs.end());
  for (const auto& conf : confs) {
    std::ifstream in(conf);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] == '/') dirs.push_back(line);
  }
  for (const char* d : {"/lib", "/usr/lib", "/lib64", "/usr/lib64"}) dirs.push_back(d);
  const uint16_t ours = elf_machine("/proc/self/exe");
  for (const std::string& dir : dirs) {
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string file = e.path().filename().string();
      if (file == name || file.rfind(name + ".so", 0) == 0) found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    for (const std::string& f : found)
      if (regular_file(f) && elf_machine(f) == ours) return f;
  }
  return std::nullopt;
}

std::string find_binary(const std::string& binary, const std::vector<uint32_t>& pids) {
  if (binary.find('/') != std::string::npos) {
    struct stat st;
    if (stat(binary.c_str(), &st) != 0)
      throw Error("-u: no such binary " + binary + " (" + std::strerror(errno) +
                  "): give the path of an executable or shared library");
    if (!S_ISREG(st.st_mode))
      throw Error("-u: " + binary + " is " + file_kind(st.st_mode) +
                  ", not an executable or shared library: give the path of one");
    return binary;
  }
  for (uint32_t pid : pids)
    if (std::optional<std::string> f = mapped_binary(binary, pid)) return *f;
  if (std::optional<std::string> f = in_path(binary)) return *f;
  if (std::optional<std::string> f = in_library_dirs(binary)) return *f;
  throw Error("-u: no binary " + binary +
              (pids.empty()
                   ? std::string()
                   : " mapped by --pid " + std::to_string(pids.front()) +
                         (pids.size() > 1 ? " or the others" : "") + " (/proc/PID/maps),") +
              " in PATH or in the library directories (/etc/ld.so.conf.d): give its path");
}

}  // namespace

std::vector<UprobeTarget> resolve_uprobes(const std::vector<std::string>& specs,
                                          const std::vector<uint32_t>& pids) {
  std::vector<UprobeTarget> out;
  std::set<std::pair<std::string, uint64_t>> sites;  // (canonical file, offset)
  std::map<std::string, ElfProbes> read;             // by path, each file read once
  for (const std::string& text : specs) {
    const Spec spec = parse_spec(text);
    const std::string binary = find_binary(spec.binary, pids);
    auto [it, fresh] = read.try_emplace(binary);
    if (fresh) it->second = read_elf_probes(binary);
    const ElfProbes& elf = it->second;
    char* real = realpath(binary.c_str(), nullptr);
    const std::string canonical = real ? real : binary;
    std::free(real);
    auto add = [&](const std::string& source, uint64_t offset, uint64_t ref_ctr, bool entry,
                   const UsdtNote* note) {
      if (!sites.insert({canonical, offset}).second) return;
      out.push_back({source, binary, offset, ref_ctr, entry, note != nullptr,
                     note ? note->args : std::string()});
      if (out.size() > kMaxUprobes)
        throw Error("-u '" + text + "' brings the user-space probes to " +
                    std::to_string(out.size()) + ", more than " + std::to_string(kMaxUprobes) +
                    ": narrow the glob");
    };
    if (spec.usdt) {
      size_t found = 0;
      for (const UsdtNote& n : elf.usdt)
        if (matches(spec.symbol, n.provider) && matches(spec.name, n.name)) {
          ++found;
          add(binary + ":usdt:" + n.provider + ":" + n.name, n.offset, n.semaphore_offset, false,
              &n);
        }
      if (found) continue;
      std::set<std::string> have;
      for (const UsdtNote& n : elf.usdt) have.insert(n.provider + ":" + n.name);
      std::string list;
      for (const std::string& h : have) {
        if (list.size() > 300) {
          list += ", ...";
          break;
        }
        list += (list.empty() ? "" : ", ") + h;
      }
      throw Error(binary + " has no USDT probe " + spec.symbol + ":" + spec.name +
                  (have.empty() ? ": it has no USDT probes at all (no .note.stapsdt notes)"
                                : "; its probes (PROVIDER:NAME): " + list));
    }
    size_t found = 0;
    for (const ElfFunction& fn : elf.functions) {
      if (is_glob(spec.symbol) ? !matches(spec.symbol, fn.name) : fn.name != spec.symbol) continue;
      ++found;
      if (spec.offset && fn.size && spec.offset >= fn.size)
        throw Error("-u '" + text + "': " + fn.name + " is " + std::to_string(fn.size) +
                    " bytes long in " + binary + ": give an offset inside it");
      std::ostringstream off;
      if (spec.offset) off << "+0x" << std::hex << spec.offset;
      add(binary + ":" + fn.name + off.str(), fn.offset + spec.offset, 0, spec.offset == 0,
          nullptr);
    }
    if (!found && std::binary_search(elf.ifuncs.begin(), elf.ifuncs.end(), spec.symbol))
      throw Error(spec.symbol + " is an indirect function (IFUNC) in " + binary +
                  ": its symbol is the resolver that runs once at load; probe the "
                  "implementations it picks from instead, e.g. -u '" +
                  spec.binary + ":__" + spec.symbol + "_*' (nm -D " + binary + ")");
    if (!found)
      throw Error(binary + " has no function " +
                  (is_glob(spec.symbol) ? "matching '" + spec.symbol + "'" : spec.symbol) +
                  " in its symbol tables: see nm -D " + binary + " (or nm, if not stripped)");
  }
  return out;
}

}  // namespace stackmapd

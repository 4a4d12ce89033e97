// SPDX-License-Identifier: GPL-2.0
// --user-stacks: user frames symbolized with elfutils' libdwfl, from a
// binary and a file offset alone, so the same code serves a live process
// (its /proc/PID/map_files entry), a process long gone, and another machine
// (the copies `decode --user-symbols-from DIR` reads). Debug info is found
// the standard way (.gnu_debuglink, /usr/lib/debug/.build-id) and through
// debuginfod when DEBUGINFOD_URLS is set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace stackmapd {

class UserSymbolizer {
 public:
  // Each open binary holds its symbol table and debug info: a few MiB for a
  // large library. Past the cap the least recently used is closed (counted).
  static constexpr size_t kDefaultMaxBinaries = 64;

  explicit UserSymbolizer(size_t max_binaries = kDefaultMaxBinaries);
  ~UserSymbolizer();
  UserSymbolizer(const UserSymbolizer&) = delete;
  UserSymbolizer& operator=(const UserSymbolizer&) = delete;

  struct Result {
    uint64_t elf_addr = 0;             // the file offset in the ELF's layout; 0: in no segment
    std::vector<std::string> symbols;  // innermost inlined first, "name+0xoff" last
    std::string srcline;               // "file:line", or empty
  };
  // `key` names the binary for the cache (its build id, else its path);
  // `file` is where to open it. A return address (every frame but the
  // first) is looked up at offset - 1, inside the call.
  Result resolve(const std::string& key, const std::string& file, uint64_t file_offset,
                 bool is_return);

  // Whether `key`'s binary is open (or known unreadable): resolve() then
  // needs no file.
  bool holds(const std::string& key) const { return binaries_.count(key) != 0; }
  size_t open_binaries() const { return binaries_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Binary;
  Binary* binary(const std::string& key, const std::string& file);

  size_t max_binaries_;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
  std::unordered_map<std::string, std::unique_ptr<Binary>> binaries_;
};

}  // namespace stackmapd

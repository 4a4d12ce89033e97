// SPDX-License-Identifier: GPL-2.0
// --user-stacks: user frames symbolized with elfutils' libdwfl, from a
// binary and a file offset alone, so the same code serves a live process
// (its /proc/PID/map_files entry), a process long gone, and another machine
// (the copies `decode --user-symbols-from DIR` reads). Debug info is found
// the standard way (.gnu_debuglink, /usr/lib/debug/.build-id) and through
// debuginfod when DEBUGINFOD_URLS is set.
//
// libdwfl's hold on a binary is large: libc's debug file alone decompresses
// to ~13 MB of heap. So a binary keeps only its file descriptor and the
// names of the frames asked so far; its libdwfl session is opened for new
// frames and closed once idle (close_idle), ~75 ms to open again for libc.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class UserSymbolizer {
 public:
  // Binaries known (each a descriptor and its frames' names). Past the cap
  // the least recently used is forgotten (counted).
  static constexpr size_t kDefaultMaxBinaries = 64;
  // Names kept per binary; past it they are dropped and asked again.
  static constexpr size_t kMaxFramesPerBinary = 1 << 16;
  // A libdwfl session unused this long is closed.
  static constexpr std::chrono::milliseconds kIdle{2000};

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
  // `file` is where to open it the first time. A return address (every
  // frame but the first) is looked up at offset - 1, inside the call.
  Result resolve(const std::string& key, const std::string& file, uint64_t file_offset,
                 bool is_return);
  // The same with the file already open: `fd` is kept when the binary is
  // new (unused when it is held).
  Result resolve(const std::string& key, UniqueFd fd, uint64_t file_offset, bool is_return);

  // Closes the libdwfl sessions unused since `now - kIdle` and gives their
  // memory back to the system; returns how many it closed.
  size_t close_idle(std::chrono::steady_clock::time_point now);

  // Whether `key`'s binary is held (or known unreadable): resolve() then
  // needs no file.
  bool holds(const std::string& key) const { return binaries_.count(key) != 0; }
  size_t open_binaries() const { return binaries_.size(); }
  size_t open_sessions() const;  // libdwfl sessions open now
  uint64_t evictions() const { return evictions_; }

 private:
  struct Binary;
  struct Session;
  Result resolve(const std::string& key, const std::function<UniqueFd()>& open,
                 uint64_t file_offset, bool is_return);
  Binary* binary(const std::string& key, const std::function<UniqueFd()>& open);
  static Result lookup(Session& s, uint64_t file_offset, bool is_return);

  size_t max_binaries_;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
  std::unordered_map<std::string, std::unique_ptr<Binary>> binaries_;
};

}  // namespace stackmapd

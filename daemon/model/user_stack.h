// SPDX-License-Identifier: GPL-2.0
// --user-stacks: user stacks as the exports see them. Every frame keeps what
// symbolizes it anywhere, later: its binary (build id, path) and its offset
// in that file, besides the symbol found while the process lived.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "daemon/sys/untrusted_file.h"

namespace stackmapd {

struct UserBinary {
  UserBinary() = default;
  UserBinary(std::string p, std::string id, FileIdentity mapped = {}, std::string open = {})
      : path(std::move(p)), build_id(std::move(id)), identity(mapped), open_path(std::move(open)) {}

  std::string path;      // as the process mapped it
  std::string build_id;  // hex; empty when the file has none
  // The file mapped (through /proc/PID/map_files): opening `path` later must
  // find this one, not what a user put there since. Unknown when decoded.
  FileIdentity identity;
  // Where the daemon saw it mapped (/proc/PID/map_files/...): the file a
  // copy is taken from once `path` holds it no more, while that process
  // lives. Empty when decoded.
  std::string open_path;
  bool operator==(const UserBinary&) const = default;
};

struct UserFrame {
  uint64_t addr = 0;         // as captured: a return address past frame 0
  int32_t binary = -1;       // index into UserStackSet::binaries; -1: in no file mapping
  uint64_t file_offset = 0;  // of addr in the binary's file
  uint64_t elf_addr = 0;     // addr in the ELF's own layout (what addr2line takes); 0: unknown
  // The function, innermost inlined one first (perf's "(inlined)" frames),
  // each "name+0xoff"; empty when it did not resolve.
  std::vector<std::string> symbols;
  std::string srcline;  // "file:line" of the innermost, when debug info has it
};

struct UserStack {
  uint32_t pid = 0;
  // The unwinder stopped short of a process or thread entry point: code
  // without frame pointers (most of Debian's libraries), or depth.
  bool truncated = false;
  std::vector<UserFrame> frames;  // innermost first
};

// A user stack as its source captured it: addresses only.
struct UserStackIps {
  uint32_t pid = 0;           // tgid
  uint32_t exec_id = 0;       // low bits of the task's exec count (0: unknown)
  std::vector<uint64_t> ips;  // user frames, innermost first
};

struct UserStackSet {
  bool enabled = false;  // --user-stacks
  std::vector<UserBinary> binaries;
  std::map<uint32_t, UserStack> stacks;  // by user stack id
};

// A frame's names as people read them: "func+0x1a (binary)", an inlined one
// "func (inlined)", unresolved "[binary]+0xoff" or "0x7f..."; outermost last.
std::vector<std::string> user_frame_names(const UserStackSet& set, const UserFrame& f,
                                          bool with_offsets);
// A symbol of UserFrame::symbols without its offset: the function's name.
std::string user_function_name(const std::string& symbol);

}  // namespace stackmapd

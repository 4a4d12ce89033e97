// SPDX-License-Identifier: GPL-2.0
// The names of one snapshot's frames (Snapshot::frames), resolved once and
// read by every output, so that a frame reads the same in each: --top and
// the text exports print it with its offset, the flame graphs and pprof by
// its function. Kernel frames are named by the symbol table, or by a JSON
// export's own names when there is none; user frames by what their capture
// found while the process lived (UserFrame::symbols).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/model/snapshot.h"

namespace stackmapd {

class Kallsyms;

// A kernel function and its module ("" for the core kernel).
struct FunctionName {
  std::string name, module;
  bool operator==(const FunctionName&) const = default;
};
// A JSON export's names of its kernel frames, by address.
using FunctionNames = std::unordered_map<uint64_t, FunctionName>;

class FrameNames {
 public:
  // `names` are read only where there is no `ksyms`; both may be null: raw addresses.
  FrameNames(const Snapshot& snap, const Kallsyms* ksyms, const FunctionNames* names = nullptr);

  // As --top prints it: "schedule+0x48/0xc0", "nf_hook_slow [nf_tables]"
  // (no offset known), "0xffffffff81000148"; a user frame one line per
  // inlined function, "main+0x1a (app)".
  std::vector<std::string> text(uint32_t frame) const;
  // As flame graphs print it: "nf_hook_slow_[nf_tables]" (a folded line
  // holds no space), a user frame's functions without offsets.
  std::vector<std::string> flame(uint32_t frame) const;
  // A kernel frame's function as pprof names it ("nf_hook_slow [nf_tables]");
  // empty when it did not resolve.
  std::string function(uint32_t frame) const;
  // A user frame as captured.
  const UserFrame& user(uint32_t frame) const;
  // text() of the kernel frame at `ip`, for the exports that walk the kernel
  // stacks (stack_map, JSON); an address of no frame is printed raw.
  std::string kernel_text(uint64_t ip) const;

 private:
  struct Kernel {
    FunctionName fn;   // fn.name empty: unresolved
    std::string text;  // with its offset when the symbol table is known
  };

  const Snapshot& snap_;
  std::vector<Kernel> kernel_;                         // by frame id; empty for user frames
  std::unordered_map<uint64_t, uint32_t> kernel_ids_;  // ip -> frame id
};

// "sym_[mod]", as flame graphs name a kernel function.
std::string flame_frame_name(std::string_view name, std::string_view module);

}  // namespace stackmapd

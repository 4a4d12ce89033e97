// SPDX-License-Identifier: GPL-2.0
// The model's own ids for what the exports print: a frame (kernel or user,
// interned by what names it) and a callstack (a kernel stack and, with
// --user-stacks, the user stack under it), numbered per snapshot as
// Perfetto's traced_perf interns its callstacks. The sources' handles stay
// handles: a BPF slot, an overflow or a tracefs id is a callstack's
// stack_id (what the exports print as stack_id), a user-table id its
// ustack (user_stack_id); no export joins the two again.
#pragma once

#include <cstdint>
#include <vector>

#include "daemon/model/stack_record.h"

namespace stackmapd {

struct Snapshot;

struct Frame {
  bool user = false;
  uint64_t addr = 0;  // kernel: the ip; user: as captured (a return address past frame 0)
  // User: the binary (UserStackSet::binaries) and the file offset that name
  // it in any process; -1: in no file mapping, named by addr alone.
  int32_t binary = -1;
  uint64_t file_offset = 0;
  // User: where it was first seen, for its captured names (UserStackSet::stacks).
  uint32_t ustack = kNoUserStack;
  uint32_t index = 0;
};

struct Callstack {
  uint32_t stack = 0;              // its kernel stack: an index into Snapshot::stacks
  uint32_t stack_id = 0;           // that stack's source handle
  uint32_t ustack = kNoUserStack;  // the user stack's source handle; kNoUserStack: none
  uint32_t kernel_depth = 0;       // frames[0, kernel_depth) are the kernel's
  std::vector<uint32_t> frames;    // into Snapshot::frames, innermost first: kernel, then user
  uint64_t count = 0, weight = 0;  // sums of its keys, or the stack's own without keys
  // Its keys: indexes into the stack's `by`, in that order (`other` has no user stack).
  std::vector<uint32_t> keys;
};

// Numbers the frames and callstacks of snap.stacks (with their keys and
// snap.user): every producer of a Snapshot calls it once its stacks are final.
// Callstacks come in snap.stacks' order, a stack's in the order of its keys.
void intern_callstacks(Snapshot& snap);
// snap.callstacks, checked: a producer that did not intern them is a bug,
// not an empty export (throws std::logic_error).
const std::vector<Callstack>& callstacks(const Snapshot& snap);

}  // namespace stackmapd

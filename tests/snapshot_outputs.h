// SPDX-License-Identifier: GPL-2.0
// The outputs of a snapshot a test made by hand, interned first as every
// producer of a Snapshot interns it (intern_callstacks), its frames named
// by `ksyms` (null: raw addresses).
#pragma once

#include <string>
#include <vector>

#include "daemon/export/exports.h"
#include "daemon/export/frame_names.h"
#include "daemon/model/snapshot.h"

namespace stackmapd {

inline std::string json_of(Snapshot snap, const Kallsyms* ksyms = nullptr, JsonOptions opt = {}) {
  intern_callstacks(snap);
  return format_json(snap, FrameNames(snap, ksyms), opt);
}

inline std::string stack_map_of(std::vector<StackRecord> stacks, const Kallsyms* ksyms = nullptr) {
  Snapshot snap;
  snap.stacks = std::move(stacks);
  intern_callstacks(snap);
  return format_stack_map(snap.stacks, FrameNames(snap, ksyms));
}

inline std::string stacks_json_of(std::vector<StackRecord> stacks,
                                  const Kallsyms* ksyms = nullptr) {
  Snapshot snap;
  snap.stacks = std::move(stacks);
  intern_callstacks(snap);
  return format_stacks_json(snap.stacks, FrameNames(snap, ksyms));
}

}  // namespace stackmapd

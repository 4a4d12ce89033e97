// SPDX-License-Identifier: GPL-2.0
// --user-stacks off the machine: an export directory keeps a copy of every
// binary its user stacks name, as binaries/BUILD_ID (and binaries/index:
// "BUILD_ID PATH" lines), so `decode stack_map.json --user-symbols-from DIR`
// symbolizes them after the processes and even the files are gone. A binary
// is copied once per directory (its build id names its content).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "daemon/model/user_stack.h"

namespace stackmapd {

// What DIR/binaries may hold: any traced process's binaries are copied, so
// without a cap a fleet of short-lived programs fills the disk (109 MB a
// minute was seen).
inline constexpr uint64_t kSavedBinariesMaxBytes = 256ull << 20;

// Copies the binaries of `set` not yet in DIR/binaries, while the directory
// stays within `max_bytes`; a binary without a build id, unreadable, or over
// the cap is skipped (its frames keep the symbols found live). Every binary is
// listed in binaries/index, copied or not.
void save_user_binaries(const std::string& dir, const UserStackSet& set, gid_t group,
                        uint64_t max_bytes = kSavedBinariesMaxBytes);

// Symbolizes every frame of `set` again from DIR/binaries/BUILD_ID alone;
// frames whose binary is not there become unresolved ([binary]+0xoff),
// except those of a binary DIR/binaries/index lists without its copy (the
// daemon could not copy it: deleted before the export, or over the cap),
// which keep the names found while the process lived, as frames in no file
// do (JIT code named from its perf map, the vdso).
// Throws Error when DIR has no binaries/ directory.
void resymbolize_user_stacks(UserStackSet& set, const std::string& dir);

}  // namespace stackmapd

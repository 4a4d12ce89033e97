// SPDX-License-Identifier: GPL-2.0
// --user-stacks off the machine: an export directory lists every binary its
// user stacks name in binaries/index ("BUILD_ID PATH" lines), so that
// `decode stack_map.json --user-symbols-from DIR` symbolizes them after the
// processes are gone: from the file at PATH while it is still there (build id
// checked), else from binaries/BUILD_ID, the copy the daemon took of a binary
// deleted or replaced at its path while a process still mapped it. A binary
// still at its path is not copied (a fleet of programs would copy them all);
// one is copied once per directory (its build id names its content).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "daemon/model/user_stack.h"

namespace stackmapd {

// What DIR/binaries may hold: the copies of deleted or replaced binaries
// (a host upgrading its packages under running programs).
inline constexpr uint64_t kSavedBinariesMaxBytes = 256ull << 20;

// Indexes every binary of `set` with a build id in DIR/binaries/index, and
// copies those no longer at their path (another inode or build id there, or
// none) from where a process maps them (UserBinary::open_path), while the
// directory stays within `max_bytes`. One that cannot be copied (no process
// maps it any more, or over the cap) is said once: its frames keep the
// symbols found live.
void save_user_binaries(const std::string& dir, const UserStackSet& set, gid_t group,
                        uint64_t max_bytes = kSavedBinariesMaxBytes);

// Symbolizes every frame of `set` again from DIR alone: a binary's copy
// DIR/binaries/BUILD_ID, else, for one DIR/binaries/index lists, the file at
// its path if it has that build id. Frames whose binary has neither become
// unresolved ([binary]+0xoff), except those of a binary the index lists
// (deleted before the export, over the cap, or gone from its path since),
// which keep the names found while the process lived, as frames in no file
// do (JIT code named from its perf map, the vdso).
// Throws Error when DIR has no binaries/ directory.
void resymbolize_user_stacks(UserStackSet& set, const std::string& dir);

}  // namespace stackmapd

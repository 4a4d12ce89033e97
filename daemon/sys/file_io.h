// SPDX-License-Identifier: GPL-2.0
// Files the daemon writes: output directories checked before a session
// starts, and every file replaced atomically (written to a temporary file in
// the same directory, then renamed; staged_files.h). And files it reads whole
// from paths no other user controls (those: untrusted_file.h).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace stackmapd {

// `group`: owner group of the new file (kNoGroup keeps the creator's).
constexpr gid_t kNoGroup = static_cast<gid_t>(-1);

// Creates `dir` if missing and proves it writable; throws Error naming the fix.
void prepare_output_dir(const std::string& dir);
void write_file_atomic(const std::string& path, const std::string& content, mode_t mode,
                       gid_t group = kNoGroup);
// Before a session or a decode: `path` (given with `option`) can be created.
// Nothing to check for "" or "-". Throws Error naming the option and the directory.
void check_writable_parent(const std::string& path, const char* option);

// The whole of `path`, read to its end (/proc and tracefs files report size
// 0); nullopt when it cannot be opened or read, errno saying why and
// *opened (when given) which of the two failed.
std::optional<std::string> read_file(const std::string& path, bool* opened = nullptr);

}  // namespace stackmapd

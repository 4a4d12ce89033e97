// SPDX-License-Identifier: GPL-2.0
// Files written under temp names (NAME.tmp-XXXXXX, beside NAME) and renamed
// over their names only once every one of them is written: a full disk in
// the middle leaves the whole set as it was, never some files of the new
// snapshot beside some of the old. What is not committed is removed.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace stackmapd {

class StagedFiles {
 public:
  StagedFiles() = default;
  ~StagedFiles();  // removes the temps not committed
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;

  // Writes and syncs `content` to a temp file beside `path`; throws Error.
  void add(const std::string& path, const std::string& content, mode_t mode, gid_t group);
  // Renames each temp over its path, in the order added; throws Error.
  void commit();

 private:
  std::vector<std::pair<std::string, std::string>> staged_;  // temp, path
};

}  // namespace stackmapd

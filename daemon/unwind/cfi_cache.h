// SPDX-License-Identifier: GPL-2.0
// Unwind tables by file: a file's table is built once, however many processes
// map it, and shared. Keyed by build id (a file without one by its path).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "daemon/unwind/cfi_table.h"

namespace stackmapd {

// Builds the table of the file at a path (a /proc/PID/map_files/... link):
// build_cfi_table in the process, or the parser sandbox's (resolve/).
using CfiBuilder = std::function<CfiTable(const std::string& path)>;

class CfiCache {
 public:
  explicit CfiCache(CfiBuilder build) : build_(std::move(build)) {}

  // The table of the file at `path` (a /proc/PID/map_files/... path works: the
  // key is read from the file). Throws Error as the builder does; a file
  // that failed is tried again at its next call.
  std::shared_ptr<const CfiTable> get(const std::string& path);
  // The same for a file whose build id is known already (hex; empty: none).
  std::shared_ptr<const CfiTable> get(const std::string& path, const std::string& build_id);
  size_t builds() const;  // tables built so far

 private:
  CfiBuilder build_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const CfiTable>> tables_;  // guarded by mu_
  size_t builds_ = 0;                                              // guarded by mu_
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/cfi_cache.h"

#include "daemon/symbols/user_maps.h"

namespace stackmapd {

std::shared_ptr<const CfiTable> CfiCache::get(const std::string& path) {
  return get(path, elf_build_id(path));
}

std::shared_ptr<const CfiTable> CfiCache::get(const std::string& path,
                                              const std::string& build_id) {
  const std::string key = build_id.empty() ? "path:" + path : build_id;
  {
    std::lock_guard lock(mu_);
    if (auto it = tables_.find(key); it != tables_.end()) return it->second;
  }
  // Built outside the lock: another file's lookups need not wait. Two threads
  // that race on one file both build it, and the first one's table stays.
  auto table = std::make_shared<const CfiTable>(build_(path));
  std::lock_guard lock(mu_);
  ++builds_;
  return tables_.emplace(key, std::move(table)).first->second;
}

size_t CfiCache::builds() const {
  std::lock_guard lock(mu_);
  return builds_;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/stack_store.h"

#include <algorithm>

#include "daemon/sys/error.h"

namespace stackmapd {

void StackStore::insert(uint32_t id, std::vector<uint64_t> ips, uint64_t ref_count) {
  if (!valid_id(id) || index_[id] != 0)
    throw Error("internal: stack_id " + std::to_string(id) + " inserted twice or out of range");
  stacks_.push_back(StackRecord{id, ref_count, std::move(ips)});
  index_[id] = static_cast<uint32_t>(stacks_.size());
}

std::vector<StackRecord> StackStore::snapshot() const {
  std::vector<StackRecord> out = stacks_;
  std::sort(out.begin(), out.end(),
            [](const StackRecord& a, const StackRecord& b) { return a.stack_id < b.stack_id; });
  return out;
}

uint64_t StackStore::total_events() const {
  uint64_t total = 0;
  for (const auto& s : stacks_) total += s.ref_count;
  return total;
}

void StackStore::clear() {
  std::fill(index_.begin(), index_.end(), 0);
  stacks_.clear();
}

}  // namespace stackmapd

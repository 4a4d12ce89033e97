// SPDX-License-Identifier: GPL-2.0
// A unique kernel stack as every export sees it.
#pragma once

#include <cstdint>
#include <vector>

namespace stackmapd {

struct StackRecord {
  uint32_t stack_id = 0;      // hash-slot index: sparse, not 0..n-1
  uint64_t ref_count = 0;     // exports that hold 32 bits saturate at UINT32_MAX
  std::vector<uint64_t> ips;  // innermost frame first
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// A unique kernel stack as every export sees it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stackmapd {

// One key of a stack's split (--by): only the fields of the store's KeySpec
// are meaningful, the others stay default.
// SMT_NO_USER_STACK (abi.h): no user stack, or --user-stacks off.
constexpr uint32_t kNoUserStack = 0xfffffffeU;

struct KeyValues {
  uint32_t pid = 0, tid = 0, cpu = 0;
  std::string comm, cgroup, unit, source;
  uint32_t ustack = kNoUserStack;  // --user-stacks: its user-table id (Snapshot::user)
  uint32_t bucket = 0;             // --hist: the log2 bucket (stackmapd/hist.h)
  bool operator==(const KeyValues&) const = default;
};

struct KeyCount {
  KeyValues key;
  bool other = false;  // events past the store's cap on keys, or counted before attribution
  uint64_t count = 0, weight = 0;
};

struct StackRecord {
  uint32_t stack_id = 0;      // hash-slot index: sparse, not 0..n-1
  uint64_t ref_count = 0;     // exports that hold 32 bits saturate at UINT32_MAX
  std::vector<uint64_t> ips;  // innermost frame first
  uint64_t weight = 0;        // sum of the events' weights; ref_count when unweighted
  // By weight, then count (both descending), then key; the `other` entry last.
  // Its counts and weights sum to ref_count and weight. "= {}" lets the
  // records written {id, count, ips} leave it out without a warning.
  std::vector<KeyCount> by = {};
};

}  // namespace stackmapd

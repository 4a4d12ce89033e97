// SPDX-License-Identifier: GPL-2.0
// --hist's log2 buckets (stackmapd/hist.h) as bpftrace's hist() names them:
// "[0]", "[1]", "[2, 4)", ..., "[512, 1K)", "[1K, 2K)", "[1M, 2M)".
#pragma once

#include <cstdint>
#include <string>

namespace stackmapd {

// 2^p with bpftrace's suffix for the largest power of 1024 ("1K", "16M").
std::string hist_power(uint32_t p);
// Bucket b's interval (b in 0..64).
std::string hist_range(uint32_t b);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/histogram.h"

namespace stackmapd {

std::string hist_power(uint32_t p) {
  const uint32_t decade = p / 10;
  std::string out = std::to_string(uint64_t{1} << (p - 10 * decade));
  if (decade) out += "\0KMGTPE"[decade];
  return out;
}

std::string hist_range(uint32_t b) {
  if (b < 2) return "[" + std::to_string(b) + "]";  // one value each
  return "[" + hist_power(b - 1) + ", " + hist_power(b) + ")";
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// An address or file offset as every export writes it: "0x" and lowercase hex.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace stackmapd {

inline std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/weight_unit.h"

#include <charconv>

namespace stackmapd {

namespace {

// Fixed-point without the C locale's say: the same bytes on every machine.
std::string fixed(double v, int digits) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, digits);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

}  // namespace

WeightKind weight_kind(const std::string& unit) {
  if (unit == "ns") return WeightKind::nanoseconds;
  for (const char* bytes : {"byte", "len", "size"})
    if (unit.find(bytes) != std::string::npos) return WeightKind::bytes;
  return WeightKind::count;
}

std::string format_weight(uint64_t w, const std::string& unit) {
  switch (weight_kind(unit)) {
    case WeightKind::nanoseconds: return fixed(static_cast<double>(w) / 1e6, 3) + " ms off-CPU";
    case WeightKind::bytes: {
      static constexpr const char* kPrefixes[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
      if (w < 1024) break;
      double v = static_cast<double>(w) / 1024;
      size_t i = 0;
      for (; v >= 1024 && i + 1 < std::size(kPrefixes); ++i) v /= 1024;
      return fixed(v, 1) + " " + kPrefixes[i] + " " + unit;
    }
    case WeightKind::count: break;
  }
  return std::to_string(w) + " " + unit;
}

}  // namespace stackmapd

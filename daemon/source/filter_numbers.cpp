// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/filter_numbers.h"

#include <cctype>
#include <climits>

namespace stackmapd {

uint64_t as_field(uint64_t v, uint32_t size, bool is_signed) {
  if (size >= 8) return v;
  const unsigned shift = 64 - 8 * size;
  v <<= shift;
  return is_signed ? static_cast<uint64_t>(static_cast<int64_t>(v) >> shift) : v >> shift;
}

std::optional<uint64_t> parse_unsigned(std::string_view s) {
  unsigned base = 10;
  if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    const unsigned d = std::isdigit(static_cast<unsigned char>(c)) ? unsigned(c - '0')
                       : std::isxdigit(static_cast<unsigned char>(c))
                           ? unsigned(std::tolower(c) - 'a' + 10)
                           : 99;
    if (d >= base || v > (UINT64_MAX - d) / base) return std::nullopt;
    v = v * base + d;
  }
  return v;
}

std::optional<uint64_t> parse_signed(std::string_view s) {
  const bool negative = !s.empty() && s[0] == '-';
  const std::optional<uint64_t> v = parse_unsigned(negative ? s.substr(1) : s);
  if (!v) return std::nullopt;
  if (negative) {
    if (*v > uint64_t{1} << 63) return std::nullopt;
    return uint64_t{0} - *v;
  }
  if (*v > uint64_t{INT64_MAX}) return std::nullopt;
  return v;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// A number in --filter (daemon/source/event_filter.h) by the kernel's rules,
// not the grammar's: the text read as kstrtoull()/kstrtoll() read it, then
// cut to the field's size and widened as the event path widens the field's
// value, so that a comparison sees the same 64 bits on both sides.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace stackmapd {

// v as a field of `size` bytes holds it (truncated), then widened to 64 bits
// as the event path widens the field's value.
uint64_t as_field(uint64_t v, uint32_t size, bool is_signed);

// kstrtoull(s, 0): 0x hex, leading 0 octal, else decimal; every byte a digit.
std::optional<uint64_t> parse_unsigned(std::string_view s);

// kstrtoll(s, 0): an optional '-', then as kstrtoull, within int64_t.
std::optional<uint64_t> parse_signed(std::string_view s);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// What a snapshot's weight unit (Snapshot::weight_unit: "ns" for --offcpu, a
// --sum field's name otherwise) measures, and how a weight reads in it: ONE
// rule for --top, the SVG's tooltips, the live page and pprof's sample type.
#pragma once

#include <cstdint>
#include <string>

namespace stackmapd {

enum class WeightKind : uint8_t {
  nanoseconds,  // "ns": off-CPU time
  bytes,        // a field whose name says bytes: bytes_alloc, len, size, ...
  count,        // any other field: a count of its name
};

WeightKind weight_kind(const std::string& unit);

// `w` in `unit`: "1.500 ms off-CPU"; bytes from 1 KiB on in binary units with
// the field's name, "12.3 MiB bytes_alloc" ("512 bytes_alloc" below); a
// count with its field's name, "42 nr_pages".
std::string format_weight(uint64_t w, const std::string& unit);

}  // namespace stackmapd

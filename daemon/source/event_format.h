// SPDX-License-Identifier: GPL-2.0
// What tracefs says about tracepoints: which exist (for -e globs such as
// 'kmem:*') and the layout of each one's record (its `format` file), so that
// `--sum FIELD` can weight an event by one of its numeric fields.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/source/sources.h"

namespace stackmapd {

struct EventField {
  std::string name;  // "bytes_alloc"
  std::string type;  // "size_t", "char[16]", "__data_loc char[]", "const void *"
  uint32_t offset = 0, size = 0;
  bool is_signed = false;

  // An integer of 1, 2, 4 or 8 bytes: not an array, not a __data_loc or
  // __rel_loc reference, and not a pointer. The format file gives pointers as
  // plain 8-byte integers, but an address is no quantity to sum.
  bool numeric() const;
};

struct EventFormat {
  std::string system, name;  // "kmem", "kmalloc"
  uint32_t id = 0;
  std::vector<EventField> fields;  // the event's own fields, without the common_* ones

  // The field named `field`, or nullptr.
  const EventField* find(std::string_view field) const;
};

// Bytes of an event's raw record --trace copies: the end of its last fixed
// field (common fields take the first 8 bytes), or SMT_TRACE_RAW_MAX when
// a __data_loc/__rel_loc field places data after the fixed ones (the perf
// tracepoint buffer is far larger, so the read does not fault). Clamped to
// SMT_TRACE_RAW_MAX.
uint32_t trace_raw_len(const EventFormat& format);

// Parses the text of <events>/<system>/<name>/format as the kernel writes it.
// The text does not name the system: `system` is left empty. Throws Error on
// text it cannot parse.
EventFormat parse_event_format(std::string_view text);

// Reads and parses <events_dir>/<tp.category>/<tp.name>/format, setting
// `system`; throws Error naming the file.
EventFormat read_event_format(const std::string& events_dir, const Tracepoint& tp);

// Expands the specs whose category or name holds a glob (fnmatch: * ? [)
// against the events under events_dir that have an `id` (those perf and BPF
// can attach to), logging what each glob matched. Exact specs must exist.
// Keeps the order, drops duplicates. Throws Error for an exact spec that does
// not exist, a glob that matches nothing, or globs that bring more than 256
// tracepoints.
std::vector<Tracepoint> resolve_events(const std::vector<Tracepoint>& specs,
                                       const std::string& events_dir);

// The numeric field `--sum FIELD` weights events of `format` by. Throws Error
// naming the event and the fields it has when `field` is missing, or its
// numeric fields when `field` is not numeric.
EventField weight_field(const EventFormat& format, const std::string& field,
                        const std::string& option = "--sum ");

}  // namespace stackmapd

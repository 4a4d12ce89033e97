// SPDX-License-Identifier: GPL-2.0
// --filter EXPR: ftrace's event filter (the kernel's Documentation/trace/
// events.rst, "Event filtering") compiled for one tracepoint's record into
// the program the event path runs before it takes a stack
// (stackmapd/abi/filter.h, run by stackmapd/event_filter.h). The same text
// means what it means in an instance's events/<system>/<event>/filter:
// `&&` binds tighter than `||`, `!` negates, numbers are read as kstrtoll()
// (signed fields) or kstrtoull() read them, strings are quoted and match as
// ftrace's regex kinds do.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "daemon/source/event_format.h"
#include "stackmapd/abi.h"

namespace stackmapd {

inline constexpr size_t kMaxFilterBytes = 4096;
inline constexpr unsigned kMaxFilterDepth = 32;  // nested '(' and '!'

// The program for `expr` on records of `format`. Throws Error with one line:
// what is wrong, at which column (1-based, in bytes), and the expression.
smt_filter compile_filter(std::string_view expr, const EventFormat& format);

// Whether two compiled filters are the same program.
bool same_filter(const smt_filter& a, const smt_filter& b);

}  // namespace stackmapd

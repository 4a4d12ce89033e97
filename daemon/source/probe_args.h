// SPDX-License-Identifier: GPL-2.0
// -u with --sum/--hist argN: where argument N of a user-space probe's event
// lies in the registers its program gets (the kernel's struct pt_regs), as a
// weight field (SMT_WEIGHT_FIELD, abi/session.h) that the event path reads
// as it reads a tracepoint's. At a function's entry argument N is the ABI's
// Nth integer register; at a USDT site its note says where (-4@%edi).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/source/uprobe_sources.h"

namespace stackmapd {

// "arg0".."arg5": a probe argument rather than a tracepoint field.
bool is_probe_arg(const std::string& field);

// The weight field of `field` ("argN") for `probe`. Throws Error with one
// line when it cannot be read there: a probe inside a function (+OFF), a
// USDT probe with fewer arguments, or one whose argument is in memory or a
// constant, or a machine other than x86_64.
uint32_t probe_arg_field(const UprobeTarget& probe, const std::string& field);

}  // namespace stackmapd

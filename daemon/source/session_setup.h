// SPDX-License-Identifier: GPL-2.0
// What a session's options name, resolved against the running kernel's
// tracefs before anything is loaded: -e globs, the field --sum reads in each
// event's format file, the sched_switch fields --offcpu reads, and where
// the tracing machinery's own functions are (kallsyms).
#pragma once

#include <string>
#include <vector>

#include "daemon/source/session_config.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {

// The functions whose frames lead the stacks of this session's events when
// the tracepoints call their probes through the machinery (abi.h,
// SMT_MAX_STRIP), sorted; at most SMT_MAX_STRIP of them.
std::vector<smt_text_range> machinery_ranges(const Kallsyms& ksyms, const SessionConfig& sc);

// Throws Error with one line naming the problem and the fix. ksyms: the
// caller's, else /proc/kallsyms is read (a reload under load spends ~1 s on it).
void resolve_session_events(SessionConfig& session, const std::string& events_dir,
                            const Kallsyms* ksyms = nullptr);

}  // namespace stackmapd

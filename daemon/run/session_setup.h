// SPDX-License-Identifier: GPL-2.0
// What a session's options name, resolved against the running kernel's
// tracefs before anything is loaded: -e globs, the field --sum reads in each
// event's format file, and the sched_switch fields --offcpu reads.
#pragma once

#include <string>

#include "daemon/bpf/session_config.h"

namespace stackmapd {

// Throws Error with one line naming the problem and the fix.
void resolve_session_events(SessionConfig& session, const std::string& events_dir);

}  // namespace stackmapd

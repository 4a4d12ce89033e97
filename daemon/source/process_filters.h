// SPDX-License-Identifier: GPL-2.0
// --pid, --comm and --cgroup as the event path compares them (abi/session.h):
// each checked against the running system before the session loads, so a
// filter that could never match is refused in one line, not a silent empty run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/source/session_config.h"

namespace stackmapd {

// --pid's words (repeated, comma and whitespace lists) as the running
// processes they name, each once.
std::vector<uint32_t> running_processes(const std::vector<std::string>& args);

// --comm's names (repeated, comma lists), each as the kernel keeps a task's
// name: a longer one is cut to its first 15 bytes, which is what ps shows.
std::vector<std::string> task_names(const std::vector<std::string>& args);

// --cgroup's paths (repeated): relative to the cgroup2 mount ("/system.slice/
// nginx.service") or under it ("/sys/fs/cgroup/system.slice/..."), each an
// existing cgroup. `mount`: the cgroup2 mount point (empty: the system's).
std::vector<CgroupFilter> cgroup_filters(const std::vector<std::string>& args,
                                         std::string mount = {});

}  // namespace stackmapd

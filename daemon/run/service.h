// SPDX-License-Identifier: GPL-2.0
/*
 * stackmapd as a long-running service (systemd Type=notify). One thread, one
 * poll() loop over: the ring buffer's wakeup fd (and a 100 ms timer, since the
 * BPF side rarely wakes anyone), the control socket, and a signalfd
 * (SIGTERM/SIGINT stop, SIGHUP reloads, SIGUSR1 resets). On timers it
 * refreshes the exports under the runtime directory and pings the watchdog.
 */
#pragma once

#include <string>
#include <vector>

#include "daemon/run/config.h"

namespace stackmapd {

// Runs `stackmapd daemon ARGS` until SIGTERM/SIGINT; throws Error when it
// cannot start. A reload parses ARGS again (re-reading the config file).
void run_service(const std::vector<std::string>& args);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
/*
 * The run stage: what drives a session. The foreground command runs one
 * session until its duration or Ctrl-C (daemon/run/tracer.h over BPF,
 * daemon/run/tracefs_trace.h over tracefs, both on daemon/run/foreground.h);
 * the service below runs one until SIGTERM. Both turn on the one event loop
 * (daemon/sys/event_loop.h), signals read from a signalfd (daemon/sys/signals.h).
 *
 * The service (systemd Type=notify), one thread: the loop watches the ring
 * buffer's wakeup fd (and drains every 100 ms, since the BPF side rarely wakes
 * anyone), the control socket and each of its clients, non-blocking with
 * deadlines (daemon/run/control.h), the HTTP endpoints with --listen
 * (daemon/run/http_endpoints.h, as non-blocking), and SIGTERM/SIGINT (stop), SIGHUP
 * (reload), SIGUSR1 (reset). Its timers refresh the exports under the runtime
 * directory (and --metrics-textfile) and ping the watchdog. A reset, reload or export that fails is
 * logged in one line and the daemon goes on as it was.
 */
#pragma once

#include <signal.h>

#include <string>
#include <vector>

#include "daemon/run/config.h"

namespace stackmapd {

// What the service takes: cmd/main.cpp blocks them before any thread starts
// (block_signals, daemon/sys/signals.h).
inline constexpr int kServiceSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};

// Runs `stackmapd daemon ARGS` until SIGTERM/SIGINT; throws Error when it
// cannot start. A reload parses ARGS again (re-reading the config file).
void run_service(const std::vector<std::string>& args);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The foreground session's loop, one for both backends (BPF: daemon/run/tracer.h,
// tracefs: daemon/run/tracefs_trace.h), on the shared event loop:
// drain on the backend's wakeup fd and on a timer, stop at the duration's end
// or on SIGINT/SIGTERM, reset on SIGUSR1 where the backend can. The caller
// then detaches, drains what is left and takes its Snapshot. With -- CMD
// (follow()) the command's exit stops it instead, and the stop signals go to
// the command.
#pragma once

#include <signal.h>

#include <functional>
#include <optional>

#include "daemon/sys/event_loop.h"

namespace stackmapd {

class CommandChild;

// What a Foreground takes: cmd/main.cpp blocks them before any thread starts
// (block_signals, daemon/sys/signals.h).
inline constexpr int kForegroundSignals[] = {SIGINT, SIGTERM, SIGUSR1};

struct ForegroundBackend {
  std::function<void()> drain;  // consume what is pending, without waiting
  int wakeup_fd = -1;           // readable when there is data; -1: the timer alone
  // Empties the table; null when the backend cannot (SIGUSR1 then says so).
  std::function<void()> reset;
  std::function<void()> each_second;  // health checks; may be null
  // --user-stacks: new user stacks to the resolver, every user_scan_ms; may be null.
  std::function<void()> user_scan;
  int user_scan_ms = 10;
};

class Foreground {
 public:
  // Takes kForegroundSignals from here on.
  Foreground();

  // Throws Interrupted when SIGINT or SIGTERM came before now (they wait,
  // blocked, while the session loads): called just before the session says
  // it traces, so that a run stopped during its start-up says it recorded
  // nothing instead of exporting an empty session.
  void check_not_stopped() const;

  // Until `duration_s` has passed (none: forever) or a stop signal arrives.
  // A reset that fails is logged in one line and the session goes on.
  void run(const ForegroundBackend& backend, std::optional<double> duration_s,
           int drain_interval_ms);

  // From now on run() ends when `command` exits (never waiting on it), and
  // SIGINT/SIGTERM are passed to it instead of stopping the session, but for
  // a terminal's ^C that reached it too. `command` must outlive run().
  void follow(CommandChild& command);

  EventLoop& loop() { return loop_; }

 private:
  void on_stop_signal(int sig, bool by_kernel);

  EventLoop loop_;
  const ForegroundBackend* backend_ = nullptr;
  CommandChild* command_ = nullptr;
  bool stop_ = false;
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
/*
 * The daemon's one event loop, on its one thread: the foreground session
 * (either backend, daemon/run/foreground.h) and the service
 * (daemon/run/service.h) both run on it. One turn: poll() over the watched
 * fds and the signalfd until the nearest timer is due, then call the ready
 * fds' handlers, the arrived signals' handlers (each once per turn, however
 * often it arrived), the due timers' handlers.
 * Handlers run on the loop's thread and must not block: whatever waits on
 * somebody else (a control client) is a watched fd with a deadline timer.
 * A handler that throws ends run() with that exception; handlers that must
 * survive their failures catch them themselves.
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>

#include "daemon/sys/signals.h"

namespace stackmapd {

// How long the loop's turns held it (their handlers, not the wait): the
// promise that nothing on the loop waits is checked against this
// (stackmapd_loop_turn_seconds in /metrics).
struct LoopTurns {
  static constexpr double kBounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1};
  static constexpr size_t kBuckets = std::size(kBounds) + 1;  // the last: +Inf
  uint64_t turns[kBuckets] = {};                              // per bucket, not cumulative
  double seconds = 0;                                         // all turns' together
  double longest = 0;                                         // seconds
  void add(double s);
};

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = uint64_t;  // of a watch or a timer; never reused, 0 is none

  EventLoop() = default;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Calls on_ready(revents) in every turn that finds `fd` ready for `events`
  // (POLLERR/POLLHUP/POLLNVAL too).
  Id watch(int fd, short events, std::function<void(short revents)> on_ready);
  void set_events(Id watch, short events);
  void unwatch(Id watch);  // also from inside a handler

  // Calls fn once at `when`, or every `period` (first one period from now).
  Id at(Clock::time_point when, std::function<void()> fn);
  Id every(Clock::duration period, std::function<void()> fn);
  // The next call one new period from now.
  void set_period(Id timer, Clock::duration period);
  void cancel(Id timer);  // also from inside a handler

  // Takes `sig` from now on (daemon/sys/signals.h): calls on_signal(sig) in
  // the loop when it arrives. Take signals before slow setup (loading), so
  // that one arriving meanwhile is handled by the first turn.
  void on_signal(int sig, std::function<void(int)> fn);
  // The same, also telling whether every arrival of it in this turn was sent
  // by the kernel (SI_KERNEL: a terminal's ^C to its foreground process group)
  // rather than by a process (kill).
  void on_signal(int sig, std::function<void(int, bool by_kernel)> fn);

  // Turns until stop(); run_once() is one turn waiting at most max_wait.
  void run();
  void run_once(Clock::duration max_wait = Clock::duration::max());
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

  const LoopTurns& turns() const { return turns_; }
  size_t watches() const { return watches_.size(); }
  size_t timers() const { return timers_.size(); }

 private:
  struct Watch {
    int fd;
    short events;
    std::function<void(short)> fn;
  };
  struct Timer {
    Clock::time_point due;
    Clock::duration period;  // zero: once
    std::function<void()> fn;
  };

  Id next_id_ = 1;
  std::map<Id, Watch> watches_;
  std::map<Id, Timer> timers_;
  std::map<int, std::function<void(int, bool)>> signal_fns_;
  SignalFd signals_;
  bool stopped_ = false;
  LoopTurns turns_;
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/foreground.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <exception>
#include <vector>

#include "daemon/run/command_child.h"
#include "daemon/sys/signals.h"

namespace stackmapd {

Foreground::Foreground() {
  for (int sig : {SIGINT, SIGTERM})
    loop_.on_signal(sig, [this](int s, bool by_kernel) { on_stop_signal(s, by_kernel); });
  loop_.on_signal(SIGUSR1, [this](int) {
    if (!backend_) return;
    if (!backend_->reset) {
      spdlog::warn("SIGUSR1: this backend cannot reset its table while tracing; still tracing");
      return;
    }
    try {
      backend_->reset();
    } catch (const std::exception& e) {
      spdlog::error("SIGUSR1 reset failed, still tracing: {}", e.what());
    }
  });
}

void Foreground::check_not_stopped() const {
  sigset_t pending;
  sigpending(&pending);
  for (int sig : {SIGINT, SIGTERM})
    if (sigismember(&pending, sig) == 1) throw Interrupted(sig);
}

void Foreground::on_stop_signal(int sig, bool by_kernel) {
  if (!command_) {
    spdlog::debug("{}: stopping", strsignal(sig));
    stop_ = true;
    loop_.stop();
    return;
  }
  // A terminal sends its ^C to its whole foreground process group: a command
  // still in ours has it already, and a second one would be no forwarding.
  if (by_kernel && getpgid(command_->pid()) == getpgrp()) return;
  spdlog::debug("{}: passed to {}", strsignal(sig), command_->pid());
  command_->signal(sig);
}

void Foreground::follow(CommandChild& command) {
  command_ = &command;
  loop_.watch(command.pidfd(), POLLIN, [this](short) {
    if (command_->reap()) loop_.stop();
  });
}

void Foreground::run(const ForegroundBackend& backend, std::optional<double> duration_s,
                     int drain_interval_ms) {
  using Clock = EventLoop::Clock;
  backend_ = &backend;
  std::vector<EventLoop::Id> watches, timers;
  if (backend.wakeup_fd >= 0)
    watches.push_back(loop_.watch(backend.wakeup_fd, POLLIN, [&](short) { backend.drain(); }));
  // The BPF side submits without waking us (a wakeup costs more than the
  // stack): the timer is what drains in the common case.
  timers.push_back(
      loop_.every(std::chrono::milliseconds(drain_interval_ms > 0 ? drain_interval_ms : 1),
                  [&] { backend.drain(); }));
  if (backend.user_scan)
    timers.push_back(
        loop_.every(std::chrono::milliseconds(backend.user_scan_ms), [&] { backend.user_scan(); }));
  if (backend.each_second)
    timers.push_back(loop_.every(std::chrono::seconds(1), [&] { backend.each_second(); }));
  if (duration_s)
    timers.push_back(loop_.at(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(*duration_s)),
                              [this] { loop_.stop(); }));
  // A stop signal that came while the session loaded is handled by the first turn.
  struct Undo {
    Foreground& f;
    std::vector<EventLoop::Id>& watches;
    std::vector<EventLoop::Id>& timers;
    ~Undo() {
      f.backend_ = nullptr;
      for (auto id : watches) f.loop_.unwatch(id);
      for (auto id : timers) f.loop_.cancel(id);
    }
  } undo{*this, watches, timers};
  if (!stop_) loop_.run();
}

}  // namespace stackmapd

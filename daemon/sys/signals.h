// SPDX-License-Identifier: GPL-2.0
// Signals as file descriptor events: the signals a SignalFd takes are blocked
// and read from its signalfd in the event loop (daemon/sys/event_loop.h),
// never run as handlers, so a handler can do anything (reset, reload, export).
// One helper for every loop: foreground, tracefs and service.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>

#include <initializer_list>
#include <optional>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class SignalFd {
 public:
  SignalFd() = default;                                   // takes nothing yet: see add()
  explicit SignalFd(std::initializer_list<int> signals);  // throws Error
  ~SignalFd();                                            // unblocks what it took
  SignalFd(SignalFd&& o) noexcept;
  SignalFd& operator=(SignalFd&& o) noexcept;
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  // Takes `sig` from now on: one that arrives before the loop reads it
  // waits, pending, instead of running its default action.
  void add(int sig);
  bool has(int sig) const { return fd_ && sigismember(&set_, sig) == 1; }
  int fd() const { return fd_.get(); }  // -1 until the first add()
  // The next pending signal, without waiting.
  std::optional<signalfd_siginfo> next();

 private:
  void restore() noexcept;

  UniqueFd fd_;
  sigset_t set_ = {};
  sigset_t old_ = {};  // the mask before the first add()
};

}  // namespace stackmapd

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
#include <span>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

// Blocks `signals` in the calling thread for good. cmd/main.cpp calls it
// before any thread exists, so that every thread (ours, libbpf's, elfutils')
// inherits the block: the kernel hands a process's signal to any thread not
// blocking it, where its default action ends the process; only when all block
// it does it wait for the loop's signalfd. A child must unblock them before it
// execs (CommandChild does): a mask is inherited through exec.
void block_signals(std::span<const int> signals);

// A stop signal before the session began: nothing was recorded. cmd/main.cpp
// exits with status(), as a shell reports a command the signal ended.
class Interrupted : public Error {
 public:
  explicit Interrupted(int sig);
  int status() const { return 128 + sig_; }

 private:
  int sig_;
};

class SignalFd {
 public:
  SignalFd() = default;                                   // takes nothing yet: see add()
  explicit SignalFd(std::initializer_list<int> signals);  // throws Error
  ~SignalFd();  // gives back the mask it found: what cmd/main.cpp blocked stays blocked
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

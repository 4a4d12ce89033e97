// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "daemon/sys/error.h"

namespace stackmapd {

void block_signals(std::span<const int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Interrupted::Interrupted(int sig)
    : Error(std::string("SIG") + sigabbrev_np(sig) + " before tracing began: nothing was recorded"),
      sig_(sig) {}

SignalFd::SignalFd(std::initializer_list<int> signals) {
  for (int sig : signals) add(sig);
}

SignalFd::~SignalFd() { restore(); }

SignalFd::SignalFd(SignalFd&& o) noexcept : fd_(std::move(o.fd_)), set_(o.set_), old_(o.old_) {}

SignalFd& SignalFd::operator=(SignalFd&& o) noexcept {
  if (this != &o) {
    restore();
    fd_ = std::move(o.fd_);
    set_ = o.set_;
    old_ = o.old_;
  }
  return *this;
}

void SignalFd::add(int sig) {
  if (!fd_) {
    sigemptyset(&set_);
    sigprocmask(SIG_BLOCK, nullptr, &old_);
  }
  sigaddset(&set_, sig);
  // Block first: a signal between the two calls stays pending for the fd.
  sigprocmask(SIG_BLOCK, &set_, nullptr);
  int fd = signalfd(fd_ ? fd_.get() : -1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) throw Error(std::string("cannot create a signalfd: ") + std::strerror(errno));
  if (!fd_) fd_.reset(fd);
}

std::optional<signalfd_siginfo> SignalFd::next() {
  if (!fd_) return std::nullopt;
  signalfd_siginfo info;
  ssize_t n;
  do n = read(fd_.get(), &info, sizeof(info));
  while (n < 0 && errno == EINTR);
  if (n != sizeof(info)) return std::nullopt;
  return info;
}

void SignalFd::restore() noexcept {
  if (!fd_) return;
  fd_.reset();
  sigprocmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace stackmapd

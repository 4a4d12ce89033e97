// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/event_loop.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "daemon/sys/error.h"

namespace stackmapd {

EventLoop::Id EventLoop::watch(int fd, short events, std::function<void(short)> on_ready) {
  Id id = next_id_++;
  watches_[id] = Watch{fd, events, std::move(on_ready)};
  return id;
}

void EventLoop::set_events(Id watch, short events) {
  if (auto it = watches_.find(watch); it != watches_.end()) it->second.events = events;
}

void EventLoop::unwatch(Id watch) { watches_.erase(watch); }

EventLoop::Id EventLoop::at(Clock::time_point when, std::function<void()> fn) {
  Id id = next_id_++;
  timers_[id] = Timer{when, Clock::duration::zero(), std::move(fn)};
  return id;
}

EventLoop::Id EventLoop::every(Clock::duration period, std::function<void()> fn) {
  Id id = next_id_++;
  period = std::max(period, Clock::duration(1));
  timers_[id] = Timer{Clock::now() + period, period, std::move(fn)};
  return id;
}

void EventLoop::set_period(Id timer, Clock::duration period) {
  auto it = timers_.find(timer);
  if (it == timers_.end()) return;
  it->second.period = std::max(period, Clock::duration(1));
  it->second.due = Clock::now() + it->second.period;
}

void EventLoop::cancel(Id timer) { timers_.erase(timer); }

void EventLoop::on_signal(int sig, std::function<void(int)> fn) {
  on_signal(sig, [fn = std::move(fn)](int s, bool) { fn(s); });
}

void EventLoop::on_signal(int sig, std::function<void(int, bool)> fn) {
  signals_.add(sig);
  signal_fns_[sig] = std::move(fn);
}

void EventLoop::run() {
  stopped_ = false;
  while (!stopped_) run_once();
}

void EventLoop::run_once(Clock::duration max_wait) {
  auto now = Clock::now();
  auto until = max_wait == Clock::duration::max() ? Clock::time_point::max() : now + max_wait;
  for (const auto& [id, t] : timers_) until = std::min(until, t.due);
  int timeout = -1;
  if (until != Clock::time_point::max()) {
    // Round up: waking a little late costs nothing, waking early spins.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    timeout = static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
  }

  std::vector<pollfd> fds;
  std::vector<Id> ids;
  fds.reserve(watches_.size() + 1);
  for (const auto& [id, w] : watches_) {
    fds.push_back({w.fd, w.events, 0});
    ids.push_back(id);
  }
  if (signals_.fd() >= 0) fds.push_back({signals_.fd(), POLLIN, 0});
  if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
    throw Error(std::string("poll failed in the event loop: ") + std::strerror(errno));
  const Clock::time_point busy = Clock::now();

  for (size_t i = 0; i < ids.size(); ++i) {
    if (!fds[i].revents) continue;
    auto it = watches_.find(ids[i]);  // an earlier handler may have removed it
    if (it == watches_.end()) continue;
    auto fn = it->second.fn;  // the handler may unwatch itself
    fn(fds[i].revents);
  }
  if (signals_.fd() >= 0 && fds.back().revents) {
    // Only what is pending now, each signal once: one arriving while a
    // handler runs (a reload takes a while) waits for the next turn, so a
    // storm of them cannot keep the timers and the watched fds from theirs.
    std::map<int, bool> arrived;  // by signal: every arrival sent by the kernel
    std::vector<int> order;
    while (auto info = signals_.next()) {
      const int sig = static_cast<int>(info->ssi_signo);
      const bool by_kernel = info->ssi_code == SI_KERNEL;
      auto [it, added] = arrived.emplace(sig, by_kernel);
      if (added) order.push_back(sig);
      else it->second = it->second && by_kernel;
    }
    for (int sig : order) {
      auto it = signal_fns_.find(sig);
      if (it != signal_fns_.end()) it->second(sig, arrived[sig]);
    }
  }

  now = Clock::now();
  std::vector<Id> due;
  for (const auto& [id, t] : timers_)
    if (t.due <= now) due.push_back(id);
  for (Id id : due) {
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    auto fn = it->second.fn;
    if (it->second.period == Clock::duration::zero()) {
      timers_.erase(it);
    } else {
      // From now, not from when it was due: a stalled turn does not fire a burst.
      it->second.due = now + it->second.period;
    }
    fn();
  }
  turns_.add(std::chrono::duration<double>(Clock::now() - busy).count());
}

void LoopTurns::add(double s) {
  size_t b = 0;
  while (b < std::size(kBounds) && s > kBounds[b]) ++b;
  ++turns[b];
  seconds += s;
  longest = std::max(longest, s);
}

}  // namespace stackmapd

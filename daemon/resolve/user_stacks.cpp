// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/user_stacks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "daemon/resolve/unwind_thread.h"
#include "daemon/resolve/user_capture.h"

namespace stackmapd {

struct UserStackEpoch {
  struct Entry {
    UserStack stack;
    uint64_t seq = 0;     // its place in the queue's order
    size_t binaries = 0;  // UserStackShared::binaries it may name
    bool gone = false;
  };
  std::map<uint32_t, Entry> stacks;  // by user stack id
};

// Shared by the loop, the runners' tasks and the snapshots in flight, under `mu`.
struct UserStackShared {
  std::mutex mu;
  std::condition_variable resolved;  // `done` advanced, or stop
  uint64_t done = 0;                 // stacks resolved: the symbolizer takes them in queue order
  bool stop = false;
  std::vector<UserBinary> binaries;  // UserCapture::binaries() as far as published
  uint64_t processes_evicted = 0, binaries_evicted = 0, parse_failures = 0;
  UnwindCounts unwind;
};

UserStackCollector::UserStackCollector(uint32_t ids, Reader read, std::string proc,
                                       size_t max_queued, std::unique_ptr<UnwindLoader> unwind)
    : read_(std::move(read)),
      seen_(ids, 0),
      shared_(std::make_shared<UserStackShared>()),
      epoch_(std::make_shared<UserStackEpoch>()),
      capture_(std::make_unique<UserCapture>(std::move(proc), std::move(unwind))),
      // Idle, it still wakes to close what symbolizing held open.
      symbolizer_(TaskRunner::Options("user-symbols")
                      .unbounded()
                      .niceness(kBackgroundNice)
                      .when_idle(UserSymbolizer::kIdle, [this] { capture_->close_idle(); })),
      capturer_(TaskRunner::Options("user-capture").at_most(max_queued)) {
  resolved_.enabled = true;
}

UserStackCollector::~UserStackCollector() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->resolved.notify_all();
  capturer_.stop();  // before the symbolizer, which its last task may feed
  symbolizer_.stop();
}

void UserStackCollector::first_sight(uint32_t id) {
  seen_[id] = 1;
  std::optional<UserStackIps> ips = read_(id);
  if (!ips) return;
  const size_t footprint = ips->ips.size() * sizeof(uint64_t);
  const uint64_t seq = queued_;
  // Captured at once, while its process most likely still runs: never
  // behind a slow symbolize.
  if (!capturer_.post(
          [this, id, seq, epoch = epoch_, ips = std::move(*ips)] { capture(id, seq, epoch, ips); },
          footprint)) {
    if (dropped_++ == 0)
      spdlog::warn(
          "user stacks: the resolver's queue is full ({} stacks): stack {} and the "
          "next ones past the cap stay unresolved (counted in "
          "stackmapd_user_stacks_dropped_total)",
          capturer_.counts().waiting, id);
    return;
  }
  queued_++;
}

void UserStackCollector::capture(uint32_t id, uint64_t seq,
                                 const std::shared_ptr<UserStackEpoch>& epoch,
                                 const UserStackIps& ips) {
  auto c = std::make_shared<CapturedStack>(capture_->capture(ips));
  const size_t binaries = capture_->binary_count();
  symbolizer_.post(
      [this, id, seq, epoch, binaries, c] { symbolize(id, seq, *epoch, binaries, *c); });
}

// In queue order: publishes each stack symbolized.
void UserStackCollector::symbolize(uint32_t id, uint64_t seq, UserStackEpoch& epoch,
                                   size_t binaries, CapturedStack& captured) {
  UserCapture& capture = *capture_;
  UserStackShared& sh = *shared_;
  const bool gone = captured.gone;
  UserStack s = capture.symbolize(std::move(captured));
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    // Lock order: sh.mu, then the capture's.
    std::vector<UserBinary> added = capture.binaries(sh.binaries.size());
    sh.binaries.insert(sh.binaries.end(), added.begin(), added.end());
    epoch.stacks[id] = {std::move(s), seq, binaries, gone};
    sh.done = seq + 1;
    sh.processes_evicted = capture.processes_evicted();
    sh.binaries_evicted = capture.binaries_evicted();
    sh.parse_failures = capture.parse_failures();
    sh.unwind = capture.unwind_counts();
  }
  sh.resolved.notify_all();
  capture.close_idle();
}

UserStackCollector::Mark UserStackCollector::mark() const {
  return Mark{shared_, epoch_, queued_, dropped_};
}

UserStackSet UserStackCollector::stacks_at(const Mark& m, UserStackCounts* counts) {
  UserStackShared& sh = *m.shared;
  std::unique_lock<std::mutex> lock(sh.mu);
  sh.resolved.wait(lock, [&] { return sh.stop || sh.done >= m.queued; });
  UserStackSet set;
  set.enabled = true;
  UserStackCounts c;
  size_t binaries = 0;
  for (const auto& [id, e] : m.epoch->stacks) {
    if (e.seq >= m.queued) continue;
    set.stacks.emplace(id, e.stack);
    binaries = std::max(binaries, e.binaries);
    c.gone += e.gone;
    c.truncated += e.stack.truncated;
  }
  set.binaries.assign(sh.binaries.begin(), sh.binaries.begin() + binaries);
  c.processes_evicted = sh.processes_evicted;
  c.binaries_evicted = sh.binaries_evicted;
  c.parse_failures = sh.parse_failures;
  c.unwind = sh.unwind;
  c.dropped = m.dropped;
  if (counts) *counts = c;
  return set;
}

const UserStackSet& UserStackCollector::resolved(const std::function<void()>& while_waiting) {
  if (resolved_through_ == queued_) return resolved_;
  // What is queued now: while_waiting may queue more, which a later call waits for.
  const uint64_t target = queued_;
  UserStackShared& sh = *shared_;
  std::unique_lock<std::mutex> lock(sh.mu);
  const auto done = [&] { return sh.stop || sh.done >= target; };
  if (!while_waiting) sh.resolved.wait(lock, done);
  while (!sh.resolved.wait_for(lock, std::chrono::milliseconds(kWaitStepMs), done)) {
    lock.unlock();
    while_waiting();
    lock.lock();
  }
  for (const auto& [id, e] : epoch_->stacks)
    if (e.seq >= resolved_through_ && e.seq < target) resolved_.stacks.emplace(id, e.stack);
  resolved_.binaries = sh.binaries;
  resolved_through_ = target;
  return resolved_;
}

UserStackCounts UserStackCollector::counts() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  UserStackCounts c;
  for (const auto& [id, e] : epoch_->stacks) {
    c.gone += e.gone;
    c.truncated += e.stack.truncated;
  }
  c.processes_evicted = shared_->processes_evicted;
  c.binaries_evicted = shared_->binaries_evicted;
  c.parse_failures = shared_->parse_failures;
  c.unwind = shared_->unwind;
  c.dropped = dropped_;
  return c;
}

void UserStackCollector::clear() {
  std::fill(seen_.begin(), seen_.end(), 0);
  epoch_ = std::make_shared<UserStackEpoch>();
  resolved_.stacks.clear();
  dropped_ = 0;
}

}  // namespace stackmapd

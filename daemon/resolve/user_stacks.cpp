// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/user_stacks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <utility>

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

// Shared by the loop, the worker and the snapshots in flight, under `mu`.
struct UserStackShared {
  struct Job {
    uint32_t id = 0;
    uint64_t seq = 0;
    std::shared_ptr<UserStackEpoch> epoch;
    UserStackIps ips;
  };
  std::mutex mu;
  std::condition_variable work;      // a job queued, or stop
  std::condition_variable resolved;  // `done` advanced, or stop
  std::deque<Job> queue;
  uint64_t done = 0;  // jobs resolved: the worker takes them in queue order
  bool stop = false;
  std::vector<UserBinary> binaries;  // UserCapture::binaries() as far as published
  uint64_t processes_evicted = 0, binaries_evicted = 0;
  UnwindCounts unwind;
};

UserStackCollector::UserStackCollector(uint32_t ids, Reader read, std::string proc,
                                       size_t max_queued, std::unique_ptr<UnwindLoader> unwind)
    : read_(std::move(read)),
      max_queued_(max_queued),
      seen_(ids, 0),
      shared_(std::make_shared<UserStackShared>()),
      epoch_(std::make_shared<UserStackEpoch>()) {
  resolved_.enabled = true;
  worker_ = std::thread([this, proc = std::move(proc), unwind = std::move(unwind)]() mutable {
    UserCapture capture(proc, std::move(unwind));
    run_worker(*shared_, capture);
  });
}

UserStackCollector::~UserStackCollector() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->work.notify_all();
  shared_->resolved.notify_all();
  worker_.join();
}

void UserStackCollector::first_sight(uint32_t id) {
  seen_[id] = 1;
  std::optional<UserStackIps> ips = read_(id);
  if (!ips) return;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->queue.size() >= max_queued_) {
      if (dropped_++ == 0)
        spdlog::warn(
            "user stacks: the resolver's queue is full ({} stacks): stack {} and the "
            "next ones past the cap stay unresolved (counted in "
            "stackmapd_user_stacks_dropped_total)",
            max_queued_, id);
      return;
    }
    shared_->queue.push_back({id, queued_++, epoch_, std::move(*ips)});
  }
  shared_->work.notify_one();
}

// Captures every queued stack before symbolizing the oldest captured one.
void UserStackCollector::run_worker(UserStackShared& sh, UserCapture& capture) {
  struct Captured {
    UserStackShared::Job job;
    CapturedStack stack;
    size_t binaries;
  };
  std::deque<Captured> captured;
  for (;;) {
    std::deque<UserStackShared::Job> jobs;
    {
      std::unique_lock<std::mutex> lock(sh.mu);
      sh.work.wait(lock, [&] { return sh.stop || !sh.queue.empty() || !captured.empty(); });
      if (sh.stop) return;
      jobs.swap(sh.queue);
    }
    for (UserStackShared::Job& j : jobs) {
      CapturedStack c = capture.capture(j.ips);
      captured.push_back({std::move(j), std::move(c), capture.binaries().size()});
    }
    Captured next = std::move(captured.front());
    captured.pop_front();
    const bool gone = next.stack.gone;
    UserStack s = capture.symbolize(std::move(next.stack));
    {
      std::lock_guard<std::mutex> lock(sh.mu);
      const std::vector<UserBinary>& all = capture.binaries();
      sh.binaries.insert(sh.binaries.end(), all.begin() + sh.binaries.size(), all.end());
      next.job.epoch->stacks[next.job.id] = {std::move(s), next.job.seq, next.binaries, gone};
      sh.done = next.job.seq + 1;
      sh.processes_evicted = capture.processes_evicted();
      sh.binaries_evicted = capture.binaries_evicted();
      sh.unwind = capture.unwind_counts();
    }
    sh.resolved.notify_all();
  }
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
  c.unwind = sh.unwind;
  c.dropped = m.dropped;
  if (counts) *counts = c;
  return set;
}

const UserStackSet& UserStackCollector::resolved() {
  if (resolved_through_ == queued_) return resolved_;
  UserStackShared& sh = *shared_;
  std::unique_lock<std::mutex> lock(sh.mu);
  sh.resolved.wait(lock, [&] { return sh.stop || sh.done >= queued_; });
  for (const auto& [id, e] : epoch_->stacks)
    if (e.seq >= resolved_through_) resolved_.stacks.emplace(id, e.stack);
  resolved_.binaries = sh.binaries;
  resolved_through_ = queued_;
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

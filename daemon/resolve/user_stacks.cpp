// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/user_stacks.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
  // A job captured, waiting to be symbolized.
  struct Captured {
    Job job;
    CapturedStack stack;
    size_t binaries = 0;  // UserCapture::binary_count() after its capture
  };
  std::mutex mu;
  std::condition_variable work;           // a job queued, or stop
  std::condition_variable captured_work;  // a job captured, or stop
  std::condition_variable resolved;       // `done` advanced, or stop
  std::deque<Job> queue;
  std::deque<Captured> captured;  // in queue order
  uint64_t done = 0;              // jobs resolved: the worker takes them in queue order
  bool stop = false;
  std::vector<UserBinary> binaries;  // UserCapture::binaries() as far as published
  uint64_t processes_evicted = 0, binaries_evicted = 0, parse_failures = 0;
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
    std::thread symbolizer([this, &capture] { run_symbolizer(*shared_, capture); });
    run_capture(*shared_, capture);
    shared_->captured_work.notify_all();  // stop is set
    symbolizer.join();
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

// Captures each stack as soon as it is queued: never behind a slow symbolize.
void UserStackCollector::run_capture(UserStackShared& sh, UserCapture& capture) {
  for (;;) {
    std::deque<UserStackShared::Job> jobs;
    {
      std::unique_lock<std::mutex> lock(sh.mu);
      sh.work.wait(lock, [&] { return sh.stop || !sh.queue.empty(); });
      if (sh.stop) return;
      jobs.swap(sh.queue);
    }
    for (UserStackShared::Job& j : jobs) {
      CapturedStack c = capture.capture(j.ips);
      const size_t binaries = capture.binary_count();
      {
        std::lock_guard<std::mutex> lock(sh.mu);
        sh.captured.push_back({std::move(j), std::move(c), binaries});
      }
      sh.captured_work.notify_one();
    }
  }
}

// Symbolizes the captured stacks in queue order and publishes them.
void UserStackCollector::run_symbolizer(UserStackShared& sh, UserCapture& capture) {
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kBackgroundNice);
  for (;;) {
    UserStackShared::Captured next;
    {
      std::unique_lock<std::mutex> lock(sh.mu);
      // Idle, it still wakes to close what symbolizing held open.
      const bool work = sh.captured_work.wait_for(lock, UserSymbolizer::kIdle,
                                                  [&] { return sh.stop || !sh.captured.empty(); });
      if (sh.stop) return;
      if (!work) {
        lock.unlock();
        capture.close_idle();
        continue;
      }
      next = std::move(sh.captured.front());
      sh.captured.pop_front();
    }
    const bool gone = next.stack.gone;
    UserStack s = capture.symbolize(std::move(next.stack));
    std::vector<UserBinary> added;
    {
      std::lock_guard<std::mutex> lock(sh.mu);
      added = capture.binaries(sh.binaries.size());  // lock order: sh.mu, then the capture's
      sh.binaries.insert(sh.binaries.end(), added.begin(), added.end());
      next.job.epoch->stacks[next.job.id] = {std::move(s), next.job.seq, next.binaries, gone};
      sh.done = next.job.seq + 1;
      sh.processes_evicted = capture.processes_evicted();
      sh.binaries_evicted = capture.binaries_evicted();
      sh.parse_failures = capture.parse_failures();
      sh.unwind = capture.unwind_counts();
    }
    sh.resolved.notify_all();
    capture.close_idle();
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

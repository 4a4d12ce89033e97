// SPDX-License-Identifier: GPL-2.0
// One worker thread beside the event loop, for work too heavy for the loop's
// turn (formatting a whole export for HTTP): post(work, done) runs work() on
// the worker and then done() back on the loop's thread, jobs in post order.
// Threads: post() and done() are the loop's; work() is the worker's and
// must only read what its closure owns (copies, shared immutable data).
// queue_ and finished_ are guarded by mu_; the worker wakes the loop through
// wake_, an eventfd the loop watches.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "daemon/sys/event_loop.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class Background {
 public:
  explicit Background(EventLoop& loop);  // throws Error without an eventfd
  // Waits for the job in progress; queued jobs and pending done()s are dropped.
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  void post(std::function<void()> work, std::function<void()> done);

 private:
  struct Job {
    std::function<void()> work;
    std::function<void()> done;
  };
  void run();          // the worker thread
  void on_finished();  // the loop: runs the finished jobs' done()

  EventLoop& loop_;
  UniqueFd wake_;
  EventLoop::Id watch_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;                       // posted, not started
  std::deque<std::function<void()>> finished_;  // done()s for the loop
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace stackmapd

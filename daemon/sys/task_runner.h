// SPDX-License-Identifier: GPL-2.0
// The one shape of every thread beside the event loop (docs/design.md,
// "Threads"): a worker thread and its bounded queue of tasks, run in post
// order. post(task) runs task() on the worker; post(task, reply) then runs
// reply() back on the loop's thread (woken through an eventfd the loop
// watches). A full queue refuses the new task or drops the oldest waiting one,
// as the runner was built, and counts it; each task may say its footprint
// (the bytes its closure holds) so that what waits is known.
//
// Threads: post(), wait_idle() and counts() from any thread; a task may post
// to another runner (the capture hands stacks to the symbolizer). The worker
// starts with every signal blocked: the loop takes them through a signalfd
// (daemon/sys/signals.h), and one delivered here would take its default
// action (SIGHUP ends the process).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "daemon/sys/event_loop.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class TaskRunner {
 public:
  using Task = std::function<void()>;
  enum class Full {
    refuse,       // the new task is not queued (post() returns false)
    drop_oldest,  // the oldest waiting task makes room (a newer one covers it)
  };
  // TaskRunner(Options("exports").at_most(1, Full::drop_oldest), &loop)
  struct Options {
    explicit Options(std::string thread_name) : name(std::move(thread_name)) {}
    Options& at_most(size_t tasks, Full when_full = Full::refuse) {
      max_tasks = tasks;
      full = when_full;
      return *this;
    }
    Options& unbounded() { return at_most(SIZE_MAX); }
    // > 0: behind the loop and the capture on a busy machine.
    Options& niceness(int n) {
      nice = n;
      return *this;
    }
    // Idle for `after`, fn() runs on the worker (closing what it keeps open).
    Options& when_idle(std::chrono::milliseconds after, Task fn) {
      idle_after = after;
      on_idle = std::move(fn);
      return *this;
    }

    std::string name;        // the thread's (top -H, /proc/PID/task/*/comm): 15 bytes
    size_t max_tasks = 256;  // waiting, not started
    Full full = Full::refuse;
    int nice = 0;
    std::chrono::milliseconds idle_after{0};
    Task on_idle;
  };
  struct Counts {
    uint64_t run = 0;                          // tasks finished
    uint64_t dropped = 0;                      // tasks refused or dropped: the queue was full
    size_t waiting = 0;                        // tasks queued now
    size_t waiting_bytes = 0, peak_bytes = 0;  // their footprints, now and at most
  };

  // `loop`: where replies run (nullptr: this runner takes no replies).
  explicit TaskRunner(Options options, EventLoop* loop = nullptr);  // throws Error
  // stop(): the running task finishes, waiting ones are dropped.
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // False when the queue was full and the runner refuses (or stopped).
  bool post(Task task, size_t footprint = 0);
  // reply() runs on the loop once task() returned; not if the task was
  // dropped or the runner stopped first. A task that can fail catches its
  // own exception and hands it to its reply.
  bool post(Task task, Task reply, size_t footprint = 0);
  // Blocks until no task runs or waits (the last export at stop).
  void wait_idle();
  bool busy() const;
  Counts counts() const;
  // Joins the worker after its running task; waiting tasks are dropped.
  void stop();

 private:
  struct Job {
    Task task, reply;
    size_t footprint;
  };
  void run();
  void on_replies();  // the loop: runs the finished tasks' replies

  const Options opt_;
  EventLoop* loop_;
  UniqueFd wake_;  // an eventfd: replies are ready
  EventLoop::Id watch_ = 0;
  mutable std::mutex mu_;
  std::condition_variable work_;  // a task queued, or stopping
  std::condition_variable idle_;  // a task finished
  std::deque<Job> jobs_;          // waiting
  std::deque<Task> replies_;      // for the loop
  bool running_ = false, stopping_ = false;
  Counts counts_;
  std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace stackmapd

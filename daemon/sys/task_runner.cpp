// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/task_runner.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "daemon/sys/error.h"

namespace stackmapd {

TaskRunner::TaskRunner(Options options, EventLoop* loop) : opt_(std::move(options)), loop_(loop) {
  if (loop_) {
    wake_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) throw Error(std::string("cannot create an eventfd: ") + std::strerror(errno));
    watch_ = loop_->watch(wake_.get(), POLLIN, [this](short) { on_replies(); });
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TaskRunner::~TaskRunner() {
  stop();
  if (loop_) loop_->unwatch(watch_);
}

bool TaskRunner::post(Task task, size_t footprint) { return post(std::move(task), {}, footprint); }

bool TaskRunner::post(Task task, Task reply, size_t footprint) {
  if (reply && !loop_) throw Error("runner " + opt_.name + " has no loop to reply on");
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    if (jobs_.size() >= opt_.max_tasks) {
      counts_.dropped++;
      if (opt_.full == Full::refuse || jobs_.empty()) return false;
      // The newer task covers the one it replaces: so does its reply.
      counts_.waiting_bytes -= jobs_.front().footprint;
      jobs_.pop_front();
    }
    jobs_.push_back({std::move(task), std::move(reply), footprint});
    counts_.waiting_bytes += footprint;
    counts_.peak_bytes = std::max(counts_.peak_bytes, counts_.waiting_bytes);
  }
  work_.notify_one();
  return true;
}

void TaskRunner::wait_idle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return stopping_ || (!running_ && jobs_.empty()); });
}

bool TaskRunner::busy() const {
  std::lock_guard lock(mu_);
  return running_ || !jobs_.empty();
}

TaskRunner::Counts TaskRunner::counts() const {
  std::lock_guard lock(mu_);
  Counts c = counts_;
  c.waiting = jobs_.size();
  return c;
}

void TaskRunner::stop() {
  std::deque<Job> dropped;  // freed outside the lock: a snapshot can be big
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(jobs_);
    counts_.waiting_bytes = 0;
  }
  work_.notify_one();
  idle_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TaskRunner::run() {
  pthread_setname_np(pthread_self(), opt_.name.substr(0, 15).c_str());
  if (opt_.nice) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), opt_.nice);
  const auto has_work = [this] { return stopping_ || !jobs_.empty(); };
  std::unique_lock lock(mu_);
  for (;;) {
    if (opt_.on_idle && opt_.idle_after.count()) {
      if (!work_.wait_for(lock, opt_.idle_after, has_work)) {
        lock.unlock();
        opt_.on_idle();
        lock.lock();
        continue;
      }
    } else {
      work_.wait(lock, has_work);
    }
    if (stopping_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    counts_.waiting_bytes -= job.footprint;
    running_ = true;
    lock.unlock();
    job.task();
    job.task = nullptr;  // what it captured (a snapshot) is freed here, off the loop
    lock.lock();
    running_ = false;
    counts_.run++;
    if (job.reply && !stopping_) {
      replies_.push_back(std::move(job.reply));
      uint64_t one = 1;
      (void)!write(wake_.get(), &one, sizeof(one));  // fails only when the counter is full: awake
    }
    idle_.notify_all();
  }
}

void TaskRunner::on_replies() {
  uint64_t n;
  (void)!read(wake_.get(), &n, sizeof(n));
  std::deque<Task> ready;
  {
    std::lock_guard lock(mu_);
    ready.swap(replies_);
  }
  for (Task& reply : ready) reply();
}

}  // namespace stackmapd

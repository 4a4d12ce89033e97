// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/background.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "daemon/sys/error.h"

namespace stackmapd {

Background::Background(EventLoop& loop)
    : loop_(loop), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!wake_) throw Error(std::string("cannot create an eventfd: ") + std::strerror(errno));
  watch_ = loop_.watch(wake_.get(), POLLIN, [this](short) { on_finished(); });
  thread_ = std::thread([this] { run(); });
}

Background::~Background() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_one();
  thread_.join();
  loop_.unwatch(watch_);
}

void Background::post(std::function<void()> work, std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(work), std::move(done)});
  }
  cv_.notify_one();
}

void Background::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // work() catches its own errors and hands them to done(); what it
    // captured (a snapshot) is freed here, off the loop.
    job.work();
    job.work = nullptr;
    lock.lock();
    finished_.push_back(std::move(job.done));
    uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));  // only fails when the counter is full: awake
  }
}

void Background::on_finished() {
  uint64_t n;
  (void)!read(wake_.get(), &n, sizeof(n));
  std::deque<std::function<void()>> done;
  {
    std::lock_guard lock(mu_);
    done.swap(finished_);
  }
  for (auto& fn : done) fn();
}

}  // namespace stackmapd

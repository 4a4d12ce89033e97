// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/unwind_thread.h"

#include <sys/resource.h>
#include <unistd.h>

namespace stackmapd {

UnwindThread::UnwindThread(std::unique_ptr<UnwindLoader> loader)
    : loader_(std::move(loader)), counts_(loader_->counts()), thread_([this] { run(); }) {}

UnwindThread::~UnwindThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void UnwindThread::load(uint32_t pid, uint32_t exec_id, ProcessMaps maps) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back({pid, exec_id, std::move(maps)});
  }
  work_.notify_one();
}

UnwindCounts UnwindThread::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

void UnwindThread::run() {
  // Behind the capturing thread and the loop, on a busy machine too.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kBackgroundNice);
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    loader_->load(job.pid, job.exec_id, job.maps);
    std::lock_guard<std::mutex> lock(mu_);
    counts_ = loader_->counts();
  }
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/unwind_thread.h"

#include <utility>

namespace stackmapd {

// Behind the capturing thread and the loop, on a busy machine too.
UnwindThread::UnwindThread(std::unique_ptr<UnwindLoader> loader)
    : loader_(std::move(loader)),
      counts_(loader_->counts()),
      runner_(TaskRunner::Options("unwind-tables").unbounded().niceness(kBackgroundNice)) {}

void UnwindThread::load(uint32_t pid, uint32_t exec_id, ProcessMaps maps) {
  runner_.post([this, pid, exec_id, maps = std::move(maps)] {
    loader_->load(pid, exec_id, maps);
    std::lock_guard<std::mutex> lock(mu_);
    counts_ = loader_->counts();
  });
}

UnwindCounts UnwindThread::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace stackmapd

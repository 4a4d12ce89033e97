// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/export_worker.h"

#include <malloc.h>

#include <exception>
#include <utility>

namespace stackmapd {

ExportWorker::ExportWorker(EventLoop* loop)
    : has_loop_(loop != nullptr),
      runner_(TaskRunner::Options("exports").at_most(1, TaskRunner::Full::drop_oldest), loop) {}

void ExportWorker::post(Job job, Written written) {
  // What the job that runs tells: its error, to those who waited on it or
  // on the jobs it replaced.
  struct Told {
    std::string error;
    std::vector<Written> waiting;
  };
  auto told = std::make_shared<Told>();
  if (written) {
    std::lock_guard lock(mu_);
    waiting_.push_back(std::move(written));
  }
  TaskRunner::Task reply = [told] {
    for (const Written& w : told->waiting) w(told->error);
  };
  runner_.post(
      [this, told, job = std::move(job)]() mutable {
        {
          std::lock_guard lock(mu_);
          told->waiting.swap(waiting_);
        }
        try {
          job();
        } catch (const std::exception& e) {
          told->error = e.what();
        }
        job = nullptr;  // the snapshot it held goes before the trim
        // An export's formatting peaks at many times the table's size, in
        // this thread's own malloc arena: give it back, or RSS keeps every peak.
        malloc_trim(0);
        std::lock_guard lock(mu_);
        outcome_ = told->error;
      },
      has_loop_ ? std::move(reply) : TaskRunner::Task{});
}

std::optional<std::string> ExportWorker::take_outcome() {
  std::lock_guard lock(mu_);
  return std::exchange(outcome_, std::nullopt);
}

}  // namespace stackmapd

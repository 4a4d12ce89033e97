// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/export_worker.h"

#include <malloc.h>
#include <signal.h>

#include <exception>
#include <utility>

namespace stackmapd {

// The thread starts with every signal blocked: the loop takes its signals
// through a signalfd (daemon/sys/signals.h), and one delivered to this thread
// instead would take its default action (SIGHUP ends the process).
ExportWorker::ExportWorker() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { work(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

ExportWorker::~ExportWorker() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    waiting_ = nullptr;
  }
  wake_.notify_one();
  thread_.join();
}

void ExportWorker::post(Job job) {
  {
    std::lock_guard lock(mu_);
    waiting_ = std::move(job);
  }
  wake_.notify_one();
}

bool ExportWorker::busy() const {
  std::lock_guard lock(mu_);
  return running_ || waiting_;
}

void ExportWorker::wait_idle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return !running_ && !waiting_; });
}

std::optional<std::string> ExportWorker::take_outcome() {
  std::lock_guard lock(mu_);
  return std::exchange(outcome_, std::nullopt);
}

void ExportWorker::work() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || waiting_; });
    if (stopping_) return;
    Job job = std::exchange(waiting_, nullptr);
    running_ = true;
    lock.unlock();
    std::string error;
    try {
      job();
    } catch (const std::exception& e) {
      error = e.what();
    }
    job = nullptr;  // the snapshot it held goes before the trim
    // An export's formatting peaks at many times the table's size, in this
    // thread's own malloc arena: give it back, or RSS keeps every peak.
    malloc_trim(0);
    lock.lock();
    running_ = false;
    outcome_ = std::move(error);
    idle_.notify_all();
  }
}

}  // namespace stackmapd

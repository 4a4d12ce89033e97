// SPDX-License-Identifier: GPL-2.0
// The service's timed exports, written off the event loop's thread: the loop
// takes the snapshot (the exact cut needs the ring, daemon/bpf/ring_consumer.h)
// and posts a job that formats, symbolizes and fsyncs the files on this
// worker's one thread. A big table or a slow disk then never delays the
// ring, the watchdog or a client (before: a 2.5 s `ctl stat` at 255 k
// events/s). One job runs at a time and at most one waits: a newer post
// replaces the waiting one, so a burst of reloads writes the newest state
// once instead of queueing snapshots.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace stackmapd {

class ExportWorker {
 public:
  // A job's failure is its exception's what(), kept for the loop to report.
  using Job = std::function<void()>;

  ExportWorker();
  ~ExportWorker();  // finishes the running job; a waiting one is dropped
  ExportWorker(const ExportWorker&) = delete;
  ExportWorker& operator=(const ExportWorker&) = delete;

  void post(Job job);
  // Whether a job runs or waits: the timed export skips its turn then.
  bool busy() const;
  // Blocks until no job runs or waits: for the exports that must be on disk
  // when the caller returns (ctl snapshot, the last one at stop), which must
  // not be overtaken by an older snapshot's rename.
  void wait_idle();
  // The outcome of the jobs finished since the last call: nullopt if none
  // finished, "" if the last one succeeded, else its error.
  std::optional<std::string> take_outcome();

 private:
  void work();

  mutable std::mutex mu_;
  std::condition_variable wake_;  // a job posted, or stopping
  std::condition_variable idle_;  // a job finished
  Job waiting_;
  bool running_ = false;
  bool stopping_ = false;
  std::optional<std::string> outcome_;
  std::thread thread_;
};

}  // namespace stackmapd

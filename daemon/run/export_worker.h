// SPDX-License-Identifier: GPL-2.0
// The service's exports, written off the event loop's thread: the loop takes
// the snapshot (the exact cut needs the ring, daemon/bpf/ring_consumer.h) and
// posts a job that finishes, formats, symbolizes and fsyncs the files on this
// worker (a daemon/sys/task_runner.h). A big table or a slow disk then never
// delays the ring, the watchdog or a client (before: a 2.5 s `ctl stat` at
// 255 k events/s). One job runs at a time and at most one waits: a newer post
// replaces the waiting one, so a burst of reloads writes the newest state
// once instead of queueing snapshots; whoever waited on the replaced one
// (`ctl snapshot`) is told when the newer one is written.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/sys/task_runner.h"

namespace stackmapd {

class ExportWorker {
 public:
  // A job's failure is its exception's what(), kept for the loop to report.
  using Job = std::function<void()>;
  // On the loop once the files are written: "" or the failure.
  using Written = std::function<void(const std::string& error)>;

  // `loop`: where Written callbacks run (nullptr: none are given).
  explicit ExportWorker(EventLoop* loop = nullptr);

  void post(Job job, Written written = {});
  // Whether a job runs or waits: the timed export skips its turn then.
  bool busy() const { return runner_.busy(); }
  // Blocks until no job runs or waits: for the last export at stop, which
  // must be on disk when the daemon exits.
  void wait_idle() { runner_.wait_idle(); }
  // The outcome of the jobs finished since the last call: nullopt if none
  // finished, "" if the last one succeeded, else its error.
  std::optional<std::string> take_outcome();

 private:
  const bool has_loop_;
  mutable std::mutex mu_;
  std::optional<std::string> outcome_;
  std::vector<Written> waiting_;  // told by the next job that starts
  TaskRunner runner_;             // last: its thread stops first
};

}  // namespace stackmapd

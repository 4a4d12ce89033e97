// SPDX-License-Identifier: GPL-2.0
// Which of the processes the --by keys name have exited, so that the store
// folds their keys (StackStore::fold_exited) and its pairs recycle. The loop
// hands the ids over at each snapshot cut (check()) and takes what was found
// at its next drain (take()); the checks run on a worker thread, since one
// costs a syscall (up to 50 µs on a busy VM) and a table may name 20,000
// processes.
//
// A pid can be reused. A key holds no process start time, so a pid is
// checked only as a number: a key whose pid a new process took stays
// unfolded while that process lives, and counts it too (as before folding).
// A pid found gone is folded at the next drain, milliseconds later: wrong
// only if the pid space wrapped around within those milliseconds.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "daemon/sys/process_gone.h"
#include "daemon/sys/task_runner.h"

namespace stackmapd {

class ExitWatch {
 public:
  explicit ExitWatch(ProcessGone gone = process_gone);
  // A check under way stops at its next id.
  ~ExitWatch() { stopping_ = true; }
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;

  // Checks `ids` on the worker; a check still waiting is dropped (these cover it).
  void check(std::vector<uint32_t> ids);
  // The ids found gone by the checks done since the last call, sorted; empty
  // if none. Cheap when there are none: the loop calls it at every drain.
  std::vector<uint32_t> take();
  // Blocks until no check runs or waits.
  void wait_idle() { runner_.wait_idle(); }

 private:
  ProcessGone gone_;
  std::mutex mu_;
  std::vector<uint32_t> found_;   // under mu_
  std::atomic<bool> any_{false};  // found_ is not empty
  std::atomic<bool> stopping_{false};
  TaskRunner runner_;  // last: its thread starts once the rest is built
};

}  // namespace stackmapd

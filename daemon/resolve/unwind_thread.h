// SPDX-License-Identifier: GPL-2.0
// --user-stacks: the unwind tables' loader (daemon/unwind/unwind_loader.h) on
// a worker of its own (daemon/sys/task_runner.h), fed by the resolver's worker. Building a new
// binary's table takes up to 150 ms (libc's); on the worker it held up the capture of the next
// processes' stacks, and a process that lives 50 ms was gone before its maps were read. A process
// whose tables are not in yet is walked by frame pointers meanwhile (SMC_USER_NOT_LOADED).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "daemon/symbols/user_maps.h"
#include "daemon/sys/task_runner.h"
#include "daemon/unwind/unwind_loader.h"

namespace stackmapd {

// The nice value of the resolver's slow threads (this one, the symbolizing
// one): on a loaded machine (2 CPUs, load 9 here) the capture of a 50 ms
// process's stack lost the CPU to them and came after the process's exit.
inline constexpr int kBackgroundNice = 10;

class UnwindThread {
 public:
  explicit UnwindThread(std::unique_ptr<UnwindLoader> loader);
  // Destroyed: the load under way finishes, the others are dropped.
  UnwindThread(const UnwindThread&) = delete;
  UnwindThread& operator=(const UnwindThread&) = delete;

  // Queues the load of process `pid` in exec `exec_id` from a copy of its maps.
  void load(uint32_t pid, uint32_t exec_id, ProcessMaps maps);
  UnwindCounts counts() const;

 private:
  const std::unique_ptr<UnwindLoader> loader_;  // used by the runner's tasks only
  mutable std::mutex mu_;
  UnwindCounts counts_;  // the loader's, after its last load
  TaskRunner runner_;    // last: its thread stops first
};

}  // namespace stackmapd

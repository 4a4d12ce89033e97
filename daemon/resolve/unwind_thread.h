// SPDX-License-Identifier: GPL-2.0
// --user-stacks: the unwind tables' loader (daemon/unwind/unwind_loader.h) on
// a worker of its own (daemon/sys/task_runner.h). It takes the files the
// kernel side asks for (its ring, drained whenever the worker is idle, every
// kPollEvery) and the maps of processes the resolver's worker read. Building
// a new binary's table takes up to 150 ms (libc's), 2 s (libLLVM's); on the
// resolver's worker it would hold up the capture of the next processes'
// stacks. Code whose table is not in yet is walked by frame pointers.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "daemon/symbols/user_maps.h"
#include "daemon/sys/bpf_handles.h"
#include "daemon/sys/task_runner.h"
#include "daemon/unwind/unwind_loader.h"

namespace stackmapd {

// The nice value of the resolver's slow threads (this one, the symbolizing
// one): on a loaded machine (2 CPUs, load 9 here) the capture of a 50 ms
// process's stack lost the CPU to them and came after the process's exit.
inline constexpr int kBackgroundNice = 10;

class UnwindThread {
 public:
  static constexpr std::chrono::milliseconds kPollEvery{10};

  explicit UnwindThread(std::unique_ptr<UnwindLoader> loader);
  // Destroyed: the load under way finishes, the others are dropped.
  UnwindThread(const UnwindThread&) = delete;
  UnwindThread& operator=(const UnwindThread&) = delete;

  // Queues the load of process `pid` in exec `exec_id` from a copy of its maps.
  void load(uint32_t pid, uint32_t exec_id, ProcessMaps maps);
  UnwindCounts counts() const;

 private:
  // On the worker: the files asked for so far, loaded.
  void take_wanted();

  const std::unique_ptr<UnwindLoader> loader_;  // used by the runner's tasks only
  RingBuffer wanted_;                           // the loader's ring; read by the runner only
  mutable std::mutex mu_;
  UnwindCounts counts_;  // the loader's, after its last load
  TaskRunner runner_;    // last: its thread stops first
};

}  // namespace stackmapd

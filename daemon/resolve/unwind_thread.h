// SPDX-License-Identifier: GPL-2.0
// --user-stacks: the unwind tables' loader (daemon/unwind/unwind_loader.h) on
// a thread of its own, fed by the resolver's worker. Building a new binary's
// table takes up to 150 ms (libc's); on the worker it held up the capture of
// the next processes' stacks, and a process that lives 50 ms was gone before
// its maps were read. A process whose tables are not in yet is walked by
// frame pointers meanwhile (SMC_USER_NOT_LOADED).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "daemon/symbols/user_maps.h"
#include "daemon/unwind/unwind_loader.h"

namespace stackmapd {

// The nice value of the resolver's slow threads (this one, the symbolizing
// one): on a loaded machine (2 CPUs, load 9 here) the capture of a 50 ms
// process's stack lost the CPU to them and came after the process's exit.
inline constexpr int kBackgroundNice = 10;

class UnwindThread {
 public:
  explicit UnwindThread(std::unique_ptr<UnwindLoader> loader);
  ~UnwindThread();  // waits for the load under way, drops the others
  UnwindThread(const UnwindThread&) = delete;
  UnwindThread& operator=(const UnwindThread&) = delete;

  // Queues the load of process `pid` in exec `exec_id` from a copy of its maps.
  void load(uint32_t pid, uint32_t exec_id, ProcessMaps maps);
  UnwindCounts counts() const;

 private:
  struct Job {
    uint32_t pid = 0, exec_id = 0;
    ProcessMaps maps;
  };
  void run();

  std::unique_ptr<UnwindLoader> loader_;  // used by the thread only
  mutable std::mutex mu_;                 // guards what follows
  std::condition_variable work_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  UnwindCounts counts_;  // the loader's, after its last load
  std::thread thread_;   // last: started once the rest is built
};

}  // namespace stackmapd

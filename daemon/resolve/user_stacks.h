// SPDX-License-Identifier: GPL-2.0
// --user-stacks: turns the user table's stacks into UserStacks
// (daemon/model/user_stack.h) off the loop's thread. The loop sees a user
// stack id as the table publishes it (BpfSession::drain() scans the table's
// new elements; an event still in the batches may name it much later, its
// process gone) or in an event; the first time, it reads the stack's frames
// from the table and queues them (a bounded queue: when full, the stack is dropped
// and counted). A worker (daemon/sys/task_runner.h) captures each queued
// stack at once, while its process most likely still runs, and a second one
// symbolizes the captured stacks in order (user_capture.h): a slow binary (libc's first
// names take 300 ms) delays names, never captures. The loop never waits on
// /proc or libdwfl.
//
// A snapshot names the user stacks of the events it counts: at the cut the
// loop takes mark() (every stack queued so far); the snapshot's completion,
// on whichever thread finishes it, waits for the worker to have resolved
// those and copies them, no stack queued later.
//
// The capturing worker is where per-process work that must run while the process
// lives belongs: it also hands each process's maps, at first sight, to the
// thread that loads its unwind tables (daemon/resolve/unwind_thread.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/model/user_stack.h"
#include "daemon/sys/task_runner.h"
#include "daemon/unwind/unwind_loader.h"

namespace stackmapd {

class UserCapture;
struct CapturedStack;
struct UserStackShared;  // the queue and what the worker resolved (user_stacks.cpp)
struct UserStackEpoch;   // the stacks resolved since the last clear()

struct UserStackCounts {
  uint64_t processes_evicted = 0;  // maps dropped from the cache to make room
  uint64_t binaries_evicted = 0;   // symbol tables closed to make room
  uint64_t parse_failures = 0;     // parser sandbox calls lost (a crash or a hang)
  uint64_t gone = 0;               // stacks whose process had exited: frames unresolved
  uint64_t truncated = 0;          // stacks that stop short of an entry point
  uint64_t dropped = 0;            // stacks not queued: the queue was full
  UnwindCounts unwind;             // with unwind tables: what is loaded
};

class UserStackCollector {
 public:
  static constexpr size_t kDefaultMaxQueued = 4096;
  // Reads a user stack's frames from its source; nullopt when it has none.
  using Reader = std::function<std::optional<UserStackIps>(uint32_t id)>;

  // Ids below `ids` are user stack ids; `proc` is the proc filesystem's root;
  // `unwind`: the unwind tables' loader, given to the worker (null: none).
  UserStackCollector(uint32_t ids, Reader read, std::string proc = "/proc",
                     size_t max_queued = kDefaultMaxQueued,
                     std::unique_ptr<UnwindLoader> unwind = nullptr);
  ~UserStackCollector();
  UserStackCollector(const UserStackCollector&) = delete;
  UserStackCollector& operator=(const UserStackCollector&) = delete;

  // The consumer's hot path: a known id costs one array access.
  void see(uint32_t id) {
    if (id < seen_.size() && !seen_[id]) first_sight(id);
  }

  // The loop's mark of what a snapshot cut now holds.
  struct Mark {
    std::shared_ptr<UserStackShared> shared;
    std::shared_ptr<UserStackEpoch> epoch;
    uint64_t queued = 0, dropped = 0;
  };
  Mark mark() const;
  // Waits until every stack queued before `m` is resolved (or the collector
  // is gone) and returns them.
  static UserStackSet stacks_at(const Mark& m, UserStackCounts* counts = nullptr);
  // Every stack queued so far, resolved: waits for the worker. For a
  // writer that names each event's stack as it goes (--perfetto with --trace),
  // on the loop's thread: `while_waiting` runs every kWaitStepMs of the wait
  // (the loop's scan for new stacks, so that a slow binary's first names,
  // 300 ms for libc's, hold up no capture of a short-lived process).
  static constexpr int kWaitStepMs = 10;
  const UserStackSet& resolved(const std::function<void()>& while_waiting = {});
  // Everything resolved so far (counts of this epoch's stacks).
  UserStackCounts counts() const;
  // Forgets the stacks (a reset emptied the table). Stacks still queued are
  // resolved for the snapshots that hold them.
  void clear();

 private:
  void first_sight(uint32_t id);
  // The runners' tasks: capture (the capturer's), then symbolize in queue order.
  void capture(uint32_t id, uint64_t seq, const std::shared_ptr<UserStackEpoch>& epoch,
               const UserStackIps& ips);
  void symbolize(uint32_t id, uint64_t seq, UserStackEpoch& epoch, size_t binaries,
                 CapturedStack& captured);

  Reader read_;
  std::vector<uint8_t> seen_;  // by id
  uint64_t queued_ = 0;        // stacks queued since the start, the loop's count
  uint64_t dropped_ = 0;
  std::shared_ptr<UserStackShared> shared_;
  std::shared_ptr<UserStackEpoch> epoch_;
  UserStackSet resolved_;  // resolved(): every stack queued before resolved_through_
  uint64_t resolved_through_ = 0;
  // The runners use it, and stop first.
  std::unique_ptr<UserCapture> capture_;
  TaskRunner symbolizer_;
  TaskRunner capturer_;  // last: it feeds the symbolizer, so it stops first
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The loaded BPF object of a session and the table's pins: our own skeleton
// (maps sized and settings fixed at load), or with SessionConfig::pinned_dir
// the programs and maps another loader pinned (daemon/bpf/loader_pins.h).
// Past loading, both are used through the same map and program fds.
//
// Loading changes no pins on disk: a compatible table pinned under pin_dir is
// reused (its fds), and our own maps are pinned only by pin(), when the
// session first attaches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/bpf/loader_pins.h"
#include "daemon/source/session_config.h"
#include "daemon/sys/bpf_handles.h"
#include "daemon/sys/mapping.h"
#include "daemon/unwind/unwind_maps.h"
#include "stackmapd/abi.h"

struct stackmapd_bpf;
struct bpf_program;

namespace stackmapd {

void destroy_skeleton(stackmapd_bpf* skel);
using StackmapdSkeleton = Skeleton<stackmapd_bpf, destroy_skeleton>;

class BpfObject {
 public:
  explicit BpfObject(const SessionConfig& config);  // throws Error
  BpfObject(const BpfObject&) = delete;
  BpfObject& operator=(const BpfObject&) = delete;

  uint32_t bits() const { return bits_; }
  int slots_fd() const { return slots_fd_; }
  int pool_fd() const { return pool_fd_; }
  // --user-stacks' table (-1 with --pinned); one entry each when off.
  // Pinned beside the kernel table and taken over with it when its pins
  // are of the same size (user_table_pinned()).
  int uslots_fd() const { return uslots_fd_; }
  int upool_fd() const { return upool_fd_; }
  bool user_table_pinned() const { return user_pinned_; }
  bool user_stacks() const { return config_.user_stacks; }
  // --user-stacks with unwind tables (stackmapd/abi/unwind.h): the rows
  // (SessionConfig::unwind_rows of them), the files', the per-process
  // entries, the files asked for and the ring that asks; one entry each when
  // off. The programs that fill the process entries are attached at load.
  static constexpr uint32_t kUnwindFiles = 8192;      // 320 KiB
  static constexpr uint32_t kUnwindProcesses = 2048;  // 4 MiB; the least recent go first
  bool user_unwind() const { return config_.user_unwind; }
  uint32_t unwind_rows() const { return config_.unwind_rows; }
  const UnwindMapFds& unwind_fds() const { return unwind_fds_; }
  // The per-CPU batches (smt_batch): batch_count() = possible CPUs x SMT_MAX_NEST.
  int batches_fd() const { return batches_fd_; }
  uint32_t batch_count() const { return batch_count_; }
  int ids_fd() const { return ids_fd_; }
  int tracepoint_prog() const { return tracepoint_prog_; }  // -1: our own, loaded without events
  // --pinned: the tracepoint program's copies, one per tracepoint attached
  // at once (loader_pins.h); empty for our own object, whose one program
  // tells its sources apart by cookie.
  const std::vector<int>& tracepoint_slots() const {
    static const std::vector<int> none;
    return pins_ ? pins_->tracepoint_progs : none;
  }
  int profile_prog() const { return profile_prog_; }  // -1 without --profile
  int offcpu_prog() const { return offcpu_prog_; }    // -1 without --offcpu
  // -u: the one program every uprobe link runs; null without -u.
  bpf_program* uprobe_prog() const;
  // -f through kprobes (FunctionTarget::kprobe, SessionConfig::kprobe_fallback):
  // attached once per function, its source in the cookie; null without.
  const bpf_program* kprobe_program() const { return kprobe_program_; }
  // --offcpu: the threads switched out and not yet back (smt_offcpu_start by tid).
  int offcpu_start_fd() const { return offcpu_start_fd_; }
  // --pinned: the cookies by program slot, for programs attached without
  // BPF links (stackmapd/bpfloader_abi.h); -1 for our own object.
  int cookies_fd() const { return pins_ ? pins_->cookies : -1; }
  smt_globals* globals() const { return globals_; }

  // -- CMD (follow_command): follows `pid` and every process it forks from
  // now on. Throws Error.
  void track(uint32_t pid) const;
  // Processes forked while the tracked map was full, so not followed.
  uint64_t tracked_lost() const;

  // True when the table came from pins (ours, left by an earlier daemon or
  // session, or a loader's): others may have used it, so a session takes it
  // over when it attaches. Where: the directory.
  bool pinned_table() const { return !pinned_where_.empty(); }
  const std::string& pinned_where() const { return pinned_where_; }

  // Before attaching: with --pinned the settings live in a map that the
  // session this one replaces may have written.
  void write_settings() const;
  // Pins our maps under pin_dir where they are not pinned yet, replacing
  // older pins there one by one with rename(). Throws Error, pins unchanged.
  void pin();
  // Removes the pins under pin_dir: the maps go away with their last user.
  void unpin() const;
  static const std::vector<std::string>& pin_names();

  // A copy of our object for fentry on `function`, sharing every map, loaded,
  // not attached; its events report `source`. Throws Error.
  StackmapdSkeleton load_function(const std::string& function, uint32_t source) const;

 private:
  bool load_own(const SessionConfig& config);
  void use_pins(const SessionConfig& config);

  SessionConfig config_;
  std::unique_ptr<LoaderPins> pins_;  // --pinned
  uint32_t bits_;
  uint32_t batch_count_;
  std::string pin_dir_;
  std::string pinned_where_;
  bool pinned_ = false;                // our kernel table's maps are under pin_dir_
  bool user_pinned_ = false;           // and our user table's
  StackmapdSkeleton skel_;             // our own object, without --pinned
  Mapping pinned_globals_;             // --pinned: the globals map, mmapped
  BpfLink follow_fork_, follow_exit_;  // -- CMD: keep the tracked map, from load on
  // --user-stacks with tables: the process entries' writers, from load on.
  BpfLink unwind_exec_, unwind_fork_, unwind_mmap_, unwind_mprotect_;
  UnwindMapFds unwind_fds_;
  int slots_fd_ = -1, pool_fd_ = -1, batches_fd_ = -1, ids_fd_ = -1;
  int uslots_fd_ = -1, upool_fd_ = -1;
  int tracepoint_prog_ = -1, profile_prog_ = -1, offcpu_prog_ = -1, offcpu_start_fd_ = -1;
  smt_globals* globals_ = nullptr;               // skel_'s .bss, or pinned_globals_
  const bpf_program* kprobe_program_ = nullptr;  // skel_'s
};

}  // namespace stackmapd

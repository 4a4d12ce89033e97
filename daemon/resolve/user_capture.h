// SPDX-License-Identifier: GPL-2.0
// --user-stacks, the resolver worker's two steps for one user stack:
// capture() while its process most likely still runs: its mappings
// (/proc/PID/maps, cached per process and exec) give each frame a binary and
// a file offset (a frame past the first in no code mapping ends the stack:
// a frame-pointer walk's read of data, never a frame), and each binary the symbolizer has not
// opened yet is opened now, so that symbolize() needs nothing of the process: a process that exits
// between the two steps keeps its symbols. symbolize() then names the frames with libdwfl
// (user_symbolizer.h), the slow step. A frame in anonymous executable memory
// (JIT code) is named at capture from the process's /tmp/perf-PID.map
// (perf_map.h), read at the first such frame of the process.
//
// Memory is bounded: kMaxProcesses processes' maps, UserSymbolizer's open
// binaries (each cap counted) and kMaxKnownNames frames' names. Two threads
// use an instance: one capture()s, one symbolize()s (a new binary's first
// names take up to 300 ms, libc's with its debug file: captures must not
// wait for them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/model/user_stack.h"
#include "daemon/resolve/sandboxed_parser.h"
#include "daemon/resolve/unwind_thread.h"
#include "daemon/symbols/perf_map.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/symbols/user_symbolizer.h"
#include "daemon/sys/unique_fd.h"
#include "daemon/unwind/unwind_loader.h"

namespace stackmapd {

// A user stack between the two steps: frames with their binary and file
// offset, no symbols yet.
struct CapturedStack {
  UserStack stack;
  bool gone = false;  // the process had exited: frames unresolved
  // By binary: where it was mapped, and the file held open since capture()
  // when the symbolizer had not opened it yet (shared by the stacks
  // captured meanwhile: one descriptor per binary).
  struct File {
    std::string open_path;
    std::shared_ptr<const UniqueFd> fd;
  };
  std::map<int32_t, File> files;
};

class UserCapture {
 public:
  static constexpr size_t kMaxProcesses = 256;
  // Binaries held open for the stacks captured ahead of symbolize(); past
  // it, a new binary is opened by path when symbolized, if still there.
  static constexpr size_t kMaxOpenFiles = 128;
  // The JIT names held for all processes (each map at most PerfMap::kMaxBytes).
  static constexpr size_t kMaxPerfMapBytes = 256u << 20;
  // Frames' names kept by (binary, offset), about 200 bytes each: every
  // new process of a binary names the same frames.
  static constexpr size_t kMaxKnownNames = 16384;

  // `proc` is the proc filesystem's root (tests pass another); `unwind`, when
  // given, gets each process's maps as they are read (its unwind tables), on
  // a thread of its own (unwind_thread.h).
  explicit UserCapture(std::string proc = "/proc", std::unique_ptr<UnwindLoader> unwind = nullptr);

  CapturedStack capture(const UserStackIps& ips);
  // Fills the frames' symbols and whether the stack is whole.
  UserStack symbolize(CapturedStack&& c);
  // On symbolize()'s thread, now and then: frees what symbolizing holds
  // beyond the names found (UserSymbolizer::close_idle).
  void close_idle() { names_.close_idle(); }

  // The binaries frames named so far, by index (UserFrame::binary), from `from` on.
  std::vector<UserBinary> binaries(size_t from) const;
  size_t binary_count() const;
  uint64_t processes_evicted() const;
  uint64_t binaries_evicted() const { return names_.let_go(); }
  uint64_t parse_failures() const { return ids_.failures() + names_.failures(); }
  // Frames named from kMaxKnownNames, without asking the parser.
  uint64_t names_reused() const { return names_reused_; }
  UnwindCounts unwind_counts() const { return unwind_ ? unwind_->counts() : UnwindCounts{}; }

 private:
  // `read`: set when the maps were read now (their unwind tables are due);
  // `opened`: the files reading them opened.
  const ProcessMaps* maps_of(uint32_t pid, uint32_t exec_id, bool reread, bool& read,
                             ProcessMaps::OpenedFiles& opened);
  int32_t binary_index(const MappedFile& f);
  // `f` held open for symbolize(): the descriptor reading the maps opened, else a new one.
  std::shared_ptr<const UniqueFd> open_file(int32_t binary, const MappedFile& f,
                                            const ProcessMaps::OpenedFiles& opened);
  // One warning line, the first time a process's maps or binary are not ours
  // to read (EACCES, EPERM): processes of other users without the capabilities.
  void say_if_denied(const std::string& path, int error);
  const std::string& key_of(int32_t binary) const;
  // The name of JIT code at `addr` in the process cached under `key`;
  // `reread`: whether this stack read its perf map again already.
  std::optional<std::string> jit_name(uint64_t key, uint32_t pid, uint64_t addr, bool is_return,
                                      bool& reread);
  // The process's perf map; a refused one is said (the first time) and none.
  std::optional<PerfMap> read_perf_map(uint32_t pid);
  using PerfMaps = std::map<uint64_t, std::optional<PerfMap>>;
  PerfMaps::iterator drop_perf_map(PerfMaps::iterator it);

  std::string proc_;
  std::unique_ptr<UnwindThread> unwind_;  // null without unwind tables
  SandboxedParser ids_{"build ids"};      // capture()'s alone
  SandboxedParser names_{"symbols"};      // symbolize()'s alone
  // A frame's names by (symbolizer key, file offset, is a return address);
  // symbolize()'s alone, emptied when full.
  using NameKey = std::tuple<std::string, uint64_t, bool>;
  std::map<NameKey, UserSymbolizer::Result> known_names_;
  std::atomic<uint64_t> names_reused_ = 0;
  mutable std::mutex mu_;  // guards what follows
  // The symbolizer's keys as symbolize() last saw them: capture() holds a
  // binary open for it only when it is not there.
  std::set<std::string> held_;
  // (pid, exec id) -> maps, most recently used first: an exec is a new key.
  std::list<std::pair<uint64_t, ProcessMaps>> maps_;
  std::vector<UserBinary> binaries_;
  std::map<std::pair<std::string, std::string>, int32_t> binary_ids_;  // (path, build id)
  std::map<int32_t, std::shared_ptr<const UniqueFd>> open_files_;      // by binary
  // (pid, exec id) -> its perf map, for the processes in maps_; nullopt: it has none.
  PerfMaps perf_maps_;
  size_t perf_map_bytes_ = 0;  // what perf_maps_ hold, at most about kMaxPerfMapBytes
  uint64_t processes_evicted_ = 0;
  bool said_denied_ = false;            // say_if_denied's one line said
  bool said_perf_map_refused_ = false;  // read_perf_map's
};

// The outermost frame is where a process or thread starts: the stack is whole.
bool reaches_entry_point(const UserStack& s);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
/*
 * One tracing session on the tracefs path, for kernels with the ftrace
 * stackmap series (packaging/kernel/) and no usable BPF. Data flow:
 *   (1) the kernel, on every enabled event of our own instance
 *       (instances/stackmapd): capture the stack, find or insert it in the
 *       instance's stack map, record `<stack_id N>` after the event;
 *   (2) drain(), on the daemon's one thread: read the instance's trace_pipe
 *       (non-blocking, after a bounded poll), count each `<stack_id N>` and
 *       each full-stack fallback (`<stack trace>`);
 *   (3) snapshot(): read stack_map_bin (FSMB v2, daemon/model/fsmb.h) and
 *       stack_map_stat, and turn them into the Snapshot every exporter takes
 *       (daemon/export/exports.h), so both paths write the same exports.
 * Lifecycle: the constructor creates and configures the instance; detach()
 * stops new events; the destructor disables everything and removes the
 * instance.
 *
 * Stack ids are slot indexes of the instance's map, as on the BPF path.
 * ref_count comes from the kernel's map (exact, saturating at UINT32_MAX);
 * the ids read from trace_pipe are a cross-check: an id that does not
 * resolve in stack_map_bin counts as a bad record.
 */
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/model/fsmb.h"
#include "daemon/model/snapshot.h"
#include "daemon/source/sources.h"

namespace stackmapd {

// stack_map_stat as the kernel series writes it: the RFC's five lines
// (entries, table_size, hits with first inserts included, drops, and
// hit_rate = hits * 100 / (hits + drops) once there is an event), then
// truncated, inserts, and the drop causes under the names the BPF path's
// stat export uses (drop_pool_full, drop_probe_limit, drop_busy). Lines this
// reader does not know are ignored; the RFC's kernel wrote only the five.
struct TracefsStat {
  uint32_t entries = 0;
  uint32_t pool_size = 0;
  uint32_t table_size = 0;
  uint32_t bits = 0;
  uint64_t hits = 0;
  uint64_t drops = 0;
  uint64_t truncated = 0;  // hits on a stack cut to its innermost 64 frames
  uint64_t inserts = 0;
  uint64_t drop_pool_full = 0;
  uint64_t drop_probe_limit = 0;
  uint64_t drop_busy = 0;
  uint64_t resets = 0;
  bool has_breakdown = false;  // the drop_* and inserts lines were there
};

// Throws Error when the `entries:` line is missing or malformed.
TracefsStat parse_stack_map_stat(std::string_view text);

// The id in a trace line such as "  sh-42 [001] d..1.  7.5: <stack_id 1234>".
bool parse_stack_id_line(std::string_view line, uint32_t* id);

// Splits trace_pipe's byte stream into lines (a read may end mid-line) and
// counts what it finds.
class TracePipeParser {
 public:
  // Returns the number of `<stack_id N>` lines completed by `chunk`.
  size_t feed(std::string_view chunk);
  const std::map<uint32_t, uint64_t>& id_counts() const { return ids_; }
  uint64_t ids() const { return nr_ids_; }
  uint64_t full_stacks() const { return full_stacks_; }

 private:
  size_t line(std::string_view l);

  std::string partial_;
  std::map<uint32_t, uint64_t> ids_;
  uint64_t nr_ids_ = 0;
  uint64_t full_stacks_ = 0;
};

// The Snapshot of an instance: frames and ref counts from the map, counters
// from the stat file, cross-checked against the ids read from trace_pipe.
Snapshot make_tracefs_snapshot(const FsmbFile& map, const TracefsStat& stat,
                               const TracePipeParser& pipe);

class TracefsSession {
 public:
  // `root` is the tracefs mount (found when empty), `instance` the name of
  // the instance the session owns, `filter` an ftrace event filter written to
  // each event's filter file (none when empty). Throws Error naming the fix
  // when tracefs, the stackmap series or an event is missing, the kernel
  // rejects the filter, or the instance is in use.
  explicit TracefsSession(const std::vector<Tracepoint>& events, std::string root = "",
                          std::string instance = "stackmapd", const std::string& filter = "");
  ~TracefsSession();
  TracefsSession(const TracefsSession&) = delete;
  TracefsSession& operator=(const TracefsSession&) = delete;

  // Stops new events; what is buffered can still be drained.
  void detach();
  // Waits up to timeout_ms for trace data, then reads all that is pending.
  // Returns the number of stack ids read.
  size_t drain(int timeout_ms);
  Snapshot snapshot() const;

  const TracePipeParser& pipe() const { return pipe_; }
  const std::string& dir() const { return dir_; }

  // The tracefs mount point, or "" when neither usual place has one.
  static std::string find_root();

 private:
  void write(const std::string& rel, std::string_view value) const;
  void write_filter(const Tracepoint& tp, const std::string& filter) const;
  std::string read(const std::string& rel) const;
  void teardown() noexcept;

  std::vector<Tracepoint> events_;
  std::string dir_;
  int pipe_fd_ = -1;
  bool attached_ = false;
  TracePipeParser pipe_;
};

// True when tracefs is mounted and the kernel has the stackmap series
// (options/stackmap), for `--backend auto`.
bool tracefs_stackmap_available();

}  // namespace stackmapd

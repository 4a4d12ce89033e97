// SPDX-License-Identifier: GPL-2.0
// --trace: each event as ftrace prints it (EventPrinter), then its stack as
// an entry of its own, as the RFC's kernel path prints it, e.g.
//   wl-1234    [001] .....  5123.456789: kmem_cache_alloc: call_site=... ptr=...
//   wl-1234    [001] .....  5123.456789: <stack_id 31436>
// A <stack_id N> resolves against the stack_map export of the same session.
// The flags column is always "....." (the BPF side cannot see irqs-off,
// need-resched or the preempt count as ftrace does) and the timestamp is
// CLOCK_MONOTONIC (bpf_ktime_get_ns), not ftrace's default `local` clock.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "daemon/export/event_printer.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class TraceWriter {
 public:
  // `path` "-" writes to stdout; a file is created (or truncated) at once so
  // that a bad path fails before tracing starts.
  explicit TraceWriter(const std::string& path);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Names for smt_trace_record.source, once the session has attached; the
  // format files of those that are tracepoints are read from `events_dir`
  // (empty: none, events are printed by name only).
  void set_sources(std::vector<std::string> sources, const std::string& events_dir = "");
  void write(const smt_trace_record& r, const std::string& comm);
  // Hands what is written so far to the file, so that a reader sees each
  // drain's events then (cheap when nothing is new).
  void flush();
  void finish();  // flushes; throws Error if anything failed to reach the file
  uint64_t lines() const { return lines_; }  // events written (two lines each)

  // The context both lines of an event start with: "comm-tid [cpu] ..... secs: ".
  static std::string prefix(const smt_trace_record& r, const std::string& comm);

 private:
  std::string path_;
  FILE* out_;
  std::vector<std::string> sources_;
  std::unique_ptr<EventPrinter> printer_;
  uint64_t lines_ = 0;
  uint64_t flushed_ = 0;  // lines_ at the last flush()
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// --trace: one line per event in ftrace's layout, the stack replaced by its
// id as the RFC prints it, e.g.
//   wl-1234    [001]  5123.456789: kmem:kmem_cache_alloc <stack_id 31436>
// A <stack_id N> resolves against the stack_map export of the same session.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

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

  // Names for smt_trace_record.source, once the session has attached.
  void set_sources(std::vector<std::string> sources) { sources_ = std::move(sources); }
  void write(const smt_trace_record& r, const std::string& comm);
  void finish();  // flushes; throws Error if anything failed to reach the file
  uint64_t lines() const { return lines_; }

  static std::string format(const smt_trace_record& r, const std::string& comm,
                            const std::string& source);

 private:
  std::string path_;
  FILE* out_;
  std::vector<std::string> sources_;
  uint64_t lines_ = 0;
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The daemon's metrics in Prometheus' text format (version 0.0.4), for
// GET /metrics and --metrics-textfile (node-exporter's textfile collector).
// Labels come from bounded sets only: drop reasons, the configured event
// sources, program roles. Never a stack id, pid or key: a fleet's store keeps
// one series per label set.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/model/table_stats.h"
#include "daemon/sys/event_loop.h"

namespace stackmapd::http {

struct ProgramStats {
  std::string role;  // "tracepoint", "offcpu", ...
  uint64_t run_time_ns = 0, run_cnt = 0;
};

struct ProcessStats {
  double cpu_seconds = 0;
  uint64_t resident_bytes = 0, virtual_bytes = 0;
  uint64_t open_fds = 0, max_fds = 0;
  double start_time_seconds = 0;  // since the epoch
};

// The OpenTelemetry push's counters (daemon/run/otlp_sender.h), since the daemon started.
struct OtlpCounters {
  // Attempts by result: ok, server_error (5xx), throttled (429), rejected
  // (other 4xx: not retried), timeout, network_error; given_up: requests
  // dropped after their last attempt.
  std::vector<std::pair<std::string, uint64_t>> requests;
  uint64_t queue_dropped = 0;  // requests dropped from the full queue, oldest first
  uint64_t sent_bytes = 0;     // bodies a receiver accepted
  uint64_t queued = 0;         // requests waiting now
};

struct MetricsInput {
  TableStats stats;
  std::vector<std::pair<std::string, uint64_t>> source_events;  // recorded, by source name
  uint64_t ring_used_bytes = 0, ring_size_bytes = 0;
  bool bpf_stats_enabled = false;  // kernel.bpf_stats_enabled: programs' run time is counted
  std::vector<ProgramStats> programs;
  std::optional<OtlpCounters> otlp;  // none when otlp-endpoint is unset
  std::optional<LoopTurns> loop;     // the daemon's event loop (none: a test's input)
  // None in the textfile: node-exporter exports its own process_* series,
  // and drops a textfile's family of the same name (an error in its log).
  std::optional<ProcessStats> process;
};

std::string format_metrics(const MetricsInput& in);

// This process' figures from /proc/self (process_* metrics, as every
// Prometheus client library names them).
ProcessStats read_process_stats();
bool read_bpf_stats_enabled();
// run_time_ns and run_cnt of a loaded program; nullopt if the kernel says nothing.
std::optional<ProgramStats> read_program_stats(const std::string& role, int prog_fd);

}  // namespace stackmapd::http

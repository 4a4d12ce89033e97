// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/metrics.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "daemon/export/utf8_text.h"
#include "daemon/sys/build_info.h"
#include "daemon/sys/file_io.h"

namespace stackmapd::http {

namespace {

// Label values are UTF-8 escaped as the format asks: backslash, quote, newline.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : utf8_text(v)) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

class Writer {
 public:
  void family(const char* name, const char* type, const char* help) {
    name_ = name;
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(uint64_t v, const std::string& labels = "") {
    sample_text(std::to_string(v), labels);
  }
  void sample(double v, const std::string& labels = "") { sample_text(number(v), labels); }
  // One family with one sample.
  void one(const char* name, const char* type, const char* help, uint64_t v) {
    family(name, type, help);
    sample(v);
  }
  // A histogram's lines: name_bucket{le="..."}, name_sum, name_count.
  void bucket(uint64_t v, const std::string& le) {
    out_ += name_ + "_bucket{le=\"" + le + "\"} " + std::to_string(v) + "\n";
  }
  void suffixed(const char* suffix, const std::string& v) {
    out_ += name_ + suffix + " " + v + "\n";
  }
  std::string take() { return std::move(out_); }

 private:
  void sample_text(const std::string& v, const std::string& labels) {
    out_ += name_ + (labels.empty() ? "" : "{" + labels + "}") + " " + v + "\n";
  }
  std::string out_, name_;
};

std::string label(const char* key, const std::string& value) {
  return std::string(key) + "=\"" + label_value(value) + "\"";
}

// The drop counters' reasons, as stack_map_stat names them without "drop_".
const char* drop_reason(int c) {
  switch (c) {
    case SMC_DROP_POOL_FULL: return "pool_full";
    case SMC_DROP_PROBE_LIMIT: return "probe_limit";
    case SMC_DROP_BUSY: return "busy";
    case SMC_DROP_STACK_ERROR: return "stack_error";
    case SMC_DROP_RINGBUF_FULL: return "ringbuf_full";
    case SMC_DROP_RESETTING: return "resetting";
    case SMC_DROP_NESTED: return "nested";
    case SMC_DROP_OFFCPU_FULL: return "offcpu_full";
    case SMC_DROP_OFFCPU_UNENDED: return "offcpu_unended";
  }
  return "unknown";
}

double ratio(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

std::string format_metrics(const MetricsInput& in) {
  const TableStats& st = in.stats;
  Writer w;
  // Prometheus' convention for what runs: a constant 1, the build in its labels.
  w.family("stackmapd_build_info", "gauge", "The daemon's version and source revision (always 1).");
  w.sample(uint64_t{1},
           label("version", build_version()) + "," + label("revision", build_revision()));
  w.one("stackmapd_events_total", "counter", "Events seen by the BPF programs since they loaded.",
        st.events_total);
  w.family("stackmapd_source_events_total", "counter",
           "Events recorded (stack counted) per event source, since the session started.");
  for (const auto& [source, n] : in.source_events) w.sample(n, label("source", source));
  w.one("stackmapd_hits_total", "counter",
        "Events whose stack was recorded, this epoch (since the last reset).", st.get(SMC_HITS));
  w.one("stackmapd_inserts_total", "counter", "Stacks stored for the first time, this epoch.",
        st.get(SMC_INSERTS));
  w.family("stackmapd_drops_total", "counter",
           "Events whose stack was not recorded, by reason, this epoch.");
  for (int c = SMC_FIRST_DROP; c <= SMC_LAST_DROP; ++c)
    if (c != SMC_DROP_NO_KERNEL_STACK) w.sample(st.counters[c], label("reason", drop_reason(c)));
  w.one("stackmapd_user_mode_samples_total", "counter",
        "--profile samples taken in user mode, no kernel stack to record (not drops), this epoch.",
        st.user_mode());
  w.one("stackmapd_truncated_stacks_total", "counter",
        "Recorded stacks deeper than 64 frames, their innermost frames kept, this epoch.",
        st.get(SMC_TRUNCATED));
  w.one("stackmapd_unique_stacks", "gauge", "Unique stacks in the table (pool elements in use).",
        st.entries);
  w.one("stackmapd_pool_size", "gauge", "Unique stacks the element pool holds at most.",
        st.pool_size);
  w.family("stackmapd_pool_fill_ratio", "gauge", "Share of the element pool in use, 0 to 1.");
  w.sample(ratio(st.entries, st.pool_size));
  w.one("stackmapd_table_slots", "gauge", "Slots of the hash table.", st.table_size);
  w.one("stackmapd_resets_total", "counter", "Table resets since the daemon started.", st.resets);
  w.family("stackmapd_verify_total", "counter",
           "--verify samples checked against the stored stack, by result.");
  w.sample(st.verify_ok, label("result", "ok"));
  w.sample(st.verify_mismatch, label("result", "mismatch"));
  w.one("stackmapd_stale_records_total", "counter",
        "Ring buffer records of an earlier epoch (0 unless the reset protocol broke).",
        st.stale_records);
  w.one("stackmapd_bad_records_total", "counter",
        "Ring buffer records the daemon could not resolve.", st.bad_records);
  w.one("stackmapd_key_pairs", "gauge", "Distinct (stack, --by key) pairs held.", st.key_pairs);
  w.one("stackmapd_key_pairs_max", "gauge", "Cap on distinct (stack, key) pairs (--max-keys).",
        st.max_key_pairs);
  w.one("stackmapd_key_overflow_total", "counter",
        "Events counted to a stack's other entry because of the key cap, this epoch.",
        st.key_overflow);
  // Only once it happened, as below.
  if (st.key_pairs_folded)
    w.one("stackmapd_key_pairs_folded_total", "counter",
          "(stack, key) pairs of exited processes folded into a coarser key, this epoch.",
          st.key_pairs_folded);
  // Only once it happened: the families are those of earlier versions until then.
  if (st.user_stacks_dropped)
    w.one("stackmapd_user_stacks_dropped_total", "counter",
          "User stacks left unresolved because the resolver's queue was full, this epoch.",
          st.user_stacks_dropped);
  w.one("stackmapd_ringbuf_used_bytes", "gauge", "Bytes in the ids ring buffer not consumed yet.",
        in.ring_used_bytes);
  w.one("stackmapd_ringbuf_size_bytes", "gauge", "Size of the ids ring buffer.",
        in.ring_size_bytes);
  w.family("stackmapd_ringbuf_fill_ratio", "gauge", "Share of the ids ring buffer in use, 0 to 1.");
  w.sample(ratio(in.ring_used_bytes, in.ring_size_bytes));
  w.one("stackmapd_bpf_stats_enabled", "gauge",
        "1 when kernel.bpf_stats_enabled is set, so that the programs' run time is counted.",
        in.bpf_stats_enabled ? 1 : 0);
  w.family("stackmapd_bpf_program_run_seconds_total", "counter",
           "Time the BPF programs ran, by role, while kernel.bpf_stats_enabled was set.");
  for (const auto& p : in.programs) w.sample(p.run_time_ns / 1e9, label("program", p.role));
  w.family("stackmapd_bpf_program_runs_total", "counter",
           "Runs of the BPF programs, by role, while kernel.bpf_stats_enabled was set.");
  for (const auto& p : in.programs) w.sample(p.run_cnt, label("program", p.role));
  if (in.otlp) {
    w.family("stackmapd_otlp_requests_total", "counter",
             "OpenTelemetry profile push attempts, by result.");
    for (const auto& [result, n] : in.otlp->requests) w.sample(n, label("result", result));
    w.one("stackmapd_otlp_queue_dropped_total", "counter",
          "OpenTelemetry profile requests dropped, oldest first, because the queue was full.",
          in.otlp->queue_dropped);
    w.one("stackmapd_otlp_sent_bytes_total", "counter",
          "Bytes of OpenTelemetry profile requests a receiver accepted.", in.otlp->sent_bytes);
    w.one("stackmapd_otlp_queued_requests", "gauge",
          "OpenTelemetry profile requests waiting to be sent.", in.otlp->queued);
  }
  if (in.loop) {
    w.family("stackmapd_loop_turn_seconds", "histogram",
             "Time each turn of the daemon's event loop held it: draining the ring, answering "
             "clients, timers (finishing snapshots and writing files are the workers').");
    uint64_t below = 0;
    for (size_t b = 0; b < LoopTurns::kBuckets; ++b) {
      below += in.loop->turns[b];
      char le[16] = "+Inf";
      if (b + 1 < LoopTurns::kBuckets) snprintf(le, sizeof(le), "%g", LoopTurns::kBounds[b]);
      w.bucket(below, le);
    }
    w.suffixed("_sum", number(in.loop->seconds));
    w.suffixed("_count", std::to_string(below));
    w.family("stackmapd_loop_longest_turn_seconds", "gauge",
             "The longest turn of the daemon's event loop since it started.");
    w.sample(in.loop->longest);
  }

  if (in.process) {
    const ProcessStats& ps = *in.process;
    w.family("process_cpu_seconds_total", "counter", "Total user and system CPU time in seconds.");
    w.sample(ps.cpu_seconds);
    w.one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
          ps.resident_bytes);
    w.one("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
          ps.virtual_bytes);
    w.one("process_open_fds", "gauge", "Number of open file descriptors.", ps.open_fds);
    w.one("process_max_fds", "gauge", "Maximum number of open file descriptors.", ps.max_fds);
    w.family("process_start_time_seconds", "gauge",
             "Start time of the process since unix epoch in seconds.");
    w.sample(ps.start_time_seconds);
  }
  return w.take();
}

ProcessStats read_process_stats() {
  ProcessStats ps;
  // statm's second field: resident pages (qemu-user, which runs the arm64
  // tests, fakes /proc/self/stat with rss 0 but passes statm through).
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  if (statm >> size_pages >> resident_pages)
    ps.resident_bytes = resident_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const std::string stat = read_file("/proc/self/stat").value_or("");
  // The fields after the command name, which may hold spaces and ')'.
  size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string s; fields >> s;) f.push_back(s);
    // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
    if (f.size() > 21) {
      const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
      ps.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;
      ps.virtual_bytes = std::stoull(f[20]);
      std::ifstream proc_stat("/proc/stat");
      for (std::string key; proc_stat >> key;) {
        if (key == "btime") {
          double btime = 0;
          proc_stat >> btime;
          ps.start_time_seconds = btime + std::stod(f[19]) / tick;
          break;
        }
      }
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++ps.open_fds;
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) ps.max_fds = rl.rlim_cur;
  return ps;
}

bool read_bpf_stats_enabled() {
  std::ifstream f("/proc/sys/kernel/bpf_stats_enabled");
  int v = 0;
  return f >> v && v != 0;
}

std::optional<ProgramStats> read_program_stats(const std::string& role, int prog_fd) {
  bpf_prog_info info = {};
  __u32 len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return std::nullopt;
  return ProgramStats{role, info.run_time_ns, info.run_cnt};
}

}  // namespace stackmapd::http

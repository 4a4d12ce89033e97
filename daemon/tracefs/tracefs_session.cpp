// SPDX-License-Identifier: GPL-2.0
#include "daemon/tracefs/tracefs_session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

template <typename T>
bool parse_uint(std::string_view s, T* out) {
  s = trim(s);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string errno_text(int err) { return std::strerror(err); }

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

TracefsStat parse_stack_map_stat(std::string_view text) {
  TracefsStat st;
  bool have_entries = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = trim(line.substr(0, colon));
    std::string_view val = trim(line.substr(colon + 1));
    if (key == "entries") {
      // "2500 / 16384"
      size_t slash = val.find('/');
      if (slash == std::string_view::npos || !parse_uint(val.substr(0, slash), &st.entries) ||
          !parse_uint(val.substr(slash + 1), &st.pool_size))
        throw Error("stack_map_stat: malformed line '" + std::string(line) +
                    "' (expected 'entries: N / MAX')");
      have_entries = true;
      continue;
    }
    if (key == "hit_rate") continue;  // derived; recomputed from the counters
    uint64_t v = 0;
    if (!parse_uint(val, &v)) continue;
    if (key == "table_size") st.table_size = static_cast<uint32_t>(v);
    else if (key == "bits") st.bits = static_cast<uint32_t>(v);
    else if (key == "hits") st.hits = v;
    else if (key == "drops") st.drops = v;
    else if (key == "truncated") st.truncated = v;
    else if (key == "inserts") st.inserts = v, st.has_breakdown = true;
    else if (key == "drop_pool_full") st.drop_pool_full = v;
    else if (key == "drop_probe_limit") st.drop_probe_limit = v;
    else if (key == "drop_busy") st.drop_busy = v;
    else if (key == "resets") st.resets = v;
  }
  if (!have_entries)
    throw Error("stack_map_stat has no 'entries:' line: not an ftrace stackmap stat file");
  if (!st.bits && st.pool_size) {
    // The RFC's kernel does not print bits: derive it from the pool size.
    while ((1u << st.bits) < st.pool_size && st.bits < 31) ++st.bits;
  }
  if (!st.table_size && st.pool_size) st.table_size = st.pool_size * 2;
  return st;
}

bool parse_stack_id_line(std::string_view line, uint32_t* id) {
  static constexpr std::string_view kTag = "<stack_id ";
  size_t at = line.find(kTag);
  if (at == std::string_view::npos) return false;
  std::string_view rest = line.substr(at + kTag.size());
  size_t end = rest.find('>');
  if (end == std::string_view::npos) return false;
  return parse_uint(rest.substr(0, end), id);
}

size_t TracePipeParser::line(std::string_view l) {
  uint32_t id;
  if (parse_stack_id_line(l, &id)) {
    ++ids_[id];
    ++nr_ids_;
    return 1;
  }
  if (l.find("<stack trace>") != std::string_view::npos) ++full_stacks_;
  return 0;
}

size_t TracePipeParser::feed(std::string_view chunk) {
  size_t n = 0;
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(chunk);
      // A line longer than any trace line is garbage: do not grow forever.
      if (partial_.size() > 65536) partial_.clear();
      break;
    }
    if (partial_.empty()) {
      n += line(chunk.substr(0, nl));
    } else {
      partial_.append(chunk.substr(0, nl));
      n += line(partial_);
      partial_.clear();
    }
    chunk.remove_prefix(nl + 1);
  }
  return n;
}

Snapshot make_tracefs_snapshot(const FsmbFile& map, const TracefsStat& stat,
                               const TracePipeParser& pipe) {
  Snapshot snap;
  snap.bits = stat.bits;
  snap.hash_seed = 0;  // the kernel keeps its seed to itself
  snap.stacks = map.stacks;

  TableStats& ts = snap.stats;
  ts.entries = stat.entries;
  ts.pool_size = stat.pool_size;
  ts.table_size = stat.table_size;
  ts.resets = stat.resets;
  ts.counters[SMC_HITS] = stat.hits;
  if (stat.has_breakdown) {
    ts.counters[SMC_INSERTS] = stat.inserts;
    ts.counters[SMC_DROP_POOL_FULL] = stat.drop_pool_full;
    ts.counters[SMC_DROP_PROBE_LIMIT] = stat.drop_probe_limit;
    ts.counters[SMC_DROP_BUSY] = stat.drop_busy;
    // Deep stacks are truncated, not dropped, on both paths.
    ts.counters[SMC_TRUNCATED] = stat.truncated;
  } else {
    // The RFC's kernel: one drop counter, and first inserts among the hits.
    ts.counters[SMC_INSERTS] = stat.entries;
    ts.counters[SMC_DROP_POOL_FULL] = stat.drops;
  }
  ts.events_total = pipe.ids() + pipe.full_stacks();

  // Every id read from the pipe must resolve in the map.
  std::vector<bool> known;
  for (const auto& s : snap.stacks) {
    if (s.stack_id >= known.size()) known.resize(s.stack_id + 1, false);
    known[s.stack_id] = true;
  }
  for (const auto& [id, count] : pipe.id_counts())
    if (id >= known.size() || !known[id]) ts.bad_records += count;
  intern_callstacks(snap);
  return snap;
}

std::string TracefsSession::find_root() {
  for (const char* p : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
    if (exists(std::string(p) + "/instances")) return p;
  return "";
}

TracefsSession::TracefsSession(const std::vector<Tracepoint>& events, std::string root,
                               std::string instance, const std::string& filter)
    : events_(events) {
  if (root.empty()) root = find_root();
  if (root.empty())
    throw Error("tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing (as root)");
  if (!exists(root + "/options/stackmap"))
    throw Error("this kernel has no ftrace stackmap (" + root +
                "/options/stackmap is missing): boot a kernel with the series in "
                "packaging/kernel/ (CONFIG_FTRACE_STACKMAP=y), or use the BPF backend");
  if (events_.empty()) throw Error("no tracepoint to trace: name at least one CATEGORY:NAME");
  for (const auto& tp : events_)
    if (!exists(root + "/events/" + tp.category + "/" + tp.name + "/enable"))
      throw Error("no such tracepoint " + tp.str() + " (not in " + root +
                  "/events): see available_events");

  dir_ = root + "/instances/" + instance;
  if (::mkdir(dir_.c_str(), 0750) != 0) {
    int err = errno;
    // A stale instance left by a crash: remove it, unless somebody uses it.
    if (err != EEXIST || ::rmdir(dir_.c_str()) != 0 || ::mkdir(dir_.c_str(), 0750) != 0)
      throw Error("cannot create tracefs instance " + dir_ + ": " +
                  errno_text(err == EEXIST ? errno : err) +
                  (err == EEXIST ? " (another stackmapd running? stop it or rmdir the instance)"
                                 : " (run as root)"));
  }
  try {
    write("tracing_on", "0");
    write("options/stackmap", "1");
    write("options/stacktrace", "1");
    if (!filter.empty())
      for (const auto& tp : events_) write_filter(tp, filter);
    for (const auto& tp : events_) write("events/" + tp.category + "/" + tp.name + "/enable", "1");
    pipe_fd_ = ::open((dir_ + "/trace_pipe").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (pipe_fd_ < 0) throw Error("cannot open " + dir_ + "/trace_pipe: " + errno_text(errno));
    write("tracing_on", "1");
    attached_ = true;
  } catch (...) {
    teardown();
    throw;
  }
}

TracefsSession::~TracefsSession() { teardown(); }

void TracefsSession::write(const std::string& rel, std::string_view value) const {
  std::string path = dir_ + "/" + rel;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + errno_text(errno));
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size()))
    throw Error("cannot write '" + std::string(value) + "' to " + path + ": " +
                errno_text(n < 0 ? err : EIO) +
                (err == ENOMEM
                     ? " (not enough memory for the stack map: lower ftrace_stackmap.bits)"
                     : ""));
}

void TracefsSession::write_filter(const Tracepoint& tp, const std::string& filter) const {
  const std::string rel = "events/" + tp.category + "/" + tp.name + "/filter";
  try {
    write(rel, filter);
  } catch (const Error&) {
    // The kernel keeps the expression, a caret line and "parse_error: why".
    const std::string text = read(rel);
    const size_t caret_line = text.find('\n') + 1, caret = text.find('^', caret_line);
    const size_t why = text.find("parse_error: ");
    const std::string reason = why == std::string::npos
                                   ? "rejected"
                                   : text.substr(why + 13, text.find('\n', why) - why - 13);
    throw Error(
        "-e " + tp.str() + " --filter: the kernel says: " + reason +
        (caret == std::string::npos ? "" : " at column " + std::to_string(caret - caret_line + 1)) +
        ": " + filter);
  }
}

std::string TracefsSession::read(const std::string& rel) const {
  std::optional<std::string> out = read_file(dir_ + "/" + rel);
  if (!out) throw Error("cannot read " + dir_ + "/" + rel + ": " + errno_text(errno));
  return std::move(*out);
}

void TracefsSession::detach() {
  if (!attached_) return;
  attached_ = false;
  for (const auto& tp : events_) write("events/" + tp.category + "/" + tp.name + "/enable", "0");
  write("tracing_on", "0");
}

size_t TracefsSession::drain(int timeout_ms) {
  if (pipe_fd_ < 0) return 0;
  struct pollfd pfd = {pipe_fd_, POLLIN, 0};
  // trace_pipe wakes pollers only past buffer_percent: the timeout bounds
  // the wait, and the non-blocking reads below take whatever is there.
  if (timeout_ms > 0 && ::poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
    throw Error("poll on " + dir_ + "/trace_pipe: " + errno_text(errno));
  size_t n = 0;
  char buf[65536];
  for (;;) {
    ssize_t got = ::read(pipe_fd_, buf, sizeof(buf));
    if (got > 0) {
      n += pipe_.feed(std::string_view(buf, static_cast<size_t>(got)));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got == 0 || errno == EAGAIN) break;
    throw Error("read " + dir_ + "/trace_pipe: " + errno_text(errno));
  }
  return n;
}

Snapshot TracefsSession::snapshot() const {
  FsmbFile map = fsmb_decode(read("stack_map_bin"), dir_ + "/stack_map_bin");
  // The kernel writes it whole: damage here is a failed read, not a map to export.
  if (!map.damage.empty()) throw Error(map.damage);
  TracefsStat stat = parse_stack_map_stat(read("stack_map_stat"));
  return make_tracefs_snapshot(map, stat, pipe_);
}

void TracefsSession::teardown() noexcept {
  if (dir_.empty()) return;
  try {
    detach();
  } catch (...) {
  }
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
  pipe_fd_ = -1;
  for (const char* opt : {"options/stacktrace", "options/stackmap"}) {
    try {
      write(opt, "0");
    } catch (...) {
    }
  }
  // Removing the instance frees its buffers and its stack map.
  ::rmdir(dir_.c_str());
  dir_.clear();
}

bool tracefs_stackmap_available() {
  std::string root = TracefsSession::find_root();
  return !root.empty() && exists(root + "/options/stackmap");
}

}  // namespace stackmapd

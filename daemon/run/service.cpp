// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/service.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "daemon/bpf/bpf_session.h"
#include "daemon/bpf/pinning.h"
#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/export/history.h"
#include "daemon/run/control.h"
#include "daemon/run/export_worker.h"
#include "daemon/run/http_endpoints.h"
#include "daemon/run/session_setup.h"
#include "daemon/run/stale_temps.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/symbols/kernel_probe.h"
#include "daemon/sys/error.h"
#include "daemon/sys/event_loop.h"
#include "daemon/sys/preflight.h"
#include "daemon/sys/runtime_lock.h"
#include "daemon/sys/stale_socket.h"
#include "daemon/tracefs/event_format.h"

namespace stackmapd {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The export dir holds root's exports, the control socket and the lock:
// one that others may write to could swap them. A dir that exists is
// checked, never changed: it may be shared with other programs.
void prepare_export_dir(const std::string& dir, gid_t group) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), ec);
  if (ec) throw Error("cannot create export-dir " + dir + ": " + ec.message());
  if (mkdir(dir.c_str(), 0750) == 0) {
    if (group != kNoGroup && chown(dir.c_str(), static_cast<uid_t>(-1), group) != 0)
      throw Error("cannot give " + dir + " to the export group: " + strerror(errno));
    return;
  }
  struct stat st;
  if (errno != EEXIST) throw Error("cannot create export-dir " + dir + ": " + strerror(errno));
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("export-dir " + dir + " is not a directory: remove it or choose another");
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
    throw Error("export-dir " + dir +
                " is writable by every user: give stackmapd a directory of its own (or make it "
                "sticky, chmod +t)");
  if (st.st_uid != 0 && st.st_uid != geteuid())
    throw Error("export-dir " + dir + " belongs to user " + std::to_string(st.st_uid) +
                ", who could replace the exports: give stackmapd a directory of root's");
  if (group != kNoGroup && st.st_gid != group)
    spdlog::warn(
        "export-dir {} is not of the export group: its members cannot reach the exports "
        "there until it is (chgrp)",
        dir);
}

// The kernel's symbols change as modules come and go (BPF programs' too, but
// stacks seldom pass through them): /proc/modules says when to read kallsyms again.
std::string module_list() {
  std::ifstream in("/proc/modules");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class Service {
 public:
  explicit Service(const std::vector<std::string>& args)
      : args_(args), config_(parse_daemon_args(args)) {}

  void run();

 private:
  void open_session();
  void forget_failed_start() noexcept;
  void load_symbols();
  SnapshotCut cut();
  Snapshot current() { return cut().finish(); }
  void export_now();
  void post_export();
  void report_export(const std::string& error);
  std::unique_ptr<HttpEndpoints> open_http(const DaemonConfig& c);
  void write_metrics_textfile();
  void update_status();
  std::string reset();
  std::string reload();
  ControlReply handle(const std::string& line);
  void take_signals();
  void watch_session();
  void after_reload();
  void export_on_timer();
  const Kallsyms* symbols() const { return ksyms_.get(); }

  std::vector<std::string> args_;
  DaemonConfig config_;
  std::unique_ptr<BpfSession> session_;
  // Shared with the exports and HTTP builds off the loop: a reload replaces it meanwhile.
  std::shared_ptr<const Kallsyms> ksyms_;
  std::string modules_;  // module_list() when ksyms_ was read
  KernelInfo kernel_;
  std::optional<PinDirLock> pin_lock_;  // of the current session's pin dir
  EventLoop loop_;  // the service's one loop: ring buffer, control clients, signals, timers
  EventLoop::Id ring_watch_ = 0;
  EventLoop::Id export_timer_ = 0;
  double export_interval_ = 0;           // the timer's, in seconds
  std::unique_ptr<HttpEndpoints> http_;  // --listen; after loop_, so it goes first
  std::string export_error_;             // the last timed export's failure, said once
  ExportWorker exports_;                 // the timed exports' files, off the loop
};

// A start that fails leaves no table of its own pinned (up to 2^20 stacks of
// kernel memory, until `stackmapd unpin`); one it took over stays for the next.
void Service::forget_failed_start() noexcept {
  if (session_->resumed()) return;
  try {
    session_->detach();
    session_->unpin();
  } catch (const Error& e) {
    spdlog::warn("{}", e.what());
  }
}

// The first session, at start; reload() hands over to later ones.
void Service::open_session() {
  SessionConfig sc = config_.session();
  resolve_session_events(sc, mount_tracefs_events());
  std::unique_ptr<BpfSession> fresh = BpfSession::load(sc);
  fresh->attach();
  session_ = std::move(fresh);
}

// Reading /proc/kallsyms is most of a reload's time (~1.8 s under kmem:* at
// 200 k events/s, on the loop): a reload keeps the symbols it has unless the
// modules changed.
void Service::load_symbols() {
  std::string modules = module_list();
  if (ksyms_ && modules == modules_) return;
  modules_ = std::move(modules);
  try {
    Kallsyms k = Kallsyms::load();
    if (k.addresses_hidden()) {
      spdlog::warn("/proc/kallsyms shows no addresses (kptr_restrict): exports keep raw frames");
      ksyms_.reset();
    } else {
      ksyms_ = std::make_shared<const Kallsyms>(std::move(k));
    }
  } catch (const Error& e) {
    spdlog::warn("{}: exports keep raw frames", e.what());
    ksyms_.reset();
  }
  kernel_ = probe_kernel_info_lowering_kptr_restrict(symbols());
}

SnapshotCut Service::cut() {
  session_->drain(0);
  SnapshotCut c = session_->cut();
  c.snap.kernel = kernel_;
  return c;
}

// On disk when it returns, and after any export posted before it.
void Service::export_now() {
  exports_.wait_idle();
  write_exports(config_.export_dir, current(), symbols(), config_.group_id());
}

// The loop takes the cut and the metrics (they need the session); the worker
// finishes the snapshot, formats and writes it (export_worker.h).
void Service::post_export() {
  std::string metrics;
  if (!config_.metrics_textfile.empty()) {
    session_->drain(0);
    http::MetricsInput in = collect_metrics(*session_, ringbuf_bytes(config_.ringbuf_kb));
    in.process.reset();  // no process_* (metrics.h): node-exporter has its own
    metrics = http::format_metrics(in);
  }
  exports_.post([cut = cut(), ksyms = ksyms_, dir = config_.export_dir, group = config_.group_id(),
                 textfile = config_.metrics_textfile, metrics = std::move(metrics),
                 history_kb = config_.history_max_kb]() mutable {
    write_exports(dir, std::move(cut).finish(), ksyms.get(), group);
    if (!textfile.empty()) write_file_atomic(textfile, metrics, 0644);
    if (history_kb) keep_history(dir, history_kb * 1024, group);
  });
}

std::unique_ptr<HttpEndpoints> Service::open_http(const DaemonConfig& c) {
  if (c.listen.empty()) return nullptr;
  const ListenAddress address = ListenAddress::parse(c.listen);
  HttpEndpoints::Source source;
  source.cut = [this] { return cut(); };
  source.metrics = [this] {
    session_->drain(0);
    return collect_metrics(*session_, ringbuf_bytes(config_.ringbuf_kb));
  };
  source.symbols = [this] { return ksyms_; };
  // Read at each request: a reload may change the interval and keep the listener.
  source.refresh_seconds = [this] {
    return std::max(2, static_cast<int>(config_.snapshot_interval));
  };
  auto endpoints = std::make_unique<HttpEndpoints>(loop_, address, c.group_id(), source);
  if (!address.loopback())
    spdlog::warn("HTTP on {} is not loopback: whoever reaches it reads the kernel's stacks",
                 endpoints->address().str());
  spdlog::info("HTTP endpoints on {}", endpoints->address().str());
  return endpoints;
}

// Metrics only, no process_* (metrics.h): node-exporter has its own.
void Service::write_metrics_textfile() {
  if (config_.metrics_textfile.empty()) return;
  session_->drain(0);
  http::MetricsInput in = collect_metrics(*session_, ringbuf_bytes(config_.ringbuf_kb));
  in.process.reset();
  write_file_atomic(config_.metrics_textfile, http::format_metrics(in), 0644);
}

void Service::update_status() {
  TableStats st = session_->stats();
  sd_notifyf(0, "STATUS=%llu events, %u unique stacks, %llu dropped%s",
             static_cast<unsigned long long>(st.events()), st.entries,
             static_cast<unsigned long long>(st.drops()), st.pool_full() ? " (pool full)" : "");
}

std::string Service::reset() {
  Snapshot ended = session_->reset();
  export_now();
  std::string msg = "reset: epoch " + std::to_string(session_->epoch() - 1) + " ended with " +
                    std::to_string(ended.stats.events()) + " events in " +
                    std::to_string(ended.stacks.size()) + " unique stacks";
  spdlog::info("{}", msg);
  return msg + "\n";
}

// Re-reads the config file. Events alone change by re-attaching, keeping the
// table; a new table size or ring buffer needs a new session, which takes
// over the pinned table where its layout still fits. A reload that fails
// leaves everything as it was: the same session, config and attached events.
std::string Service::reload() {
  DaemonConfig next = parse_daemon_args(args_);  // a bad file changes nothing
  if (next.export_dir != config_.export_dir)
    spdlog::warn("export-dir changes only on restart: keeping {}", config_.export_dir);
  next.export_dir = config_.export_dir;
  // Bound before anything changes: an address in use fails the reload alone.
  const bool new_listen = next.listen != config_.listen;
  std::unique_ptr<HttpEndpoints> http = new_listen ? open_http(next) : nullptr;
  SessionConfig sc = next.session();
  load_symbols();
  resolve_session_events(sc, mount_tracefs_events(), symbols());
  std::optional<PinDirLock> pin_lock;  // another table's, before it is touched
  const std::string pin_dir = pin_lock_ ? pin_lock_->dir() : "";
  if (!sc.pin_dir.empty() && sc.pin_dir != pin_dir) pin_lock.emplace(sc.pin_dir);
  // What the records mean or how they are kept changes only with a new session.
  const bool same_table =
      next.bits == config_.bits && next.ringbuf_kb == config_.ringbuf_kb &&
      next.verify == config_.verify && next.pin_dir == config_.pin_dir &&
      next.pinned == config_.pinned && next.by == config_.by && next.sum == config_.sum &&
      next.offcpu == config_.offcpu && next.min_block_us == config_.min_block_us &&
      next.max_keys == config_.max_keys && next.user_stacks == config_.user_stacks;

  sd_notify(0, "RELOADING=1");
  std::string how;
  try {
    if (same_table) {
      session_->reattach(sc.events);  // all or nothing
      how = "table kept";
    } else {
      // Built while the old session counts; then only one of them is
      // attached at a time, so a pinned table they share counts each event once.
      std::unique_ptr<BpfSession> fresh = BpfSession::load(sc);
      session_->detach();
      session_->drain(0);
      try {
        fresh->attach();
      } catch (...) {
        try {
          session_->attach();
        } catch (const Error& e) {
          spdlog::error("the running session could not re-attach after the failed reload: {}",
                        e.what());
        }
        throw;
      }
      std::unique_ptr<BpfSession> old = std::exchange(session_, std::move(fresh));
      if (next.pin_dir != config_.pin_dir) {
        try {
          old->unpin();
        } catch (const Error& e) {
          spdlog::warn("{}", e.what());
        }
      }
      how = session_->resumed() ? "new session on the pinned table" : "new table";
    }
  } catch (...) {
    sd_notify(0, "READY=1");
    throw;
  }
  config_ = next;
  if (sc.pin_dir != pin_dir) pin_lock_ = std::move(pin_lock);
  if (new_listen) http_ = std::move(http);
  try {
    post_export();  // the files' failure is reported as a timed export's
  } catch (const std::exception& e) {
    spdlog::warn("reloaded, but the exports were not written: {}", e.what());
  }
  sd_notify(0, "READY=1");
  std::string events;
  for (const auto& e : config_.events) events += (events.empty() ? "" : ", ") + e;
  std::string msg = "reloaded " + config_.config_path + ": tracing " + events + " (" + how + ")";
  spdlog::info("{}", msg);
  return msg + "\n";
}

ControlReply Service::handle(const std::string& line) {
  try {
    if (line == "stat") {
      session_->drain(0);
      return {true, format_stat(session_->stats())};
    }
    if (line == "top" || line.rfind("top ", 0) == 0) {
      size_t n = 20;
      if (line.size() > 4) {
        const char* end = line.data() + line.size();
        auto [at, ec] = std::from_chars(line.data() + 4, end, n);  // no sign, no blanks
        if (ec != std::errc() || at != end || n == 0)
          return {false, "'" + line + "': give top a count of stacks, 1 or more"};
      }
      session_->drain(0);
      return {true, format_top(session_->snapshot(), n, symbols())};
    }
    if (line == "reset") return {true, reset()};
    if (line == "snapshot") {
      export_now();
      return {true, "exports written to " + config_.export_dir + "\n"};
    }
    if (line == "reload") {
      try {
        std::string msg = reload();
        after_reload();
        return {true, msg};
      } catch (const Error& e) {
        after_reload();
        throw Error(std::string("reload failed, keeping the running configuration: ") + e.what());
      }
    }
    return {false, "unknown request '" + line + "': use stat, top N, reset, snapshot or reload"};
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", line, e.what());
    return {false, e.what()};
  }
}

// Taken before the session loads: a SIGTERM meanwhile stops the first turn,
// instead of killing the daemon with its pins half made.
void Service::take_signals() {
  for (int sig : {SIGTERM, SIGINT}) loop_.on_signal(sig, [this](int) { loop_.stop(); });
  loop_.on_signal(SIGHUP, [this](int) {
    try {
      reload();
    } catch (const std::exception& e) {
      spdlog::error("reload failed, keeping the running configuration: {}", e.what());
    }
    after_reload();
  });
  loop_.on_signal(SIGUSR1, [this](int) {
    try {
      reset();
    } catch (const std::exception& e) {
      spdlog::error("SIGUSR1 reset failed, still tracing: {}", e.what());
    }
  });
}

// The ring buffer's wakeup fd is the current session's: a reload may have
// replaced the session.
void Service::watch_session() {
  if (ring_watch_) loop_.unwatch(ring_watch_);
  ring_watch_ = loop_.watch(session_->wakeup_fd(), POLLIN, [this](short) { session_->drain(0); });
}

void Service::after_reload() {
  watch_session();
  // Only a new interval restarts the timer: reloads in a row (a SIGHUP storm)
  // would otherwise put the next export off for as long as they come.
  if (export_timer_ && config_.snapshot_interval != export_interval_) {
    export_interval_ = config_.snapshot_interval;
    loop_.set_period(export_timer_, std::chrono::duration_cast<clock::duration>(
                                        std::chrono::duration<double>(export_interval_)));
  }
}

// A failed timed export (a full disk) is said once, not every interval, and
// the daemon keeps tracing; the next one that works says so.
void Service::report_export(const std::string& error) {
  if (error.empty() && !export_error_.empty())
    spdlog::info("exports written again to {}", config_.export_dir);
  else if (!error.empty() && error != export_error_)
    spdlog::error("timed export failed, still tracing (retried every {} s): {}",
                  config_.snapshot_interval, error);
  export_error_ = error;
}

// While the worker still writes the last one, this turn is skipped: a table
// that takes longer than the interval to write is written as often as it can be.
void Service::export_on_timer() {
  if (auto outcome = exports_.take_outcome()) report_export(*outcome);
  try {
    if (!exports_.busy()) post_export();
  } catch (const std::exception& e) {
    report_export(e.what());
  }
  update_status();
}

void Service::run() {
  check_privileges();
  check_btf();
  const gid_t group = config_.group_id();
  const SessionConfig sc = config_.session();  // validate before touching anything
  prepare_export_dir(config_.export_dir, group);
  RuntimeLock lock(config_.export_dir);
  if (size_t n = remove_stale_temps(config_.export_dir, config_.metrics_textfile))
    spdlog::info("removed {} temp file(s) a killed daemon left in {}", n, config_.export_dir);
  // The pinned table is the first daemon's until it stops: take it only then.
  if (!sc.pin_dir.empty()) pin_lock_.emplace(sc.pin_dir);
  take_signals();
  // What can fail cheaply (an address in use) before the table is loaded.
  const std::string control_path = config_.export_dir + "/" + kControlSocket;
  remove_stale_socket(control_path);
  ControlServer control(loop_, control_path, group,
                        [this](const std::string& line) { return handle(line); });
  http_ = open_http(config_);
  open_session();
  try {
    load_symbols();
    export_now();
    write_metrics_textfile();
  } catch (...) {
    forget_failed_start();
    throw;
  }
  sd_notify(0, "READY=1");
  update_status();
  std::string events;
  for (const auto& e : config_.events) events += (events.empty() ? "" : ", ") + e;
  spdlog::info("tracing {}; exports in {} every {} s", events, config_.export_dir,
               config_.snapshot_interval);

  watch_session();
  // The BPF side submits without waking us: drain at least every 100 ms.
  loop_.every(milliseconds(100), [this] { session_->drain(0); });
  export_interval_ = config_.snapshot_interval;
  export_timer_ = loop_.every(std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double>(config_.snapshot_interval)),
                              [this] { export_on_timer(); });
  // The watchdog hears from the loop itself: a stalled loop is restarted.
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0) {
    sd_notify(0, "WATCHDOG=1");
    loop_.every(std::chrono::microseconds(watchdog_usec / 2), [] { sd_notify(0, "WATCHDOG=1"); });
  }
  loop_.run();

  sd_notify(0, "STOPPING=1");
  session_->detach();
  // Whatever the last export meets, the pins, socket and pid file still go.
  try {
    export_now();
  } catch (const std::exception& e) {
    spdlog::error("the last export failed, {} keeps the previous one: {}", config_.export_dir,
                  e.what());
  }
  if (!config_.keep_pins) session_->unpin();
  spdlog::info("stopped; exports left in {}{}", config_.export_dir,
               config_.keep_pins ? ", table kept pinned for the next start" : "");
}

}  // namespace

void run_service(const std::vector<std::string>& args) { Service(args).run(); }

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/service.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "daemon/export/exports.h"
#include "daemon/run/service_impl.h"
#include "daemon/run/stale_temps.h"
#include "daemon/source/session_setup.h"
#include "daemon/sys/error.h"
#include "daemon/sys/preflight.h"
#include "daemon/sys/runtime_lock.h"
#include "daemon/sys/stale_socket.h"

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

}  // namespace

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
  table_ = sc.table();
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
      reset([](const ControlReply& r) {
        if (!r.ok) spdlog::error("SIGUSR1 reset failed, still tracing: {}", r.text);
      });
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
  if (user_scan_timer_) loop_.cancel(user_scan_timer_);
  user_scan_timer_ = 0;
  if (session_->has_user_stacks())
    user_scan_timer_ = loop_.every(std::chrono::milliseconds(BpfSession::kUserStackScanMs),
                                   [this] { session_->see_user_stacks(); });
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
  ControlServer control(
      loop_, control_path, group,
      [this](const std::string& line, const ControlServer::Respond& r) { handle(line, r); });
  http_ = open_http(config_);
  open_session();
  try {
    load_symbols();
    export_now();
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
  configure_otlp();
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

void run_service(const std::vector<std::string>& args) { Service(args).run(); }

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <utility>

#include "daemon/run/service_impl.h"
#include "daemon/source/session_setup.h"
#include "daemon/symbols/kernel_probe.h"
#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"
#include "daemon/sys/preflight.h"

namespace stackmapd {

namespace {

// The kernel's symbols change as modules come and go (BPF programs' too, but
// stacks seldom pass through them): /proc/modules says when to read kallsyms again.
std::string module_list() { return read_file("/proc/modules").value_or(""); }

}  // namespace

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
  const bool same_table = sc.table() == table_ && session_->can_reattach(sc.events);

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
  table_ = sc.table();
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

void Service::after_reload() {
  watch_session();
  configure_otlp();
  // Only a new interval restarts the timer: reloads in a row (a SIGHUP storm)
  // would otherwise put the next export off for as long as they come.
  if (export_timer_ && config_.snapshot_interval != export_interval_) {
    export_interval_ = config_.snapshot_interval;
    loop_.set_period(export_timer_, std::chrono::duration_cast<EventLoop::Clock::duration>(
                                        std::chrono::duration<double>(export_interval_)));
  }
}

}  // namespace stackmapd

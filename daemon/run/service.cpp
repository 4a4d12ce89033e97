// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/service.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "daemon/bpf/bpf_session.h"
#include "daemon/run/control.h"
#include "daemon/sys/error.h"
#include "daemon/export/exports.h"
#include "daemon/export/history.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/bpf/preflight.h"

namespace stackmapd {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One daemon per runtime directory: an exclusive lock on its pid file.
class RuntimeLock {
 public:
  explicit RuntimeLock(const std::string& dir) : path_(dir + "/stackmapd.pid") {
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot open " + path_ + ": " + strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {};
      ssize_t n = pread(fd_, buf, sizeof(buf) - 1, 0);
      std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
      while (!pid.empty() && pid.back() == '\n') pid.pop_back();
      close(fd_);
      throw Error("another stackmapd (pid " + pid + ") already runs on " + dir +
                  ": stop it first (systemctl stop stackmapd) or give this one another --export-dir");
    }
    std::string pid = std::to_string(getpid()) + "\n";
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, pid.data(), pid.size(), 0) < 0)
      throw Error("cannot write " + path_ + ": " + strerror(errno));
  }
  ~RuntimeLock() {
    unlink(path_.c_str());
    close(fd_);
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class SignalFd {
 public:
  SignalFd() {
    sigemptyset(&set_);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&set_, sig);
    sigprocmask(SIG_BLOCK, &set_, &old_);
    fd_ = signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) throw Error(std::string("cannot create a signalfd: ") + strerror(errno));
  }
  ~SignalFd() {
    close(fd_);
    sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  int fd() const { return fd_; }
  std::optional<int> next() {
    signalfd_siginfo info;
    if (read(fd_, &info, sizeof(info)) != sizeof(info)) return std::nullopt;
    return static_cast<int>(info.ssi_signo);
  }

 private:
  sigset_t set_, old_;
  int fd_ = -1;
};

void make_runtime_dir(const std::string& dir, gid_t group) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create " + dir + ": " + ec.message());
  chmod(dir.c_str(), 0750);
  if (group != kNoGroup && chown(dir.c_str(), static_cast<uid_t>(-1), group) != 0)
    throw Error("cannot give " + dir + " to the export group: " + strerror(errno));
}

class Service {
 public:
  explicit Service(const std::vector<std::string>& args)
      : args_(args), config_(parse_daemon_args(args)) {}

  void run();

 private:
  void open_session();
  void load_symbols();
  void export_now();
  void update_status();
  std::string reset();
  std::string reload();
  void handle(const ControlServer::Request& req);
  const Kallsyms* symbols() const { return ksyms_ ? &*ksyms_ : nullptr; }

  std::vector<std::string> args_;
  DaemonConfig config_;
  std::unique_ptr<BpfSession> session_;
  std::optional<Kallsyms> ksyms_;
  KernelInfo kernel_;
  bool stop_ = false;
};

// The first session, at start; reload() hands over to later ones.
void Service::open_session() {
  SessionConfig sc = config_.session();
  check_tracepoints(sc.events, mount_tracefs_events());
  std::unique_ptr<BpfSession> fresh = BpfSession::load(sc);
  fresh->attach();
  session_ = std::move(fresh);
}

void Service::load_symbols() {
  try {
    Kallsyms k = Kallsyms::load();
    if (k.addresses_hidden()) {
      spdlog::warn("/proc/kallsyms shows no addresses (kptr_restrict): exports keep raw frames");
      ksyms_.reset();
    } else {
      ksyms_ = std::move(k);
    }
  } catch (const Error& e) {
    spdlog::warn("{}: exports keep raw frames", e.what());
    ksyms_.reset();
  }
  kernel_ = KernelInfo::probe(symbols());
}

void Service::export_now() {
  session_->drain(0);
  Snapshot snap = session_->snapshot();
  snap.kernel = kernel_;
  write_exports(config_.export_dir, snap, symbols(), config_.group_id());
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
  SessionConfig sc = next.session();
  check_tracepoints(sc.events, mount_tracefs_events());
  const bool same_table = next.bits == config_.bits && next.ringbuf_kb == config_.ringbuf_kb &&
                          next.verify == config_.verify && next.pin_dir == config_.pin_dir &&
                          next.pinned == config_.pinned;

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
  load_symbols();
  try {
    export_now();
  } catch (const Error& e) {
    spdlog::warn("reloaded, but the exports were not written: {}", e.what());
  }
  sd_notify(0, "READY=1");
  std::string events;
  for (const auto& e : config_.events) events += (events.empty() ? "" : ", ") + e;
  std::string msg = "reloaded " + config_.config_path + ": tracing " + events + " (" + how + ")";
  spdlog::info("{}", msg);
  return msg + "\n";
}

void Service::handle(const ControlServer::Request& req) {
  const std::string& line = req.line;
  try {
    if (line == "stat") {
      session_->drain(0);
      ControlServer::reply(req.client, true, format_stat(session_->stats()));
    } else if (line == "top" || line.rfind("top ", 0) == 0) {
      size_t n = 20;
      if (line.size() > 4) n = std::stoul(line.substr(4));
      session_->drain(0);
      ControlServer::reply(req.client, true,
                           format_top(session_->store().snapshot(), n, symbols()));
    } else if (line == "reset") {
      ControlServer::reply(req.client, true, reset());
    } else if (line == "snapshot") {
      export_now();
      ControlServer::reply(req.client, true, "exports written to " + config_.export_dir + "\n");
    } else if (line == "reload") {
      try {
        ControlServer::reply(req.client, true, reload());
      } catch (const Error& e) {
        throw Error(std::string("reload failed, keeping the running configuration: ") + e.what());
      }
    } else {
      ControlServer::reply(req.client, false,
                           "unknown request '" + line + "': use stat, top N, reset, snapshot or reload");
    }
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", line, e.what());
    ControlServer::reply(req.client, false, e.what());
  }
}

void Service::run() {
  check_privileges();
  check_btf();
  const gid_t group = config_.group_id();
  config_.session();  // validate before touching anything
  make_runtime_dir(config_.export_dir, group);
  RuntimeLock lock(config_.export_dir);
  SignalFd signals;
  open_session();
  load_symbols();
  ControlServer control(config_.export_dir + "/" + kControlSocket, group);
  export_now();
  sd_notify(0, "READY=1");
  update_status();
  std::string events;
  for (const auto& e : config_.events) events += (events.empty() ? "" : ", ") + e;
  spdlog::info("tracing {}; exports in {} every {} s", events, config_.export_dir,
               config_.snapshot_interval);

  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  const auto ping_every = std::chrono::microseconds(watchdog_usec / 2);
  auto next_ping = clock::now();
  auto export_every = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(config_.snapshot_interval));
  auto next_export = clock::now() + export_every;

  while (!stop_) {
    auto now = clock::now();
    if (watchdog && now >= next_ping) {
      sd_notify(0, "WATCHDOG=1");
      next_ping = now + ping_every;
    }
    if (now >= next_export) {
      export_now();
      if (config_.history_max_kb)
        keep_history(config_.export_dir, config_.history_max_kb * 1024, config_.group_id());
      update_status();
      export_every = std::chrono::duration_cast<clock::duration>(
          std::chrono::duration<double>(config_.snapshot_interval));
      next_export = now + export_every;
    }
    auto until = std::min(next_export, watchdog ? next_ping : next_export);
    auto wait = std::chrono::duration_cast<milliseconds>(until - now).count();
    pollfd fds[3] = {{session_->wakeup_fd(), POLLIN, 0},
                     {control.fd(), POLLIN, 0},
                     {signals.fd(), POLLIN, 0}};
    // The BPF side submits without waking us: drain at least every 100 ms.
    poll(fds, 3, static_cast<int>(std::clamp<long long>(wait, 0, 100)));
    session_->drain(0);
    if (fds[1].revents & POLLIN)
      while (auto req = control.accept_request()) handle(*req);
    if (fds[2].revents & POLLIN) {
      while (auto sig = signals.next()) {
        if (*sig == SIGHUP) {
          try {
            reload();
          } catch (const Error& e) {
            spdlog::error("reload failed, keeping the running configuration: {}", e.what());
          }
        } else if (*sig == SIGUSR1) {
          reset();
        } else {
          stop_ = true;
        }
      }
    }
  }

  sd_notify(0, "STOPPING=1");
  session_->detach();
  export_now();
  if (!config_.keep_pins) session_->unpin();
  spdlog::info("stopped; exports left in {}{}", config_.export_dir,
               config_.keep_pins ? ", table kept pinned for the next start" : "");
}

}  // namespace

void run_service(const std::vector<std::string>& args) { Service(args).run(); }

}  // namespace stackmapd

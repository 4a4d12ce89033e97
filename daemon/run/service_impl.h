// SPDX-License-Identifier: GPL-2.0
// The service's one object (service.h), its files by job: service.cpp
// (start, the loop, stop), service_control.cpp (the control requests and
// reset, answered from the workers), service_reload.cpp (reload, symbols), service_exports.cpp (the
// timed exports, the metrics textfile, the HTTP endpoints' source),
// service_otlp.cpp (the OpenTelemetry push).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/bpf/bpf_session.h"
#include "daemon/bpf/pinning.h"
#include "daemon/model/kernel_info.h"
#include "daemon/model/snapshot_cut.h"
#include "daemon/run/config.h"
#include "daemon/run/control.h"
#include "daemon/run/export_worker.h"
#include "daemon/run/http_endpoints.h"
#include "daemon/run/otlp_sender.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/event_loop.h"
#include "daemon/sys/task_runner.h"

namespace stackmapd {

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
  void export_now();
  void post_export(ExportWorker::Written written = {});
  void report_export(const std::string& error);
  std::unique_ptr<HttpEndpoints> open_http(const DaemonConfig& c);
  void update_status();
  // `done` gets the reply once the new epoch's exports are written (or failed).
  void reset(ControlServer::Respond done);
  std::string reload();
  void handle(const std::string& line, const ControlServer::Respond& respond);
  void take_signals();
  void watch_session();
  void after_reload();
  void export_on_timer();
  // otlp-endpoint: the sender and its timer as the config says (service_otlp.cpp).
  void configure_otlp();
  void push_otlp();
  const Kallsyms* symbols() const { return ksyms_.get(); }

  std::vector<std::string> args_;
  DaemonConfig config_;
  std::unique_ptr<BpfSession> session_;
  TableConfig table_;  // session_'s, as loaded: a reload that keeps it only re-attaches
  // Shared with the exports and HTTP builds off the loop: a reload replaces it meanwhile.
  std::shared_ptr<const Kallsyms> ksyms_;
  std::string modules_;  // module_list() when ksyms_ was read
  KernelInfo kernel_;
  std::optional<PinDirLock> pin_lock_;  // of the current session's pin dir
  EventLoop loop_;  // the service's one loop: ring buffer, control clients, signals, timers
  EventLoop::Id ring_watch_ = 0;
  EventLoop::Id user_scan_timer_ = 0;  // --user-stacks: BpfSession::see_user_stacks()
  EventLoop::Id export_timer_ = 0;
  double export_interval_ = 0;           // the timer's, in seconds
  std::unique_ptr<HttpEndpoints> http_;  // --listen; after loop_, so it goes first
  std::string export_error_;             // the last timed export's failure, said once
  ExportWorker exports_{&loop_};         // the exports' files, off the loop
  TaskRunner requests_{TaskRunner::Options("requests"),
                       &loop_};  // ctl top, reset: finished off the loop
  // The push's: the sender and its timer, the endpoint and interval they run
  // with, and the last pushed snapshot (touched by the sender's jobs only).
  struct OtlpPush {
    std::optional<Snapshot> last;
    int64_t last_nanos = 0;
  };
  std::unique_ptr<OtlpSender> otlp_;
  EventLoop::Id otlp_timer_ = 0;
  std::string otlp_endpoint_;
  double otlp_timeout_ = 0;
  double otlp_interval_ = 0;
  std::shared_ptr<OtlpPush> otlp_push_;
};

}  // namespace stackmapd

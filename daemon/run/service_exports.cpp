// SPDX-License-Identifier: GPL-2.0
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <algorithm>

#include "daemon/export/exports.h"
#include "daemon/export/history.h"
#include "daemon/run/service_impl.h"
#include "daemon/sys/error.h"
#include "daemon/sys/preflight.h"

namespace stackmapd {

SnapshotCut Service::cut() {
  session_->drain(0);
  SnapshotCut c = session_->cut();
  c.snap.kernel = kernel_;
  return c;
}

// On disk when it returns, and after any export posted before it: at start
// and at stop, when the loop does not turn. Throws Error if it failed.
void Service::export_now() {
  post_export();
  exports_.wait_idle();
  if (std::optional<std::string> error = exports_.take_outcome(); error && !error->empty())
    throw Error(*error);
}

// The loop takes the cut and the metrics (they need the session); the worker
// finishes the snapshot, formats and writes it (export_worker.h), then
// `written` runs on the loop.
void Service::post_export(ExportWorker::Written written) {
  std::string metrics;
  if (!config_.metrics_textfile.empty()) {
    session_->drain(0);
    http::MetricsInput in = collect_metrics(*session_, ringbuf_bytes(config_.ringbuf_kb));
    in.process.reset();  // no process_* (metrics.h): node-exporter has its own
    if (otlp_) in.otlp = otlp_->counters();
    in.loop = loop_.turns();
    metrics = http::format_metrics(in);
  }
  exports_.post(
      [cut = cut(), ksyms = ksyms_, dir = config_.export_dir, group = config_.group_id(),
       textfile = config_.metrics_textfile, metrics = std::move(metrics),
       history_kb = config_.history_max_kb]() mutable {
        write_exports(dir, std::move(cut).finish(), ksyms.get(), group);
        if (!textfile.empty()) write_file_atomic(textfile, metrics, 0644);
        if (history_kb) keep_history(dir, history_kb * 1024, group);
      },
      std::move(written));
}

std::unique_ptr<HttpEndpoints> Service::open_http(const DaemonConfig& c) {
  if (c.listen.empty()) return nullptr;
  const ListenAddress address = ListenAddress::parse(c.listen);
  HttpEndpoints::Source source;
  source.cut = [this] { return cut(); };
  source.metrics = [this] {
    session_->drain(0);
    http::MetricsInput in = collect_metrics(*session_, ringbuf_bytes(config_.ringbuf_kb));
    if (otlp_) in.otlp = otlp_->counters();
    in.loop = loop_.turns();
    return in;
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

void Service::update_status() {
  TableStats st = session_->stats();
  sd_notifyf(0, "STATUS=%llu events, %u unique stacks, %llu dropped%s",
             static_cast<unsigned long long>(st.events()), st.entries,
             static_cast<unsigned long long>(st.drops()), st.pool_full() ? " (pool full)" : "");
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

}  // namespace stackmapd

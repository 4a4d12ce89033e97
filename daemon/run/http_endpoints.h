// SPDX-License-Identifier: GPL-2.0
// The service's HTTP endpoints (--listen) over daemon/http/server.h:
//   GET /                the live page (daemon/http/page.h)
//   GET /flame.json?window=all|10m|1m&key=FIELD&value=V
//                        the page's data (daemon/http/flame_json.h): the call
//                        tree since start or over a window of the history
//                        (window_history.h), of one --by value if asked
//   GET /flame.pprof?window=...&key=FIELD&value=V&exclude=1
//                        that view as a gzipped pprof (the page's download)
//   GET /metrics         Prometheus text (daemon/http/metrics.h)
//   GET /stack_map.json  the JSON export, current
//   GET /debug/pprof/stackmapd?seconds=N
//                        a gzipped pprof of the next N seconds (Parca, Alloy):
//                        a snapshot now, a timer on the loop (never a sleep),
//                        then the delta; labels without pid and tid, so that a
//                        fleet store's series stay few
// Each request reads the service's current session through Source, in the
// loop, at the moment it is answered. The JSON export is the exception to
// "answered in the loop": it is built once for a burst of requests, off the
// loop, and shared (daemon/run/shared_export.h); the loop only copies the
// snapshot. A TCP listener can be reached by any local user, so what it
// serves holds no raw address, kernel (KASLR) or user (JsonOptions): frames
// that do not resolve show as "[unknown]"; a unix socket (0660, root and the
// export group, like the exports) serves the export as it is. The profile is
// the exception: pprof locations carry their addresses (docs/outputs.md says so).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>

#include "daemon/http/metrics.h"
#include "daemon/http/server.h"
#include "daemon/model/snapshot_cut.h"
#include "daemon/run/shared_export.h"
#include "daemon/run/window_history.h"
#include "daemon/sys/event_loop.h"
#include "daemon/sys/listen_address.h"
#include "daemon/sys/task_runner.h"

namespace stackmapd {

class BpfSession;
class Kallsyms;

class HttpEndpoints {
 public:
  struct Source {
    // The table now, drained, with kernel info: its cut on the loop, which
    // finish() turns into the snapshot anywhere (daemon/model/snapshot_cut.h).
    std::function<SnapshotCut()> cut;
    std::function<http::MetricsInput()> metrics;
    // Shared: a build on the worker keeps them while a reload replaces them.
    std::function<std::shared_ptr<const Kallsyms>()> symbols;
    std::function<int()> refresh_seconds;  // of the live page
  };

  // Listens on `address` (throws Error); a unix socket gets `group`.
  HttpEndpoints(EventLoop& loop, const ListenAddress& address, gid_t group, Source source,
                http::Server::Limits limits = {});
  ~HttpEndpoints();  // cancels the profiles still recording
  HttpEndpoints(const HttpEndpoints&) = delete;
  HttpEndpoints& operator=(const HttpEndpoints&) = delete;

  static constexpr long kDefaultProfileSeconds = 10;
  static constexpr long kMaxProfileSeconds = 300;
  static constexpr size_t kMaxProfiles = 4;  // recording at once; more get 429
  // /stack_map.json requests waiting or being read at once; more get 503 with
  // Retry-After. Well below a peer's slots (http::Server::Limits): the rest
  // stay for /metrics and the page.
  static constexpr size_t kMaxJsonInFlight = 8;
  static constexpr size_t kMaxFlameInFlight = 8;  // /flame.json, likewise
  // The windows' history: a snapshot this often (its cut on the loop, the
  // rest on the worker); a /flame.json reuses one this young.
  static constexpr std::chrono::seconds kHistoryPeriod{10};
  static constexpr std::chrono::seconds kSnapshotFresh{1};

  const ListenAddress& address() const { return server_.address(); }

 private:
  void handle(const http::Request& req, const http::Server::Respond& respond);
  void profile(const http::Request& req, const http::Server::Respond& respond);
  void stack_map_json(const http::Server::Respond& respond);
  // /flame.json, or with `pprof` /flame.pprof: the same view as a profile.
  void flame(const http::Request& req, const http::Server::Respond& respond, bool pprof);
  void record_history();

  EventLoop& loop_;
  Source source_;
  std::map<uint64_t, EventLoop::Id> profiles_;  // recording: their timers
  uint64_t next_profile_ = 1;
  bool addresses_;              // raw addresses may be served: a unix socket
  size_t json_in_flight_ = 0;   // their leases (http::Response::lease) count it; before server_
  size_t flame_in_flight_ = 0;  // likewise
  http::Server server_;
  TaskRunner
      worker_;  // finishes snapshots and formats; joined last (its replies run only in a turn)
  SharedExport json_;
  WindowHistory history_;
  WindowHistory::Snap latest_;  // the newest snapshot finished, and when its cut was taken
  WindowHistory::Clock::time_point latest_at_;
  EventLoop::Id history_timer_ = 0;
};

// The metrics of `session` now (drain it first), with this process' own.
http::MetricsInput collect_metrics(const BpfSession& session, uint64_t ring_size_bytes);

}  // namespace stackmapd

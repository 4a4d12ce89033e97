// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/http_endpoints.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "daemon/bpf/bpf_session.h"
#include "daemon/export/output_plan.h"
#include "daemon/http/flame_json.h"
#include "daemon/http/page.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/host_name.h"
#include "daemon/sys/wall_clock.h"

namespace stackmapd {

namespace {

http::Response ok(std::string content_type, std::string body) {
  http::Response r;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

// The snapshot's keys less those of a value per process (pid, tid): one
// series per process in a fleet's store would be too many.
std::vector<KeyField> fleet_keys(const KeySpec& keys) {
  std::vector<KeyField> out;
  for (KeyField f : keys.fields)
    if (!key_field(f).per_process) out.push_back(f);
  return out;
}

}  // namespace

HttpEndpoints::HttpEndpoints(EventLoop& loop, const ListenAddress& address, gid_t group,
                             Source source, http::Server::Limits limits)
    : loop_(loop),
      source_(std::move(source)),
      addresses_(address.is_unix()),
      server_(
          loop, address, group,
          [this](const http::Request& req, http::Server::Respond respond) { handle(req, respond); },
          limits),
      worker_(TaskRunner::Options("http-worker"), &loop),
      json_(
          worker_,
          [this] {
            // The cut stays on the loop (it is the table at this moment);
            // sorting it into stacks and formatting, many times its cost, go
            // to the worker.
            auto cut = std::make_shared<SnapshotCut>(source_.cut());
            std::shared_ptr<const Kallsyms> symbols = source_.symbols();
            JsonOptions opt;
            opt.addresses = addresses_;
            return [cut, symbols, opt] {
              const Snapshot snap = std::move(*cut).finish();
              OutputContext ctx(snap, symbols.get());
              ctx.json = opt;
              return output_spec(OutputKind::json).render(ctx);
            };
          },
          std::chrono::seconds(1)) {
  history_timer_ = loop_.every(kHistoryPeriod, [this] { record_history(); });
}

HttpEndpoints::~HttpEndpoints() {
  for (const auto& [key, timer] : profiles_) loop_.cancel(timer);
  loop_.cancel(history_timer_);
}

void HttpEndpoints::handle(const http::Request& req, const http::Server::Respond& respond) {
  try {
    if (req.path == "/metrics") {
      // 0.0.4 is the text format's version, which Prometheus asks for.
      return respond(
          ok("text/plain; version=0.0.4; charset=utf-8", http::format_metrics(source_.metrics())));
    }
    if (req.path == "/stack_map.json") return stack_map_json(respond);
    if (req.path == "/debug/pprof/stackmapd") return profile(req, respond);
    if (req.path == "/flame.json") return flame(req, respond, false);
    if (req.path == "/flame.pprof") return flame(req, respond, true);
    // A browser asks for it on any of our URLs; the page links an icon of its own.
    if (req.path == "/favicon.ico") {
      http::Response r;
      r.status = 204;
      return respond(r);
    }
    if (req.path == "/") {
      http::PageOptions opt;
      opt.host = host_name();
      opt.refresh_seconds = source_.refresh_seconds();
      if (auto r = http::query_param(req.query, "refresh")) {
        char* end = nullptr;
        const long v = std::strtol(r->c_str(), &end, 10);
        if (r->empty() || *end != '\0' || v < 0 || v > 3600)
          return respond(http::error_response(
              400, "refresh= takes 0 (no updates) to 3600 seconds between updates"));
        opt.refresh_seconds = static_cast<int>(v);
      }
      // The counters only: no snapshot of the stacks on the loop.
      return respond(
          ok("text/html; charset=utf-8", http::render_page(source_.metrics().stats, opt)));
    }
    respond(http::error_response(
        404, "no such endpoint " + req.path +
                 ": try /, /flame.json, /flame.pprof, /metrics, /stack_map.json or "
                 "/debug/pprof/stackmapd"));
  } catch (const std::exception& e) {
    respond(http::error_response(500, e.what()));
  }
}

void HttpEndpoints::stack_map_json(const http::Server::Respond& respond) {
  if (json_in_flight_ >= kMaxJsonInFlight)
    return respond(http::error_response(
        503,
        std::to_string(kMaxJsonInFlight) +
            " requests for /stack_map.json are being answered already: try again in a moment"));
  ++json_in_flight_;
  std::shared_ptr<const void> lease(nullptr, [this](const void*) { --json_in_flight_; });
  json_.get([respond, lease](SharedExport::Body body, const std::string& error) {
    http::Response r = body ? http::Response{} : http::error_response(500, error);
    if (body) {
      r.content_type = "application/json";
      r.shared_body = std::move(body);
    }
    r.lease = lease;
    respond(r);
  });
}

// One timer per request on the loop, at most kMaxProfiles at once.
void HttpEndpoints::profile(const http::Request& req, const http::Server::Respond& respond) {
  long seconds = kDefaultProfileSeconds;
  if (auto s = http::query_param(req.query, "seconds")) {
    char* end = nullptr;
    seconds = std::strtol(s->c_str(), &end, 10);
    if (s->empty() || *end != '\0' || seconds < 1 || seconds > kMaxProfileSeconds)
      return respond(http::error_response(400, "seconds=" + *s + " is out of range: ask for 1 to " +
                                                   std::to_string(kMaxProfileSeconds) +
                                                   " seconds"));
  }
  if (profiles_.size() >= kMaxProfiles)
    return respond(http::error_response(
        429, std::to_string(kMaxProfiles) +
                 " profiles are being recorded already: try again when one is done"));
  // The cuts are the loop's; finishing, the delta and the encoding are the worker's.
  auto before = std::make_shared<SnapshotCut>(source_.cut());
  const int64_t start = realtime_nanos();
  const uint64_t key = next_profile_++;
  profiles_[key] =
      loop_.at(EventLoop::Clock::now() + std::chrono::seconds(seconds),
               [this, key, before, start, seconds, respond] {
                 profiles_.erase(key);
                 auto after = std::make_shared<SnapshotCut>(source_.cut());
                 PprofOptions opt;
                 opt.time_nanos = start;
                 opt.duration_nanos = seconds * 1000000000LL;
                 const std::shared_ptr<const Kallsyms> symbols = source_.symbols();
                 // Over TCP any local user may ask: offsets from _text.
                 if (!addresses_ && symbols) opt.address_base = symbols->text_address();
                 auto r = std::make_shared<http::Response>();
                 worker_.post(
                     [before, after, opt, symbols, r]() mutable {
                       try {
                         const Snapshot first = std::move(*before).finish();
                         const Snapshot delta = delta_snapshot(first, std::move(*after).finish());
                         opt.label_keys = fleet_keys(first.keys);
                         r->content_type = "application/octet-stream";
                         r->headers.emplace_back("Content-Disposition",
                                                 "attachment; filename=\"profile.pb.gz\"");
                         OutputContext ctx(delta, symbols.get());
                         ctx.pprof = opt;
                         r->body = output_spec(OutputKind::pprof).render(ctx);
                       } catch (const std::exception& e) {
                         *r = http::error_response(500, e.what());
                       }
                     },
                     [r, respond] { respond(*r); });
               });
}

http::MetricsInput collect_metrics(const BpfSession& session, uint64_t ring_size_bytes) {
  http::MetricsInput in;
  in.stats = session.stats();
  const auto& counts = session.store().source_events();
  const auto& names = session.sources();
  for (size_t i = 0; i < names.size(); ++i)
    in.source_events.emplace_back(names[i], i < counts.size() ? counts[i] : 0);
  in.ring_used_bytes = session.ring_pending_bytes();
  in.ring_size_bytes = ring_size_bytes;
  in.bpf_stats_enabled = http::read_bpf_stats_enabled();
  for (const auto& [role, fd] : session.programs())
    if (auto p = http::read_program_stats(role, fd)) in.programs.push_back(*p);
  in.process = http::read_process_stats();
  return in;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/http_endpoints.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "daemon/bpf/bpf_session.h"
#include "daemon/export/exports.h"
#include "daemon/export/pprof.h"
#include "daemon/http/page.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {

namespace {

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// The export without its raw addresses: the frames' "ips", the kernel's text
// address, and unresolved frames (printed as addresses) become "[unknown]".
std::string without_addresses(const std::string& json_text) {
  nlohmann::json doc = nlohmann::json::parse(json_text);
  for (auto& s : doc["stacks"]) {
    s.erase("ips");
    for (auto& sym : s["symbols"])
      if (sym.get<std::string>().rfind("0x", 0) == 0) sym = "[unknown]";
  }
  if (doc.contains("kernel")) doc["kernel"].erase("text");
  return doc.dump(2) + "\n";
}

http::Response ok(std::string content_type, std::string body) {
  http::Response r;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

int64_t realtime_nanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The snapshot's keys less pid and tid: one series per process in a fleet's
// store would be too many.
std::vector<KeyField> fleet_keys(const KeySpec& keys) {
  std::vector<KeyField> out;
  for (KeyField f : keys.fields)
    if (f != KeyField::pid && f != KeyField::tid) out.push_back(f);
  return out;
}

}  // namespace

HttpEndpoints::HttpEndpoints(EventLoop& loop, const http::ListenAddress& address, gid_t group,
                             Source source, http::Server::Limits limits)
    : loop_(loop),
      source_(std::move(source)),
      addresses_(address.is_unix()),
      server_(
          loop, address, group,
          [this](const http::Request& req, http::Server::Respond respond) { handle(req, respond); },
          limits) {}

HttpEndpoints::~HttpEndpoints() {
  for (const auto& [key, timer] : profiles_) loop_.cancel(timer);
}

void HttpEndpoints::handle(const http::Request& req, const http::Server::Respond& respond) {
  try {
    if (req.path == "/metrics") {
      // 0.0.4 is the text format's version, which Prometheus asks for.
      return respond(
          ok("text/plain; version=0.0.4; charset=utf-8", http::format_metrics(source_.metrics())));
    }
    if (req.path == "/stack_map.json") {
      std::string json = format_json(source_.snapshot(), source_.symbols());
      return respond(ok("application/json", addresses_ ? json : without_addresses(json)));
    }
    if (req.path == "/debug/pprof/stackmapd") return profile(req, respond);
    if (req.path == "/") {
      http::PageOptions opt;
      opt.host = host_name();
      opt.refresh_seconds = source_.refresh_seconds();
      if (auto r = http::query_param(req.query, "refresh"))
        opt.refresh_seconds = std::atoi(r->c_str());
      opt.addresses = addresses_;
      return respond(ok("text/html; charset=utf-8",
                        http::render_page(source_.snapshot(), source_.symbols(), opt)));
    }
    respond(http::error_response(
        404, "no such endpoint " + req.path +
                 ": try /, /metrics, /stack_map.json or /debug/pprof/stackmapd"));
  } catch (const std::exception& e) {
    respond(http::error_response(500, e.what()));
  }
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
  auto before = std::make_shared<Snapshot>(source_.snapshot());
  const int64_t start = realtime_nanos();
  const uint64_t key = next_profile_++;
  profiles_[key] = loop_.at(EventLoop::Clock::now() + std::chrono::seconds(seconds),
                            [this, key, before, start, seconds, respond] {
                              profiles_.erase(key);
                              try {
                                PprofOptions opt;
                                opt.time_nanos = start;
                                opt.duration_nanos = seconds * 1000000000LL;
                                opt.label_keys = fleet_keys(before->keys);
                                // Over TCP any local user may ask: offsets from _text.
                                if (!addresses_ && source_.symbols())
                                  opt.address_base = source_.symbols()->text_address();
                                http::Response r;
                                r.content_type = "application/octet-stream";
                                r.headers.emplace_back("Content-Disposition",
                                                       "attachment; filename=\"profile.pb.gz\"");
                                r.body = encode_pprof(delta_snapshot(*before, source_.snapshot()),
                                                      kallsyms_namer(source_.symbols()), opt);
                                respond(r);
                              } catch (const std::exception& e) {
                                respond(http::error_response(500, e.what()));
                              }
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

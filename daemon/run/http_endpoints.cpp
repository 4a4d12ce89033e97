// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/http_endpoints.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "daemon/bpf/bpf_session.h"
#include "daemon/export/exports.h"
#include "daemon/http/page.h"

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

}  // namespace

HttpEndpoints::HttpEndpoints(EventLoop& loop, const http::ListenAddress& address, gid_t group,
                             Source source, http::Server::Limits limits)
    : source_(std::move(source)),
      addresses_(address.is_unix()),
      server_(
          loop, address, group,
          [this](const http::Request& req, http::Server::Respond respond) { handle(req, respond); },
          limits) {}

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
    if (req.path == "/") {
      http::PageOptions opt;
      opt.host = host_name();
      opt.refresh_seconds = source_.refresh_seconds;
      if (auto r = http::query_param(req.query, "refresh"))
        opt.refresh_seconds = std::atoi(r->c_str());
      opt.addresses = addresses_;
      return respond(ok("text/html; charset=utf-8",
                        http::render_page(source_.snapshot(), source_.symbols(), opt)));
    }
    respond(http::error_response(
        404, "no such endpoint " + req.path + ": try /, /metrics or /stack_map.json"));
  } catch (const std::exception& e) {
    respond(http::error_response(500, e.what()));
  }
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

// SPDX-License-Identifier: GPL-2.0
// GET /flame.json and the windows' history (http_endpoints.h): a cut on the
// loop, everything else (finishing it, the window's delta, naming frames,
// the JSON) on the worker.
#include <memory>

#include "daemon/export/frame_names.h"
#include "daemon/export/pprof.h"
#include "daemon/export/utf8_text.h"
#include "daemon/http/flame_json.h"
#include "daemon/run/http_endpoints.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {

namespace {

struct Window {
  const char* param;
  const char* label;
  WindowHistory::Clock::duration length;  // zero: since start
};
constexpr Window kWindows[] = {
    {"all", "since start", {}},
    {"10m", "last 10 minutes", std::chrono::minutes(10)},
    {"1m", "last minute", std::chrono::minutes(1)},
};

// A query value in a one-line answer: text, no line breaks.
std::string one_line(const std::string& s) {
  std::string out = utf8_text(s.substr(0, 64));
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

struct FlameResult {
  WindowHistory::Snap snap;  // finished here when the request took a cut
  int status = 500;
  std::string body;
};

}  // namespace

void HttpEndpoints::flame_json(const http::Request& req, const http::Server::Respond& respond) {
  const Window* window = &kWindows[0];
  if (auto w = http::query_param(req.query, "window")) {
    window = nullptr;
    for (const Window& k : kWindows)
      if (*w == k.param) window = &k;
    if (!window)
      return respond(http::error_response(
          400, "window=" + one_line(*w) + " is not a window: ask for all, 10m or 1m"));
  }
  if (flame_in_flight_ >= kMaxFlameInFlight)
    return respond(http::error_response(
        503, std::to_string(kMaxFlameInFlight) +
                 " requests for /flame.json are being answered already: try again in a moment"));
  ++flame_in_flight_;
  std::shared_ptr<const void> lease(nullptr, [this](const void*) { --flame_in_flight_; });

  const auto now = WindowHistory::Clock::now();
  WindowHistory::Snap latest;
  std::shared_ptr<SnapshotCut> cut;
  if (latest_ && now - latest_at_ < kSnapshotFresh) latest = latest_;
  else cut = std::make_shared<SnapshotCut>(source_.cut());
  WindowHistory::Base base;
  if (window->length.count()) base = history_.oldest_within(now, window->length);
  http::FlameJsonOptions opt;
  opt.addresses = addresses_;
  opt.window = window->label;
  if (base.snap) opt.seconds = std::chrono::duration<double>(now - base.at).count();
  auto result = std::make_shared<FlameResult>();
  std::shared_ptr<const Kallsyms> symbols = source_.symbols();
  worker_.post(
      [cut, latest, base, opt, symbols, result, query = req.query]() mutable {
        try {
          result->snap = cut ? std::make_shared<const Snapshot>(std::move(*cut).finish()) : latest;
          if (auto error = http::parse_flame_filter(query, result->snap->keys, opt.filter)) {
            result->status = 400;
            result->body = one_line(*error);
            return;
          }
          Snapshot delta;
          if (base.snap) delta = delta_snapshot(*base.snap, *result->snap);
          const Snapshot& view = base.snap ? delta : *result->snap;
          result->body = http::flame_json(view, FrameNames(view, symbols.get()), opt);
          result->status = 200;
        } catch (const std::exception& e) {
          result->body = e.what();
        }
      },
      [this, result, cut, now, respond, lease] {
        if (cut && result->snap) {
          latest_ = result->snap;
          latest_at_ = now;
        }
        http::Response r = result->status == 200
                               ? http::Response{}
                               : http::error_response(result->status, result->body);
        if (result->status == 200) {
          r.content_type = "application/json";
          r.headers.emplace_back("Cache-Control", "no-store");
          r.body = std::move(result->body);
        }
        r.lease = lease;
        respond(r);
      });
}

void HttpEndpoints::record_history() {
  auto cut = std::make_shared<SnapshotCut>(source_.cut());
  auto snap = std::make_shared<WindowHistory::Snap>();
  const auto at = WindowHistory::Clock::now();
  worker_.post(
      [cut, snap] {
        try {
          *snap = std::make_shared<const Snapshot>(std::move(*cut).finish());
        } catch (const std::exception&) {
          // No entry this time: the windows reach back to the one before.
        }
      },
      [this, snap, at] {
        if (!*snap) return;
        history_.add(at, *snap);
        latest_ = *snap;
        latest_at_ = at;
      });
}

}  // namespace stackmapd

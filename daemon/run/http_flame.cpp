// SPDX-License-Identifier: GPL-2.0
// GET /flame.json, /flame.pprof and the windows' history (http_endpoints.h): a cut on the
// loop, everything else (finishing it, the window's delta, naming frames,
// the JSON) on the worker.
#include <memory>

#include "daemon/export/frame_names.h"
#include "daemon/export/output_plan.h"
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
  const char* before;                     // base=prev's label; null: no window before
};
constexpr Window kWindows[] = {
    {"all", "since start", {}, nullptr},
    {"10m", "last 10 minutes", std::chrono::minutes(10), "the 10 minutes before"},
    {"1m", "last minute", std::chrono::minutes(1), "the minute before"},
};

const Window* find_window(const std::string& param) {
  for (const Window& w : kWindows)
    if (param == w.param) return &w;
  return nullptr;
}

// A profile between two snapshots of the history: `to` less `from`; the
// newest (the request's) for a null `to`, all of it for a null `from`;
// nothing when `empty` (a window before the history's start).
struct Span {
  WindowHistory::Snap from, to;
  bool empty = false;
  double seconds = 0;
};

Span window_span(const WindowHistory& history, WindowHistory::Clock::time_point now,
                 const Window& w) {
  Span span;
  if (!w.length.count()) return span;
  const WindowHistory::Base start = history.oldest_within(now, w.length);
  span.from = start.snap;
  if (start.snap) span.seconds = std::chrono::duration<double>(now - start.at).count();
  return span;
}

// base=prev: from the oldest snapshot within twice the window to the window's start.
Span span_before(const WindowHistory& history, WindowHistory::Clock::time_point now,
                 const Window& w) {
  Span span;
  const WindowHistory::Base end = history.oldest_within(now, w.length);
  const WindowHistory::Base start = history.oldest_within(now, 2 * w.length);
  span.empty = !end.snap;
  span.from = start.snap;
  span.to = end.snap;
  if (end.snap) span.seconds = std::chrono::duration<double>(end.at - start.at).count();
  return span;
}

WindowHistory::Snap span_profile(const Span& span, const WindowHistory::Snap& newest) {
  if (span.empty) return std::make_shared<const Snapshot>();
  const WindowHistory::Snap& to = span.to ? span.to : newest;
  return span.from ? std::make_shared<const Snapshot>(delta_snapshot(*span.from, *to)) : to;
}

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

// The view as the page's download: a gzipped pprof, named for its window.
std::string view_pprof(const Snapshot& view, const http::FlameFilter& filter,
                       const Kallsyms* symbols, bool addresses) {
  const Snapshot filtered = http::filtered_snapshot(view, filter);
  OutputContext ctx(filtered, symbols);
  // Over TCP any local user may ask: offsets from _text, as /debug/pprof.
  if (!addresses && symbols) ctx.pprof.address_base = symbols->text_address();
  return output_spec(OutputKind::pprof).render(ctx);
}

}  // namespace

void HttpEndpoints::flame(const http::Request& req, const http::Server::Respond& respond,
                          bool pprof) {
  const Window* window = &kWindows[0];
  if (auto w = http::query_param(req.query, "window")) {
    window = find_window(*w);
    if (!window)
      return respond(http::error_response(
          400, "window=" + one_line(*w) + " is not a window: ask for all, 10m or 1m"));
  }
  // base=: the differential view's base; none: the plain one.
  const Window* base = nullptr;
  bool before = false;
  if (auto b = http::query_param(req.query, "base")) {
    if (pprof)
      return respond(http::error_response(
          400,
          "base= has no pprof form: download each window and compare them with "
          "pprof -diff_base"));
    before = *b == "prev";
    base = before ? window : find_window(*b);
    if (!base)
      return respond(
          http::error_response(400, "base=" + one_line(*b) +
                                        " is not a window to compare with: ask for all, 10m, 1m "
                                        "or prev (the window before)"));
    if (before && !window->before)
      return respond(http::error_response(
          400, "base=prev needs a window of a length: window=1m or window=10m"));
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
  const Span span = window_span(history_, now, *window);
  Span base_span;
  if (base)
    base_span = before ? span_before(history_, now, *window) : window_span(history_, now, *base);
  http::FlameJsonOptions opt;
  opt.addresses = addresses_;
  opt.window = window->label;
  opt.seconds = span.seconds;
  const std::string base_label = !base ? "" : before ? window->before : base->label;
  auto result = std::make_shared<FlameResult>();
  std::shared_ptr<const Kallsyms> symbols = source_.symbols();
  worker_.post(
      [cut, latest, span, base_span, base_label, opt, symbols, result, pprof,
       addresses = addresses_, query = req.query]() mutable {
        try {
          result->snap = cut ? std::make_shared<const Snapshot>(std::move(*cut).finish()) : latest;
          if (auto error = http::parse_flame_filter(query, result->snap->keys, opt.filter)) {
            result->status = 400;
            result->body = one_line(*error);
            return;
          }
          const WindowHistory::Snap view = span_profile(span, result->snap);
          if (pprof) {
            result->body = view_pprof(*view, opt.filter, symbols.get(), addresses);
            result->status = 200;
            return;
          }
          const FrameNames names(*view, symbols.get());
          if (base_label.empty()) {
            result->body = http::flame_json(*view, names, opt);
          } else {
            const WindowHistory::Snap base_view = span_profile(base_span, result->snap);
            const FrameNames base_names(*base_view, symbols.get());
            const http::FlameJsonBase base{*base_view, base_names, base_label, base_span.seconds};
            result->body = http::flame_json(*view, names, opt, &base);
          }
          result->status = 200;
        } catch (const std::exception& e) {
          result->body = e.what();
        }
      },
      [this, result, cut, now, respond, lease, pprof, window] {
        if (cut && result->snap) {
          latest_ = result->snap;
          latest_at_ = now;
        }
        http::Response r = result->status == 200
                               ? http::Response{}
                               : http::error_response(result->status, result->body);
        if (result->status == 200) {
          r.content_type = pprof ? "application/octet-stream" : "application/json";
          if (pprof)
            r.headers.emplace_back(
                "Content-Disposition",
                std::string("attachment; filename=\"stackmapd-") + window->param + ".pb.gz\"");
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

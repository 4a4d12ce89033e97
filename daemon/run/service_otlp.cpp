// SPDX-License-Identifier: GPL-2.0
// The OpenTelemetry push (otlp-endpoint): every otlp-interval the loop takes
// a cut and posts it to the sender (otlp_sender.h), whose thread makes the
// interval's profile (what the table gained since the last push) and sends it.
#include <spdlog/spdlog.h>

#include <chrono>

#include "daemon/export/otlp.h"
#include "daemon/export/pprof.h"
#include "daemon/run/service_impl.h"
#include "daemon/sys/host_name.h"
#include "daemon/sys/wall_clock.h"

namespace stackmapd {

namespace {

EventLoop::Clock::duration seconds(double s) {
  return std::chrono::duration_cast<EventLoop::Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

// At start and after each reload: a new endpoint or timeout gets a new
// sender (the old one's queue is dropped, its request under way cancelled);
// a new interval only moves the timer.
void Service::configure_otlp() {
  if (config_.otlp_endpoint == otlp_endpoint_ && config_.otlp_timeout == otlp_timeout_) {
    if (otlp_timer_ && config_.otlp_interval != otlp_interval_)
      loop_.set_period(otlp_timer_, seconds(config_.otlp_interval));
    otlp_interval_ = config_.otlp_interval;
    return;
  }
  if (otlp_timer_) loop_.cancel(otlp_timer_);
  otlp_timer_ = 0;
  otlp_.reset();
  otlp_endpoint_ = config_.otlp_endpoint;
  otlp_interval_ = config_.otlp_interval;
  otlp_timeout_ = config_.otlp_timeout;
  if (otlp_endpoint_.empty()) return;
  OtlpSender::Options opt;
  opt.url = HttpUrl::parse(otlp_endpoint_, "otlp-endpoint");
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(otlp_timeout_));
  opt.timeouts = {timeout, timeout, timeout};
  otlp_ = std::make_unique<OtlpSender>(opt);
  // The first push holds what the table gained since now.
  if (!otlp_push_) {
    otlp_push_ = std::make_shared<OtlpPush>();
    otlp_push_->last_nanos = realtime_nanos();
  }
  otlp_timer_ = loop_.every(seconds(otlp_interval_), [this] { push_otlp(); });
  spdlog::info("pushing OpenTelemetry profiles to {} every {} s", opt.url.str(), otlp_interval_);
}

// The cut on the loop (it needs the ring); the rest on the sender's thread.
// Jobs run one at a time there, so `push` is theirs alone.
void Service::push_otlp() {
  otlp_->post([cut = cut(), ksyms = ksyms_, push = otlp_push_,
               resources = parse_otlp_resources(config_.otlp_resources)]() mutable {
    const int64_t now = realtime_nanos();
    Snapshot snap = std::move(cut).finish();
    OtlpOptions opt;
    opt.host_name = host_name();
    opt.resources = resources;
    opt.time_nanos = push->last_nanos;
    opt.duration_nanos = now - push->last_nanos;
    std::vector<std::string> requests;
    if (push->last) {
      const Snapshot delta = delta_snapshot(*push->last, snap);
      requests = encode_otlp(delta, FrameNames(delta, ksyms.get()), opt);
    } else {
      requests = encode_otlp(snap, FrameNames(snap, ksyms.get()), opt);
    }
    push->last = std::move(snap);
    push->last_nanos = now;
    return requests;
  });
}

}  // namespace stackmapd

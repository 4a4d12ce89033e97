// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/otlp_sender.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

namespace stackmapd {

namespace {

// A Retry-After longer than this is taken as this: a receiver's mistake must
// not stop the push for hours.
constexpr std::chrono::seconds kMaxRetryAfter{300};

}  // namespace

OtlpSender::OtlpSender(Options opt)
    : opt_(std::move(opt)), cancel_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { work(); });
}

OtlpSender::~OtlpSender() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  if (cancel_ && write(cancel_.get(), &one, sizeof(one)) < 0) {
    // the eventfd cannot be full: its counter is written once
  }
  wake_.notify_all();
  thread_.join();
}

void OtlpSender::post(Job job) {
  {
    std::lock_guard lock(mu_);
    job_ = std::move(job);
  }
  wake_.notify_all();
}

http::OtlpCounters OtlpSender::counters() const {
  static constexpr const char* kNames[kResults] = {
      "ok", "server_error", "throttled", "rejected", "timeout", "network_error", "given_up"};
  http::OtlpCounters c;
  for (int r = 0; r < kResults; ++r)
    c.requests.emplace_back(kNames[r], results_[r].load(std::memory_order_relaxed));
  c.queue_dropped = queue_dropped_.load(std::memory_order_relaxed);
  c.sent_bytes = sent_bytes_.load(std::memory_order_relaxed);
  c.queued = queued_.load(std::memory_order_relaxed);
  return c;
}

void OtlpSender::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || job_ || !queue_.empty(); });
    if (stopping_) return;
    if (job_) run_job(lock);
    else send_front(lock);
  }
}

// The job runs unlocked (it encodes a whole snapshot); its requests join
// the queue, which drops its oldest past max_queue.
void OtlpSender::run_job(std::unique_lock<std::mutex>& lock) {
  Job job = std::move(job_);
  job_ = nullptr;
  lock.unlock();
  std::vector<std::string> requests;
  try {
    requests = job();
  } catch (const std::exception& e) {
    spdlog::warn("OpenTelemetry push: the profile was not made: {}", e.what());
  }
  lock.lock();
  for (std::string& r : requests) {
    if (queue_.size() >= opt_.max_queue) {
      queue_.pop_front();
      queue_dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    queue_.push_back(std::move(r));
  }
  queued_.store(queue_.size(), std::memory_order_relaxed);
}

void OtlpSender::send_front(std::unique_lock<std::mutex>& lock) {
  std::string body = std::move(queue_.front());
  queue_.pop_front();
  queued_.store(queue_.size(), std::memory_order_relaxed);
  std::minstd_rand jitter(std::random_device{}());
  auto backoff = opt_.backoff_first;
  for (int attempt = 1;; ++attempt) {
    lock.unlock();
    const HttpPostResult r =
        http_post(opt_.url, "application/x-protobuf", body, opt_.timeouts, cancel_.get());
    lock.lock();
    if (stopping_) return;
    Result result = kNetworkError;
    if (r.status >= 200 && r.status < 300) result = kOk;
    else if (r.status == 429) result = kThrottled;
    else if (r.status >= 500) result = kServerError;
    else if (r.status) result = kRejected;
    else if (r.timed_out) result = kTimeout;
    count(result);
    const std::string what = r.status ? "HTTP " + std::to_string(r.status) : r.error;
    if (result == kOk) {
      sent_bytes_.fetch_add(body.size(), std::memory_order_relaxed);
      if (failing_) spdlog::info("OpenTelemetry push to {} works again", opt_.url.str());
      failing_ = false;
      return;
    }
    // Another 4xx will say the same again: the request is dropped.
    if (result == kRejected) {
      if (!rejected_said_[r.status])
        spdlog::error(
            "OpenTelemetry push to {} answered {}: request dropped, not retried (check the "
            "endpoint's path, /v1development/profiles, and the receiver)",
            opt_.url.str(), what);
      rejected_said_[r.status] = true;
      return;
    }
    if (attempt >= opt_.max_attempts) {
      count(kGivenUp);
      spdlog::warn("OpenTelemetry push to {}: request dropped after {} attempts, the last: {}",
                   opt_.url.str(), attempt, what);
      return;
    }
    if (!failing_)
      spdlog::warn("OpenTelemetry push to {} failed ({}): retrying with backoff", opt_.url.str(),
                   what);
    failing_ = true;
    // Equal jitter: half the backoff, plus up to the other half at random.
    const auto half = backoff / 2;
    auto wait = half + std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(
                           0, std::max<int64_t>(half.count(), 0))(jitter));
    if (r.retry_after_s)
      wait = std::max<std::chrono::milliseconds>(
          wait,
          std::min<std::chrono::seconds>(std::chrono::seconds(*r.retry_after_s), kMaxRetryAfter));
    backoff = std::min(backoff * 2, opt_.backoff_max);
    // A job that comes meanwhile is encoded now, not after the wait.
    const auto until = std::chrono::steady_clock::now() + wait;
    while (wake_.wait_until(lock, until, [this] { return stopping_ || bool(job_); })) {
      if (stopping_) return;
      run_job(lock);
    }
  }
}

}  // namespace stackmapd

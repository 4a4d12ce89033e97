// SPDX-License-Identifier: GPL-2.0
// The OpenTelemetry profiles push (otlp-endpoint): one thread of its own,
// apart from the ring-draining loop and the HTTP server, which only post
// to it and read its counters, never waiting on the network.
//
//   loop: every otlp-interval, post(job)  (the job holds the cut)
//   this thread: run the job (finish the snapshot, encode: daemon/export/otlp.h)
//     -> bounded queue of requests (full: the oldest dropped and counted)
//     -> HTTP POST each (daemon/sys/http_post.h), in order; 5xx, 429, a
//        timeout or a reset retried with exponential backoff and jitter, at
//        least Retry-After; any other 4xx dropped at once (said once per status).
// At most one job waits: a newer one replaces it (its delta covers both).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/http/metrics.h"
#include "daemon/sys/http_post.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class OtlpSender {
 public:
  struct Options {
    HttpUrl url;
    HttpTimeouts timeouts;
    size_t max_queue = 16;  // requests of up to 4 MiB each
    int max_attempts = 8;   // then the request is given up
    std::chrono::milliseconds backoff_first{500}, backoff_max{30000};
  };
  // The requests a job makes; its exception is logged and the job dropped.
  using Job = std::function<std::vector<std::string>()>;

  explicit OtlpSender(Options opt);
  ~OtlpSender();  // prompt: a request under way is cancelled
  OtlpSender(const OtlpSender&) = delete;
  OtlpSender& operator=(const OtlpSender&) = delete;

  void post(Job job);
  http::OtlpCounters counters() const;
  const HttpUrl& url() const { return opt_.url; }

 private:
  enum Result {
    kOk,
    kServerError,
    kThrottled,
    kRejected,
    kTimeout,
    kNetworkError,
    kGivenUp,
    kResults
  };
  void work();
  void run_job(std::unique_lock<std::mutex>& lock);
  // Sends the queue's front until it is taken, rejected or given up.
  void send_front(std::unique_lock<std::mutex>& lock);
  void count(Result r) { results_[r].fetch_add(1, std::memory_order_relaxed); }

  const Options opt_;
  UniqueFd cancel_;  // an eventfd: readable once stopping, aborts a request under way
  mutable std::mutex mu_;
  std::condition_variable wake_;  // a job, or stopping
  Job job_;
  std::deque<std::string> queue_;
  bool stopping_ = false;
  std::map<int, bool> rejected_said_;  // statuses said once
  bool failing_ = false;               // a retried failure said, until a request goes through
  std::atomic<uint64_t> results_[kResults] = {};
  std::atomic<uint64_t> queue_dropped_{0}, sent_bytes_{0}, queued_{0};
  std::thread thread_;
};

}  // namespace stackmapd

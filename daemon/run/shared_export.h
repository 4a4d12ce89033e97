// SPDX-License-Identifier: GPL-2.0
// One export body (the whole JSON) built once and shared by every request
// that asks for it meanwhile, so that a burst of requests costs the loop one
// snapshot copy and the worker one build, not one of each per request:
//   - a body younger than fresh_for (from its snapshot) is served as it is;
//   - otherwise the first request takes a snapshot on the loop (prepare) and
//     hands the formatting to the worker (daemon/sys/task_runner.h); requests
//     that arrive while it builds wait for that same body.
// How many may wait is the caller's bound (HttpEndpoints::kMaxJsonInFlight).
// The body is immutable and shared: the HTTP server sends it from this one
// buffer to every client (http::Response::shared_body).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/sys/event_loop.h"
#include "daemon/sys/task_runner.h"

namespace stackmapd {

class SharedExport {
 public:
  using Body = std::shared_ptr<const std::string>;
  using Build = std::function<std::string()>;  // runs on the worker
  // On the loop: takes what the build needs (a snapshot) into the Build.
  using Prepare = std::function<Build()>;
  // On the loop: the body, or null and why not.
  using Ready = std::function<void(Body body, const std::string& error)>;
  SharedExport(TaskRunner& worker, Prepare prepare, std::chrono::milliseconds fresh_for);
  SharedExport(const SharedExport&) = delete;
  SharedExport& operator=(const SharedExport&) = delete;

  // Calls ready() now or once the body is built.
  void get(Ready ready);

  uint64_t builds() const { return builds_; }  // started so far
  size_t waiting() const { return waiting_.size(); }

 private:
  void finish(Body body, const std::string& error);

  TaskRunner& worker_;
  Prepare prepare_;
  std::chrono::milliseconds fresh_for_;
  Body body_;                           // the last one built
  EventLoop::Clock::time_point taken_;  // its snapshot's time
  bool building_ = false;
  std::vector<Ready> waiting_;
  uint64_t builds_ = 0;
};

}  // namespace stackmapd

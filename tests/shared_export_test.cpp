// SPDX-License-Identifier: GPL-2.0
// The worker beside the loop (daemon/sys/task_runner.h) and the export built
// once for a burst of requests (daemon/run/shared_export.h), under
// ThreadSanitizer: the loop keeps turning (its timers fire) while the worker
// builds, 32 requests share one build and one buffer, a failed build answers
// every waiter, and a worker torn down mid-build leaves nothing running.
#include "daemon/run/shared_export.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "daemon/sys/task_runner.h"

namespace stackmapd {
namespace {

using namespace std::chrono_literals;
using Clock = EventLoop::Clock;

// A build that takes `d` on the worker, made from a "snapshot" taken on the loop.
SharedExport::Prepare slow_build(std::chrono::milliseconds d, int* snapshots) {
  return [d, snapshots] {
    int n = ++*snapshots;  // on the loop
    return [d, n] {
      std::this_thread::sleep_for(d);
      return std::string(1 << 20, static_cast<char>('a' + n % 26));
    };
  };
}

void turn_until(EventLoop& loop, const std::function<bool()>& done, std::chrono::seconds limit) {
  auto end = Clock::now() + limit;
  while (!done() && Clock::now() < end) loop.run_once(10ms);
}

TEST(SharedExport, BurstSharesOneBuildAndTheLoopKeepsTurning) {
  EventLoop loop;
  TaskRunner worker(TaskRunner::Options("test-worker"), &loop);
  int snapshots = 0;
  SharedExport json(worker, slow_build(600ms, &snapshots), 5s);
  int ticks = 0;
  loop.every(20ms, [&] { ++ticks; });  // the drain timer's stand-in
  std::vector<SharedExport::Body> got;
  for (int i = 0; i < 32; ++i)
    json.get([&](SharedExport::Body b, const std::string&) { got.push_back(b); });
  EXPECT_EQ(json.waiting(), 32u);
  turn_until(
      loop, [&] { return got.size() == 32; }, 20s);
  ASSERT_EQ(got.size(), 32u);
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(json.builds(), 1u);
  for (const auto& b : got) EXPECT_EQ(b.get(), got[0].get()) << "one buffer for all";
  EXPECT_EQ(got[0]->size(), 1u << 20);
  // 600 ms of building at one tick per 20 ms: the loop was free (generous bound).
  EXPECT_GE(ticks, 10) << "the loop stalled while the worker built";
  // Fresh: served at once, no new build.
  SharedExport::Body again;
  json.get([&](SharedExport::Body b, const std::string&) { again = b; });
  EXPECT_EQ(again.get(), got[0].get());
  EXPECT_EQ(json.builds(), 1u);
}

TEST(SharedExport, StaleBodyIsRebuilt) {
  EventLoop loop;
  TaskRunner worker(TaskRunner::Options("test-worker"), &loop);
  int snapshots = 0;
  SharedExport json(worker, slow_build(50ms, &snapshots), 0ms);
  int answered = 0;
  auto count = [&](SharedExport::Body b, const std::string&) { answered += b ? 1 : 0; };
  for (int i = 0; i < 3; ++i) json.get(count);
  turn_until(
      loop, [&] { return answered == 3; }, 10s);
  EXPECT_EQ(answered, 3);
  json.get(count);
  turn_until(
      loop, [&] { return answered == 4; }, 10s);
  EXPECT_EQ(json.builds(), 2u) << "fresh_for 0: every request after a build starts one";
}

TEST(SharedExport, FailedBuildAnswersEveryWaiter) {
  EventLoop loop;
  TaskRunner worker(TaskRunner::Options("test-worker"), &loop);
  SharedExport json(
      worker,
      [] { return SharedExport::Build([]() -> std::string { throw std::runtime_error("no"); }); },
      {});
  std::vector<std::string> errors;
  for (int i = 0; i < 3; ++i)
    json.get([&](SharedExport::Body b, const std::string& e) {
      EXPECT_FALSE(b);
      errors.push_back(e);
    });
  turn_until(
      loop, [&] { return errors.size() == 3; }, 10s);
  EXPECT_EQ(errors, std::vector<std::string>(3, "no"));
  // A failure in prepare (on the loop) is answered at once.
  SharedExport bad(
      worker, []() -> SharedExport::Build { throw std::runtime_error("drain"); }, 1s);
  std::string said;
  bad.get([&](SharedExport::Body, const std::string& e) { said = e; });
  EXPECT_EQ(said, "drain");
}

TEST(Background, TornDownMidBuildRunsNoLateDone) {
  EventLoop loop;
  std::atomic<bool> started{false};
  bool done = false;
  {
    TaskRunner worker(TaskRunner::Options("test-worker"), &loop);
    worker.post(
        [&] {
          started = true;
          std::this_thread::sleep_for(200ms);
        },
        [&] { done = true; });
    worker.post([] {}, [&] { done = true; });
    while (!started) std::this_thread::sleep_for(1ms);
  }  // joins the running job, drops the queued one
  loop.run_once(20ms);
  EXPECT_FALSE(done);
  EXPECT_EQ(loop.watches(), 0u);
}

}  // namespace
}  // namespace stackmapd

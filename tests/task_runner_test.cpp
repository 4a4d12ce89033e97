// SPDX-License-Identifier: GPL-2.0
// The one worker primitive (daemon/sys/task_runner.h): tasks run off the
// caller's thread in post order, replies come back on the loop's thread, a
// full queue refuses or drops the oldest (counted, footprints too), stop()
// drops what waits and no reply runs after it, the idle hook runs when idle,
// and no signal reaches the worker.
#include "daemon/sys/task_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace stackmapd {
namespace {

using namespace std::chrono_literals;

// Holds the worker inside a task until released.
struct Gate {
  std::promise<void> release;
  std::shared_future<void> open = release.get_future().share();
  std::atomic<bool> entered{false};
  TaskRunner::Task task() {
    return [this] {
      entered = true;
      open.wait();
    };
  }
  void wait_entered() {
    while (!entered) std::this_thread::sleep_for(1ms);
  }
};

TEST(TaskRunner, RunsTasksInPostOrderOffTheCallersThread) {
  TaskRunner r(TaskRunner::Options("test-order"));
  std::vector<int> ran;
  std::thread::id where;
  for (int i = 0; i < 100; i++)
    ASSERT_TRUE(r.post([&, i] {
      ran.push_back(i);
      where = std::this_thread::get_id();
    }));
  r.wait_idle();
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; i++) EXPECT_EQ(ran[i], i);
  EXPECT_NE(where, std::this_thread::get_id());
  EXPECT_EQ(r.counts().run, 100u);
  EXPECT_FALSE(r.busy());
}

TEST(TaskRunner, RepliesRunOnTheLoopsThreadAfterTheirTask) {
  EventLoop loop;
  TaskRunner r(TaskRunner::Options("test-reply"), &loop);
  std::atomic<int> value{0};
  int seen = -1;
  std::thread::id replied_on;
  r.post([&] { value = 42; },
         [&] {
           seen = value;
           replied_on = std::this_thread::get_id();
           loop.stop();
         });
  const auto deadline = EventLoop::Clock::now() + 5s;
  while (!loop.stopped() && EventLoop::Clock::now() < deadline) loop.run_once(100ms);
  EXPECT_EQ(seen, 42);
  EXPECT_EQ(replied_on, std::this_thread::get_id());
}

TEST(TaskRunner, AReplyNeedsALoop) {
  TaskRunner r(TaskRunner::Options("test-noloop"));
  EXPECT_THROW(r.post([] {}, [] {}), std::exception);
}

TEST(TaskRunner, AFullQueueRefusesAndCounts) {
  TaskRunner r(TaskRunner::Options("test-refuse").at_most(2));
  Gate gate;
  ASSERT_TRUE(r.post(gate.task()));
  gate.wait_entered();
  std::vector<int> ran;
  EXPECT_TRUE(r.post([&] { ran.push_back(1); }, 100));
  EXPECT_TRUE(r.post([&] { ran.push_back(2); }, 50));
  EXPECT_FALSE(r.post([&] { ran.push_back(3); }, 1000));
  TaskRunner::Counts c = r.counts();
  EXPECT_EQ(c.waiting, 2u);
  EXPECT_EQ(c.waiting_bytes, 150u);
  EXPECT_EQ(c.dropped, 1u);
  gate.release.set_value();
  r.wait_idle();
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  c = r.counts();
  EXPECT_EQ(c.waiting_bytes, 0u);
  EXPECT_EQ(c.peak_bytes, 150u);
}

TEST(TaskRunner, DropOldestKeepsTheNewest) {
  TaskRunner r(TaskRunner::Options("test-newest").at_most(1, TaskRunner::Full::drop_oldest));
  Gate gate;
  ASSERT_TRUE(r.post(gate.task()));
  gate.wait_entered();
  std::vector<int> ran;
  EXPECT_TRUE(r.post([&] { ran.push_back(1); }));
  EXPECT_TRUE(r.post([&] { ran.push_back(2); }));
  EXPECT_TRUE(r.post([&] { ran.push_back(3); }));
  EXPECT_EQ(r.counts().dropped, 2u);
  gate.release.set_value();
  r.wait_idle();
  EXPECT_EQ(ran, (std::vector<int>{3}));
}

TEST(TaskRunner, StopFinishesTheRunningTaskAndDropsTheRest) {
  EventLoop loop;
  auto r = std::make_unique<TaskRunner>(TaskRunner::Options("test-stop"), &loop);
  Gate gate;
  std::atomic<bool> finished{false};
  bool replied = false;
  r->post(
      [&] {
        gate.task()();
        finished = true;
      },
      [&] { replied = true; });
  gate.wait_entered();
  std::atomic<bool> later{false};
  r->post([&] { later = true; });
  std::thread release([&] {
    std::this_thread::sleep_for(50ms);
    gate.release.set_value();
  });
  r->stop();
  release.join();
  EXPECT_TRUE(finished);
  EXPECT_FALSE(later);
  EXPECT_FALSE(r->post([] {}));  // stopped: refused
  loop.run_once(10ms);
  EXPECT_FALSE(replied);  // no reply after stop
  r.reset();
}

TEST(TaskRunner, TheIdleHookRunsWhenNothingComes) {
  std::atomic<int> idle{0};
  TaskRunner r(TaskRunner::Options("test-idle").when_idle(20ms, [&] { idle++; }));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (idle < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_GE(idle, 2);
}

TEST(TaskRunner, ItsThreadIsNamedAndBlocksEverySignal) {
  TaskRunner r(TaskRunner::Options("test-signals"));
  std::promise<bool> blocked;
  std::promise<std::string> name;
  r.post([&] {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    blocked.set_value(sigismember(&now, SIGHUP) == 1 && sigismember(&now, SIGTERM) == 1);
    char buf[16] = {};
    prctl(PR_GET_NAME, buf);
    name.set_value(buf);
  });
  EXPECT_TRUE(blocked.get_future().get());
  EXPECT_EQ(name.get_future().get(), "test-signals");
  sigset_t mine;
  pthread_sigmask(SIG_BLOCK, nullptr, &mine);
  EXPECT_EQ(sigismember(&mine, SIGUSR2), 0);  // the caller's mask is its own
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The service's export worker (daemon/run/export_worker.h): jobs run off the
// caller's thread, a newer post replaces the one waiting, wait_idle() waits
// for both, failures come back once, and no signal reaches its thread.
#include "daemon/run/export_worker.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

namespace stackmapd {
namespace {

using namespace std::chrono_literals;

TEST(ExportWorker, RunsJobsOffTheCallersThread) {
  ExportWorker w;
  std::promise<std::thread::id> ran;
  w.post([&] { ran.set_value(std::this_thread::get_id()); });
  w.wait_idle();
  EXPECT_NE(ran.get_future().get(), std::this_thread::get_id());
  EXPECT_FALSE(w.busy());
  EXPECT_EQ(w.take_outcome(), std::string());
  EXPECT_EQ(w.take_outcome(), std::nullopt);  // said once
}

TEST(ExportWorker, ANewerPostReplacesTheOneWaiting) {
  ExportWorker w;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> started{false};
  std::vector<int> ran;  // written by the worker, read after wait_idle()
  w.post([&] {
    started = true;
    gate.wait();
    ran.push_back(1);
  });
  while (!started) std::this_thread::sleep_for(1ms);
  w.post([&] { ran.push_back(2); });
  w.post([&] { ran.push_back(3); });
  EXPECT_TRUE(w.busy());
  release.set_value();
  w.wait_idle();
  EXPECT_EQ(ran, (std::vector<int>{1, 3}));
}

TEST(ExportWorker, AFailureIsTheOutcome) {
  ExportWorker w;
  w.post([] { throw std::runtime_error("disk full"); });
  w.wait_idle();
  EXPECT_EQ(w.take_outcome(), std::string("disk full"));
  w.post([] {});
  w.wait_idle();
  EXPECT_EQ(w.take_outcome(), std::string());
}

TEST(ExportWorker, ItsThreadBlocksEverySignal) {
  ExportWorker w;
  std::promise<bool> hup_blocked;
  w.post([&] {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    hup_blocked.set_value(sigismember(&now, SIGHUP) == 1 && sigismember(&now, SIGTERM) == 1);
  });
  EXPECT_TRUE(hup_blocked.get_future().get());
  // The caller's mask is its own again.
  sigset_t mine;
  pthread_sigmask(SIG_BLOCK, nullptr, &mine);
  EXPECT_EQ(sigismember(&mine, SIGUSR2), 0);
}

}  // namespace
}  // namespace stackmapd

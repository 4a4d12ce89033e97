// SPDX-License-Identifier: GPL-2.0
// The shared event loop (daemon/sys/event_loop.h), its signalfd helper
// (daemon/sys/signals.h) and the foreground loop both backends run on
// (daemon/run/foreground.h), without BPF: a fake backend stands in.
#include "daemon/sys/event_loop.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "daemon/run/foreground.h"
#include "daemon/sys/signals.h"

namespace stackmapd {
namespace {

using namespace std::chrono_literals;
using Clock = EventLoop::Clock;

bool blocked(int sig) {
  sigset_t now;
  sigprocmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

TEST(EventLoop, TimersFireInOrderAndPeriodically) {
  EventLoop loop;
  std::vector<int> seen;
  loop.at(Clock::now() + 30ms, [&] { seen.push_back(2); });
  loop.at(Clock::now() + 10ms, [&] { seen.push_back(1); });
  int ticks = 0;
  loop.every(5ms, [&] { ++ticks; });
  loop.at(Clock::now() + 60ms, [&] { loop.stop(); });
  auto start = Clock::now();
  loop.run();
  EXPECT_GE(Clock::now() - start, 60ms);
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  EXPECT_GE(ticks, 5);
  EXPECT_EQ(loop.timers(), 1u);  // the periodic one is left
}

TEST(EventLoop, HandlersMayRemoveThemselvesAndOthers) {
  EventLoop loop;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(write(p[1], "x", 1), 1);
  int calls = 0;
  EventLoop::Id other = 0;
  EventLoop::Id self = 0;
  self = loop.watch(p[0], POLLIN, [&](short) {
    ++calls;
    loop.unwatch(self);
    loop.unwatch(other);
  });
  other = loop.watch(p[0], POLLIN, [&](short) { ADD_FAILURE() << "removed, still called"; });
  EventLoop::Id timer = 0;
  timer = loop.every(1ms, [&] { loop.cancel(timer); });
  loop.run_once(50ms);
  loop.run_once(5ms);
  loop.run_once(5ms);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(loop.watches(), 0u);
  EXPECT_EQ(loop.timers(), 0u);
  close(p[0]);
  close(p[1]);
}

TEST(EventLoop, SignalTakenBeforeItArrivesIsHandledInTheLoop) {
  {
    EventLoop loop;
    int got = 0;
    loop.on_signal(SIGUSR2, [&](int sig) { got = sig; });
    EXPECT_TRUE(blocked(SIGUSR2));
    kill(getpid(), SIGUSR2);  // would end the test unless taken
    loop.run_once(1s);
    EXPECT_EQ(got, SIGUSR2);
  }
  EXPECT_FALSE(blocked(SIGUSR2)) << "the mask is restored";
}

// A signal arriving again while its handler runs (a SIGHUP storm during a
// slow reload) is handled once in the next turn; the timers run in between.
TEST(EventLoop, SignalStormLeavesTimersTheirTurn) {
  EventLoop loop;
  int handled = 0;
  int ticks = 0;
  loop.on_signal(SIGUSR2, [&](int) {
    if (++handled > 20) return;  // the storm is over: none left pending
    kill(getpid(), SIGUSR2);     // the next one of the storm, already pending
    kill(getpid(), SIGUSR2);     // and another: pending signals coalesce
    std::this_thread::sleep_for(2ms);
  });
  loop.every(1ms, [&] { ++ticks; });
  kill(getpid(), SIGUSR2);
  for (int turn = 1; turn <= 20; ++turn) {
    loop.run_once(1s);
    ASSERT_EQ(handled, turn) << "one handler call per turn";
    ASSERT_GE(ticks, turn) << "the timer ran in every turn";
  }
  loop.run_once(1s);  // the last one
  EXPECT_EQ(handled, 21);
}

TEST(SignalFd, MovesOwnership) {
  SignalFd a({SIGUSR2});
  int fd = a.fd();
  SignalFd b(std::move(a));
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(a.fd(), -1);
  EXPECT_TRUE(blocked(SIGUSR2)) << "a moved-from SignalFd restores nothing";
  kill(getpid(), SIGUSR2);
  auto got = b.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->ssi_signo, static_cast<uint32_t>(SIGUSR2));
  EXPECT_EQ(got->ssi_code, SI_USER) << "sent by a process";
  EXPECT_FALSE(b.next());
}

TEST(EventLoop, TellsASignalAProcessSentFromTheKernels) {
  EventLoop loop;
  std::vector<bool> by_kernel;
  loop.on_signal(SIGUSR2, [&](int, bool k) { by_kernel.push_back(k); });
  kill(getpid(), SIGUSR2);
  loop.run_once(std::chrono::seconds(1));
  EXPECT_EQ(by_kernel, std::vector<bool>{false});
}

struct FakeBackend {
  int drains = 0;
  int resets = 0;
  ForegroundBackend backend() {
    ForegroundBackend b;
    b.drain = [this] { ++drains; };
    b.reset = [this] { ++resets; };
    return b;
  }
};

TEST(Foreground, EndsAtTheDuration) {
  Foreground fg;
  FakeBackend fake;
  auto start = Clock::now();
  fg.run(fake.backend(), 0.3, 20);
  auto took = Clock::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5000ms);  // ends, rather than runs on (a generous bound: the machine is shared)
  EXPECT_GE(fake.drains, 5);
  EXPECT_EQ(fg.loop().timers(), 0u) << "run() leaves no timer behind";
}

TEST(Foreground, StopSignalWhileLoadingEndsTheFirstTurn) {
  for (int sig : {SIGINT, SIGTERM}) {
    Foreground fg;
    kill(getpid(), sig);  // "while the session loads": before run()
    FakeBackend fake;
    auto start = Clock::now();
    fg.run(fake.backend(), 10.0, 20);  // a lost signal would run the whole 10 s
    EXPECT_LT(Clock::now() - start, 5000ms) << strsignal(sig);
  }
}

TEST(Foreground, StopSignalDuringTheRun) {
  for (int sig : {SIGINT, SIGTERM}) {
    Foreground fg;
    std::thread sender([sig] {  // inherits the blocked mask
      std::this_thread::sleep_for(150ms);
      kill(getpid(), sig);
    });
    FakeBackend fake;
    auto start = Clock::now();
    fg.run(fake.backend(), 10.0, 20);
    auto took = Clock::now() - start;
    sender.join();
    EXPECT_GE(took, 150ms) << strsignal(sig);
    EXPECT_LT(took, 1s) << strsignal(sig);
    EXPECT_GE(fake.drains, 3);
  }
}

TEST(Foreground, ResetThatThrowsKeepsTracing) {
  Foreground fg;
  ForegroundBackend b;
  int drains = 0, resets = 0;
  b.drain = [&] { ++drains; };
  b.reset = [&] {
    ++resets;
    throw std::runtime_error("in-flight events never finished");
  };
  kill(getpid(), SIGUSR1);
  auto start = Clock::now();
  fg.run(b, 0.3, 20);
  EXPECT_EQ(resets, 1);
  EXPECT_GE(Clock::now() - start, 300ms) << "the session went on to its duration";
}

TEST(Foreground, ResetOnABackendThatCannotKeepsTracing) {
  Foreground fg;
  ForegroundBackend b;  // the tracefs backend: no reset
  int drains = 0;
  b.drain = [&] { ++drains; };
  kill(getpid(), SIGUSR1);  // the default action would end the process
  auto start = Clock::now();
  fg.run(b, 0.2, 20);
  EXPECT_GE(Clock::now() - start, 200ms);
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The control server (daemon/run/control.h) on the event loop: clients that
// are slow, silent, never read or too many cost the loop no wait. The
// clients are non-blocking sockets in the test's own thread, so any wait in
// the server would show as a turn that takes long.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "daemon/run/control.h"
#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"
#include "tests/loop_client.h"

namespace stackmapd {
namespace {

using namespace std::chrono_literals;
using Clock = EventLoop::Clock;

class Control : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("stackmapd-ctl-" + std::to_string(getpid()) + ".sock"))
                .string();
  }
  void start(ControlServer::Limits limits) {
    server_.emplace(
        loop_, path_, static_cast<gid_t>(-1),
        [this](const std::string& line, const ControlServer::Respond& respond) {
          if (line == "big") return respond({true, std::string(8 << 20, 'x')});
          if (line == "throw") throw Error("it broke: fix it");
          if (line == "later")
            return void(loop_.at(Clock::now() + 50ms, [respond] { respond({true, "later\n"}); }));
          respond({true, "got " + line + "\n"});
        },
        limits);
  }
  UniqueFd connect_client() {
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0));
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << strerror(errno);
    return fd;
  }
  static void say(const UniqueFd& fd, const std::string& s) {
    ASSERT_EQ(send(fd.get(), s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  // Turns the loop until `fd` has its whole reply (end of file) or `limit` passes;
  // fails if any one turn waited on a client. A turn that waits blocks until that client's
  // deadline (2 s in these tests), so 1 s tells the two apart however loaded the machine is.
  std::string reply(const UniqueFd& fd, std::chrono::milliseconds limit = 2000ms) {
    return read_to_end(loop_, fd, limit);
  }
  void turn_for(std::chrono::milliseconds d) { turn_loop_for(loop_, d, 10ms); }

  std::string path_;
  EventLoop loop_;
  std::optional<ControlServer> server_;
};

TEST_F(Control, AnswersOneLine) {
  start({});
  UniqueFd c = connect_client();
  say(c, "stat\n");
  EXPECT_EQ(reply(c), "ok\ngot stat\n");
  EXPECT_EQ(server_->clients(), 0u);
}

// An answer finished elsewhere comes in a later turn; other clients are
// served meanwhile.
TEST_F(Control, AnswersInALaterTurn) {
  start({});
  UniqueFd slow = connect_client();
  say(slow, "later\n");
  UniqueFd quick = connect_client();
  say(quick, "stat\n");
  EXPECT_EQ(reply(quick), "ok\ngot stat\n");
  EXPECT_EQ(reply(slow), "ok\nlater\n");
}

TEST_F(Control, HandlerErrorIsTheReply) {
  start({});
  UniqueFd c = connect_client();
  say(c, "throw\n");
  EXPECT_EQ(reply(c), "error\nit broke: fix it");
}

TEST_F(Control, SlowClientWaitsAloneThenTimesOut) {
  ControlServer::Limits limits;
  limits.request_time = 2000ms;
  start(limits);
  UniqueFd slow = connect_client();
  say(slow, "st");  // and nothing more for now
  UniqueFd silent = connect_client();
  turn_for(50ms);
  UniqueFd quick = connect_client();
  say(quick, "stat\n");
  auto t = Clock::now();
  EXPECT_EQ(reply(quick), "ok\ngot stat\n");
  EXPECT_LT(Clock::now() - t, 1000ms);
  say(slow, "a");  // one byte more: still no line
  std::string r = reply(slow, 4000ms);
  EXPECT_EQ(r, "error\nno request line within 2 s: send one line, such as 'stat'\n");
  EXPECT_EQ(reply(silent, 4000ms), r);
  EXPECT_EQ(server_->clients(), 0u);
}

TEST_F(Control, ClientThatNeverReadsIsDroppedAfterItsDeadline) {
  ControlServer::Limits limits;
  limits.reply_time = 2000ms;
  start(limits);
  UniqueFd lazy = connect_client();
  say(lazy, "big\n");  // 8 MiB it never reads
  turn_for(50ms);
  EXPECT_EQ(server_->clients(), 1u) << "the reply did not fit: it waits for POLLOUT";
  UniqueFd quick = connect_client();
  say(quick, "stat\n");
  EXPECT_EQ(reply(quick), "ok\ngot stat\n");
  turn_for(2500ms);
  EXPECT_EQ(server_->clients(), 0u) << "dropped at its deadline";
}

TEST_F(Control, BigReplyArrivesWhole) {
  start({});
  UniqueFd c = connect_client();
  say(c, "big\n");
  std::string r = reply(c, 5000ms);
  EXPECT_EQ(r.size(), 3u + (8u << 20));
}

TEST_F(Control, RefusesOnlyWhenEverySlotHoldsARequest) {
  ControlServer::Limits limits;
  limits.max_clients = 4;
  limits.max_per_peer = 4;
  start(limits);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(connect_client());
    say(held.back(), "big\n");  // answered, but never read: its slot stays until the deadline
  }
  turn_for(30ms);
  EXPECT_EQ(server_->clients(), 4u);
  UniqueFd extra = connect_client();
  EXPECT_EQ(reply(extra),
            "error\ntoo many control clients at once (4, 4 per user): try again in a moment\n");
  held.clear();  // they hang up: their slots come back
  turn_for(30ms);
  EXPECT_EQ(server_->clients(), 0u);
  UniqueFd next = connect_client();
  say(next, "stat\n");
  EXPECT_EQ(reply(next), "ok\ngot stat\n");
}

// Slowloris: the per-uid cap is reached by clients that never end their line;
// a newcomer of that uid evicts the one waiting longest and is answered.
TEST_F(Control, NewcomerEvictsTheLongestIncomplete) {
  ControlServer::Limits limits;
  limits.max_clients = 8;
  limits.max_per_peer = 4;
  start(limits);
  std::vector<UniqueFd> trickling;
  for (int i = 0; i < 4; ++i) {
    trickling.push_back(connect_client());
    say(trickling.back(), "st");
    turn_for(5ms);
  }
  EXPECT_EQ(server_->clients(), 4u);
  UniqueFd quick = connect_client();
  say(quick, "stat\n");
  EXPECT_EQ(reply(quick), "ok\ngot stat\n");
  EXPECT_EQ(reply(trickling[0], 200ms),
            "error\nno request line yet: a newer client took this slot\n");
  EXPECT_EQ(reply(trickling[1], 50ms), "<no end of file>") << "the others keep their slot";
  EXPECT_EQ(server_->clients(), 3u);
}

TEST_F(Control, RefusesOverlongLine) {
  ControlServer::Limits limits;
  limits.max_line = 16;
  start(limits);
  UniqueFd c = connect_client();
  say(c, std::string(40, 'a'));
  EXPECT_EQ(reply(c),
            "error\nrequest line longer than 16 bytes: send one short line, such as 'stat'\n");
}

// However the bytes arrive: a long line with its newline in the same read is refused too.
TEST_F(Control, RefusesOverlongLineSentWhole) {
  ControlServer::Limits limits;
  limits.max_line = 16;
  start(limits);
  UniqueFd c = connect_client();
  say(c, std::string(40, 'a') + "\n");
  EXPECT_EQ(reply(c),
            "error\nrequest line longer than 16 bytes: send one short line, such as 'stat'\n");
}

TEST_F(Control, EndOfFileBeforeTheLine) {
  start({});
  UniqueFd c = connect_client();
  say(c, "stat");
  shutdown(c.get(), SHUT_WR);
  EXPECT_EQ(reply(c), "error\nno request line received: the connection closed before a newline\n");
}

TEST_F(Control, RequestFromTheClientHelper) {
  start({});
  EXPECT_EQ(control_request(path_ + ".none", "stat"), std::nullopt);
}

}  // namespace
}  // namespace stackmapd

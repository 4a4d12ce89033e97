// SPDX-License-Identifier: GPL-2.0
// The HTTP responder (daemon/http/server.h) on the event loop: slow, silent,
// non-reading and too many clients cost the loop no wait; a late response
// arrives; oversized and non-GET requests get their status. The clients are
// non-blocking sockets in the test's own thread, so any wait in the server
// shows as a turn that takes long.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "daemon/http/server.h"
#include "tests/loop_client.h"

namespace stackmapd::http {
namespace {

using namespace std::chrono_literals;
using Clock = EventLoop::Clock;

class Http : public ::testing::Test {
 protected:
  void start(Server::Limits limits) {
    server_.emplace(
        loop_, ListenAddress::parse("127.0.0.1:0"), static_cast<gid_t>(-1),
        [this](const Request& req, Server::Respond respond) {
          Response r;
          if (req.path == "/big") {
            r.body = std::string(8 << 20, 'x');
          } else if (req.path == "/later") {
            later_ = respond;  // answered by the test
            laters_.push_back(respond);
            return;
          } else {
            r.body = "path " + req.path + "\n";
          }
          respond(r);
        },
        limits);
  }
  UniqueFd connect_client() {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(server_->address().port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
    EXPECT_TRUE(rc == 0 || errno == EINPROGRESS) << strerror(errno);
    turn_for(5ms);
    return fd;
  }
  static void say(const UniqueFd& fd, const std::string& s) {
    ASSERT_EQ(send(fd.get(), s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  // Turns the loop until `fd` has its whole response (end of file); fails if
  // one turn waited on a client (a wait would last a 2 s deadline).
  std::string response(const UniqueFd& fd, std::chrono::milliseconds limit = 2000ms) {
    return read_to_end(loop_, fd, limit);
  }
  static std::string status_line(const std::string& r) { return r.substr(0, r.find("\r\n")); }
  static std::string body(const std::string& r) {
    size_t p = r.find("\r\n\r\n");
    return p == std::string::npos ? "" : r.substr(p + 4);
  }
  void turn_for(std::chrono::milliseconds d) { turn_loop_for(loop_, d, 5ms); }

  EventLoop loop_;
  std::optional<Server> server_;
  Server::Respond later_;
  std::vector<Server::Respond> laters_;  // every /later, in order
};

TEST_F(Http, AnswersGetAndHead) {
  start({});
  UniqueFd c = connect_client();
  say(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r = response(c);
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_NE(r.find("\r\nContent-Length: 14\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_EQ(body(r), "path /metrics\n");
  UniqueFd h = connect_client();
  say(h, "HEAD /metrics HTTP/1.0\r\n\r\n");
  r = response(h);
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_NE(r.find("\r\nContent-Length: 14\r\n"), std::string::npos);
  EXPECT_EQ(body(r), "");
  EXPECT_EQ(server_->connections(), 0u);
}

// /favicon.ico's answer: no body, so neither its length nor its type.
TEST(HttpSerialize, NoContentSaysNoLength) {
  Response r;
  r.status = 204;
  r.body = "ignored";
  const std::string out = serialize(r, false);
  EXPECT_EQ(out.substr(0, out.find("\r\n")), "HTTP/1.1 204 No Content");
  EXPECT_EQ(out.find("\r\nContent-Length:"), std::string::npos) << out;
  EXPECT_EQ(out.find("\r\nContent-Type:"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "\r\n\r\n") << out;
}

TEST_F(Http, RefusesOtherMethodsAndBigRequests) {
  Server::Limits limits;
  limits.max_head = 256;
  start(limits);
  UniqueFd post = connect_client();
  say(post, "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  std::string r = response(post);
  EXPECT_EQ(status_line(r), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_NE(r.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos);
  UniqueFd big = connect_client();
  say(big, "GET / HTTP/1.1\r\nCookie: " + std::string(1000, 'c'));
  EXPECT_EQ(status_line(response(big)), "HTTP/1.1 431 Request Header Fields Too Large");
  UniqueFd body = connect_client();
  say(body, "GET / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789");
  EXPECT_EQ(status_line(response(body)), "HTTP/1.1 413 Content Too Large");
}

TEST_F(Http, SlowClientWaitsAloneThenTimesOut) {
  Server::Limits limits;
  limits.request_time = 2000ms;
  start(limits);
  UniqueFd slow = connect_client();
  say(slow, "GET /metr");  // and nothing more for now
  UniqueFd silent = connect_client();
  turn_for(50ms);
  UniqueFd quick = connect_client();
  say(quick, "GET /q HTTP/1.1\r\n\r\n");
  auto t = Clock::now();
  EXPECT_EQ(body(response(quick)), "path /q\n");
  EXPECT_LT(Clock::now() - t, 1000ms);
  EXPECT_EQ(status_line(response(slow, 4000ms)), "HTTP/1.1 408 Request Timeout");
  EXPECT_EQ(status_line(response(silent, 4000ms)), "HTTP/1.1 408 Request Timeout");
  EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(Http, ClientThatNeverReadsIsDroppedAfterItsDeadline) {
  Server::Limits limits;
  limits.response_time = 2000ms;
  start(limits);
  UniqueFd lazy = connect_client();
  int small = 4096;
  setsockopt(lazy.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  say(lazy, "GET /big HTTP/1.1\r\n\r\n");  // 8 MiB it never reads
  turn_for(50ms);
  EXPECT_EQ(server_->connections(), 1u) << "the response did not fit: it waits for POLLOUT";
  UniqueFd quick = connect_client();
  say(quick, "GET /q HTTP/1.1\r\n\r\n");
  EXPECT_EQ(body(response(quick)), "path /q\n");
  turn_for(2500ms);
  EXPECT_EQ(server_->connections(), 0u) << "dropped at its deadline";
}

TEST_F(Http, RefusesWith503OnlyWhenEverySlotHoldsARequest) {
  Server::Limits limits;
  limits.max_connections = 4;
  start(limits);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(connect_client());
    say(held.back(), "GET /later HTTP/1.1\r\n\r\n");  // complete: waits for its answer
  }
  turn_for(30ms);
  EXPECT_EQ(server_->connections(), 4u);
  UniqueFd extra = connect_client();
  std::string r = response(extra);
  EXPECT_EQ(status_line(r), "HTTP/1.1 503 Service Unavailable");
  EXPECT_NE(r.find("\r\nRetry-After: 1\r\n"), std::string::npos) << r;
  Response late;
  late.body = "late\n";
  for (auto& respond : laters_) respond(late);  // answered: their slots come back
  for (auto& c : held) EXPECT_EQ(body(response(c)), "late\n");
  EXPECT_EQ(server_->connections(), 0u);
  UniqueFd next = connect_client();
  say(next, "GET /q HTTP/1.1\r\n\r\n");
  EXPECT_EQ(body(response(next)), "path /q\n");
}

// Slowloris: clients that never end their head hold every slot; each
// newcomer evicts the one incomplete the longest, so a quick client is served.
TEST_F(Http, NewcomerEvictsTheLongestIncompleteWhenFull) {
  Server::Limits limits;
  limits.max_connections = 4;
  start(limits);
  std::vector<UniqueFd> trickling;
  for (int i = 0; i < 4; ++i) {
    trickling.push_back(connect_client());
    say(trickling.back(), "GET /metr");
    turn_for(5ms);
  }
  EXPECT_EQ(server_->connections(), 4u);
  UniqueFd quick = connect_client();
  say(quick, "GET /q HTTP/1.1\r\n\r\n");
  EXPECT_EQ(body(response(quick)), "path /q\n");
  EXPECT_EQ(status_line(response(trickling[0], 200ms)), "HTTP/1.1 408 Request Timeout")
      << "the oldest incomplete one made room";
  EXPECT_EQ(response(trickling[1], 50ms), "<no end of file>") << "the others keep their slot";
  EXPECT_EQ(server_->connections(), 3u);
}

// One peer (here every client: 127.0.0.1) holds at most max_per_peer slots.
TEST_F(Http, OnePeerHoldsAtMostItsCap) {
  Server::Limits limits;
  limits.max_connections = 8;
  limits.max_per_peer = 2;
  start(limits);
  std::vector<UniqueFd> trickling;
  for (int i = 0; i < 5; ++i) {
    trickling.push_back(connect_client());
    say(trickling.back(), "GET /metr");
    turn_for(5ms);
  }
  EXPECT_EQ(server_->connections(), 2u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(status_line(response(trickling[i], 200ms)), "HTTP/1.1 408 Request Timeout") << i;
}

// A shared body goes whole to each client, from the one buffer.
TEST_F(Http, SharedBodyArrivesWholeAtEachClient) {
  auto shared = std::make_shared<const std::string>(std::string(4 << 20, 'y'));
  server_.emplace(
      loop_, ListenAddress::parse("127.0.0.1:0"), static_cast<gid_t>(-1),
      [shared](const Request&, Server::Respond respond) {
        Response r;
        r.shared_body = shared;
        respond(r);
      },
      Server::Limits{});
  UniqueFd a = connect_client(), b = connect_client(), h = connect_client();
  say(a, "GET / HTTP/1.1\r\n\r\n");
  say(b, "GET / HTTP/1.1\r\n\r\n");
  say(h, "HEAD / HTTP/1.1\r\n\r\n");
  std::string ra = response(a, 5000ms), rb = response(b, 5000ms), rh = response(h);
  EXPECT_EQ(body(ra), *shared);
  EXPECT_EQ(body(rb), *shared);
  EXPECT_NE(rh.find("\r\nContent-Length: 4194304\r\n"), std::string::npos) << rh;
  EXPECT_EQ(body(rh), "");
}

TEST_F(Http, LateResponseAndOneAfterTheServerWentAway) {
  start({});
  UniqueFd c = connect_client();
  say(c, "GET /later HTTP/1.1\r\n\r\n");
  turn_for(30ms);
  ASSERT_TRUE(later_);
  EXPECT_EQ(server_->connections(), 1u);
  Response r;
  r.body = "late\n";
  later_(r);
  EXPECT_EQ(body(response(c)), "late\n");

  UniqueFd d = connect_client();
  say(d, "GET /later HTTP/1.1\r\n\r\n");
  turn_for(30ms);
  server_.reset();
  later_(r);  // nothing to answer: no crash
}

}  // namespace
}  // namespace stackmapd::http

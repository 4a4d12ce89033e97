// SPDX-License-Identifier: GPL-2.0
// The stream server under both protocols (daemon/sys/stream_server.h), on
// what neither protocol's own tests reach: one reply per connection, a lease
// held until the reply is out, what a client that ends its side first gets,
// and a reply that comes after its connection is gone.
#include "daemon/sys/stream_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "tests/loop_client.h"

namespace stackmapd {
namespace {

using namespace std::chrono_literals;

class Stream : public ::testing::Test {
 protected:
  void SetUp() override {
    address_.unix_path = (std::filesystem::temp_directory_path() /
                          ("stackmapd-stream-" + std::to_string(getpid()) + ".sock"))
                             .string();
  }
  // Every request is held for the test to answer; `cut_short` as given.
  void start(std::string cut_short) {
    StreamServer::Protocol p;
    p.on_input = [this](StreamServer::Key key, std::string_view in) {
      if (in.find('\n') == std::string_view::npos) return;
      server_->await_reply(key);
      keys_.push_back(key);
    };
    p.refused = "refused\n";
    p.evicted = "evicted\n";
    p.timed_out = "timed out\n";
    p.cut_short = std::move(cut_short);
    server_.emplace(loop_, address_, static_cast<gid_t>(-1), ListenPurpose{"a test", "--none"},
                    StreamServer::Limits{4, 4, 2000ms, 2000ms}, std::move(p));
  }
  UniqueFd connect_client() {
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0));
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, address_.unix_path.c_str());
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << strerror(errno);
    return fd;
  }
  static void say(const UniqueFd& fd, const std::string& s) {
    ASSERT_EQ(send(fd.get(), s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  // Turns the loop until `fd` has everything up to its end of file.
  std::string read_all(const UniqueFd& fd, std::chrono::milliseconds limit = 2000ms) {
    return read_to_end(loop_, fd, limit);
  }
  void turn_for(std::chrono::milliseconds d) { turn_loop_for(loop_, d, 5ms); }

  ListenAddress address_;
  EventLoop loop_;
  std::optional<StreamServer> server_;
  std::vector<StreamServer::Key> keys_;  // requests held, in order
};

TEST_F(Stream, OneReplyPerConnectionWithItsBodyAndLease) {
  start("");
  UniqueFd c = connect_client();
  say(c, "x\n");
  turn_for(30ms);
  ASSERT_EQ(keys_.size(), 1u);
  auto body = std::make_shared<const std::string>(std::string(1 << 20, 'b'));
  auto lease = std::make_shared<int>(0);
  server_->reply(keys_[0], "head:", body, lease);
  server_->reply(keys_[0], "second\n");  // not sent: the first reply stands
  const std::string r = read_all(c);
  EXPECT_EQ(r.size(), 5 + body->size()) << "the second reply was sent too";
  EXPECT_TRUE(r.starts_with("head:") && r.compare(5, std::string::npos, *body) == 0);
  EXPECT_EQ(lease.use_count(), 1) << "the lease goes with the connection";
  EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(Stream, ClientThatEndsItsSideFirstGetsCutShortOrNothing) {
  start("cut short\n");
  UniqueFd c = connect_client();
  say(c, "no newline");
  shutdown(c.get(), SHUT_WR);
  EXPECT_EQ(read_all(c), "cut short\n");
  server_.reset();
  start("");
  UniqueFd d = connect_client();
  say(d, "no newline");
  shutdown(d.get(), SHUT_WR);
  EXPECT_EQ(read_all(d), "");
  EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(Stream, ReplyAfterTheConnectionWentIsDropped) {
  start("");
  UniqueFd c = connect_client();
  say(c, "x\n");
  turn_for(30ms);
  ASSERT_EQ(keys_.size(), 1u);
  c.reset();
  UniqueFd d = connect_client();
  say(d, "y\n");
  turn_for(30ms);
  ASSERT_EQ(keys_.size(), 2u);
  server_->reply(keys_[1], "for d\n");
  EXPECT_EQ(read_all(d), "for d\n");
  server_->reply(keys_[1], "again\n");  // its connection is gone: nothing happens
  EXPECT_EQ(server_->connections(), 1u) << "c's slot is held until its reply";
  server_->reply(keys_[0], "for c\n");  // c hung up: sent nowhere, then dropped
  turn_for(30ms);
  EXPECT_EQ(server_->connections(), 0u);
}

// The loop was busy: a client sent its whole request before it was accepted,
// and a trickler came after it into the last slot. The trickler cannot evict
// it as if its request were incomplete.
TEST_F(Stream, RequestSentBeforeAcceptIsNotTakenForATrickler) {
  start("");
  std::vector<UniqueFd> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(connect_client());
    say(held.back(), "x\n");
  }
  turn_for(30ms);
  ASSERT_EQ(keys_.size(), 3u);
  UniqueFd quick = connect_client();
  say(quick, "q\n");
  UniqueFd trickler = connect_client();
  say(trickler, "tr");
  turn_for(30ms);
  EXPECT_EQ(keys_.size(), 4u) << "the quick request was read";
  EXPECT_EQ(read_all(trickler), "refused\n") << "every slot holds a request";
  server_->reply(keys_.back(), "q done\n");
  EXPECT_EQ(read_all(quick), "q done\n");
}

TEST_F(Stream, UnixSocketGoesWithTheServer) {
  start("");
  EXPECT_TRUE(std::filesystem::is_socket(address_.unix_path));
  server_.reset();
  EXPECT_FALSE(std::filesystem::exists(address_.unix_path));
}

}  // namespace
}  // namespace stackmapd

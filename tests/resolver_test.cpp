// SPDX-License-Identifier: GPL-2.0
// The resolver stage (daemon/resolve/): the user stack worker's bounded
// queue, one capture per id, and a stack captured while its process lived
// keeping its symbols after the process exits. A FIFO standing for a
// process's maps file holds the worker in its capture step, where a test
// needs it held.
#include "daemon/resolve/resolver.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <string>

#include "daemon/resolve/user_stacks.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

__attribute__((noinline)) int resolver_test_marker() { return 7; }

// A proc root of our own: pids whose maps file is a FIFO, and links to real
// processes.
class FakeProc {
 public:
  FakeProc() : root_(fs::temp_directory_path() / ("resolver_test." + std::to_string(getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeProc() { fs::remove_all(root_); }
  std::string root() const { return root_.string(); }

  // pid's maps open only when a writer does: the worker waits there.
  std::string fifo(uint32_t pid) {
    fs::create_directories(root_ / std::to_string(pid));
    const fs::path p = root_ / std::to_string(pid) / "maps";
    EXPECT_EQ(mkfifo(p.c_str(), 0600), 0);
    return p.string();
  }
  void link(uint32_t pid) {
    fs::create_directory_symlink("/proc/" + std::to_string(pid), root_ / std::to_string(pid));
  }

 private:
  fs::path root_;
};

// Returns once the worker has opened `fifo`: it is then held in reading it
// until the returned writer closes.
UniqueFd hold_worker_at(const std::string& fifo) {
  for (int i = 0; i < 10000; ++i) {
    const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) return UniqueFd(fd);
    usleep(1000);
  }
  ADD_FAILURE() << "the worker never opened " << fifo;
  return UniqueFd();
}

// User stack id -> its frames, counting the reads.
struct Table {
  std::map<uint32_t, UserStackIps> stacks;
  int reads = 0;
  UserStackCollector::Reader reader() {
    return [this](uint32_t id) -> std::optional<UserStackIps> {
      ++reads;
      auto it = stacks.find(id);
      if (it == stacks.end()) return std::nullopt;
      return it->second;
    };
  }
};

TEST(UserStackCollector, AnIdSeenTwiceIsReadAndQueuedOnce) {
  FakeProc proc;
  Table table;
  table.stacks[5] = {999999, 0, {0x1000}};
  UserStackCollector c(64, table.reader(), proc.root());
  c.see(5);
  c.see(5);
  c.see(70);  // not a user stack id of this table
  EXPECT_EQ(table.reads, 1);
  const UserStackCollector::Mark m = c.mark();
  EXPECT_EQ(m.queued, 1u);
  const UserStackSet set = UserStackCollector::stacks_at(m);
  ASSERT_EQ(set.stacks.size(), 1u);
  EXPECT_EQ(set.stacks.at(5).frames.at(0).addr, 0x1000u);
}

TEST(UserStackCollector, AFullQueueDropsTheStackAndCountsIt) {
  FakeProc proc;
  const std::string held = proc.fifo(1);
  Table table;
  // No frames for the held one: an address its (empty) maps miss would
  // make the worker read them again.
  table.stacks[10] = {1, 0, {}};
  for (uint32_t id = 11; id < 14; ++id) table.stacks[id] = {id, 0, {0x1000}};
  UserStackCollector c(64, table.reader(), proc.root(), 2);
  c.see(10);
  UniqueFd writer = hold_worker_at(held);
  c.see(11);
  c.see(12);
  c.see(13);  // the worker is still at 10's maps: the queue holds 11 and 12
  EXPECT_EQ(c.counts().dropped, 1u);
  const UserStackCollector::Mark m = c.mark();
  writer.reset();
  UserStackCounts counts;
  const UserStackSet set = UserStackCollector::stacks_at(m, &counts);
  EXPECT_EQ(set.stacks.size(), 3u);
  EXPECT_FALSE(set.stacks.count(13)) << "dropped, never resolved";
  EXPECT_EQ(counts.dropped, 1u);
  EXPECT_EQ(counts.gone, 2u) << "11 and 12 name no process";
  c.see(13);
  EXPECT_EQ(table.reads, 4) << "a dropped id is not retried";
}

// The worker captures every queued stack before it symbolizes one: a child
// captured while it lives keeps its symbols though it exits before its
// stack is symbolized, its binary read through the file kept open.
TEST(UserStackCollector, AStackCapturedWhileItsProcessLivedKeepsItsSymbols) {
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // waits for the parent to close its end
    close(go[1]);
    char b;
    (void)!read(go[0], &b, 1);
    _exit(0);
  }
  close(go[0]);
  FakeProc proc;
  const std::string first = proc.fifo(1), last = proc.fifo(2);
  proc.link(child);
  Table table;
  const uint64_t addr = reinterpret_cast<uint64_t>(&resolver_test_marker) + 1;
  table.stacks[1] = {1, 0, {}};
  table.stacks[2] = {static_cast<uint32_t>(child), 0, {addr}};
  table.stacks[3] = {2, 0, {}};
  UserStackCollector c(64, table.reader(), proc.root());
  c.see(1);
  UniqueFd writer = hold_worker_at(first);
  c.see(2);
  c.see(3);
  writer.reset();
  // Held at stack 3's maps: the child's stack is captured, not symbolized.
  writer = hold_worker_at(last);
  close(go[1]);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  ASSERT_FALSE(fs::exists("/proc/" + std::to_string(child) + "/maps")) << "the child is gone";
  const UserStackCollector::Mark m = c.mark();
  writer.reset();
  UserStackCounts counts;
  const UserStackSet set = UserStackCollector::stacks_at(m, &counts);
  ASSERT_TRUE(set.stacks.count(2));
  const UserFrame& f = set.stacks.at(2).frames.at(0);
  ASSERT_GE(f.binary, 0);
  ASSERT_FALSE(f.symbols.empty()) << "symbolized after the process exited";
  EXPECT_NE(f.symbols.back().find("resolver_test_marker()+0x1"), std::string::npos)
      << f.symbols.back();
  EXPECT_EQ(counts.gone, 0u);
}

TEST(Resolver, NamesThreadsAndCountsUnnamedOnes) {
  StringTable strings;
  Resolver r(strings, KeySpec::parse("pid,comm"));
  smt_event_record e = {};
  e.tgid = 42;
  e.name = 3;
  EXPECT_EQ(strings.str(r.key_of(e).comm), "[unnamed]");
  EXPECT_FALSE(r.knows_name(3));
  r.name(3, "worker");
  EXPECT_TRUE(r.knows_name(3));
  const EventKey k = r.key_of(e);
  EXPECT_EQ(strings.str(k.comm), "worker") << "a name record clears the last lookup";
  EXPECT_EQ(k.pid, 42u);
  EXPECT_EQ(r.comm_of(3), "worker");
  EXPECT_EQ(r.user_stacks(), nullptr);
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/command_child.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

std::optional<std::vector<std::string>> split(std::vector<std::string> words, int* left) {
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  int argc = static_cast<int>(argv.size());
  auto command = take_command(argc, argv.data());
  *left = argc;
  return command;
}

TEST(TakeCommand, SplitsAtTheFirstDoubleDash) {
  int left = 0;
  EXPECT_EQ(split({"stackmapd", "--top", "5", "--", "make", "--", "-j2"}, &left),
            (std::vector<std::string>{"make", "--", "-j2"}));
  EXPECT_EQ(left, 3);
  EXPECT_EQ(split({"stackmapd", "--"}, &left), std::vector<std::string>{});
  EXPECT_EQ(left, 1);
  EXPECT_EQ(split({"stackmapd", "--top", "5"}, &left), std::nullopt);
  EXPECT_EQ(left, 3);
}

class FindCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("smt-cmd-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "a");
    fs::create_directories(dir_ / "b");
    old_path_ = getenv("PATH") ? getenv("PATH") : "";
  }
  void TearDown() override {
    setenv("PATH", old_path_.c_str(), 1);
    fs::remove_all(dir_);
  }
  void file(const fs::path& p, mode_t mode) {
    std::ofstream(p) << "#!/bin/sh\nexit 5\n";
    chmod(p.c_str(), mode);
  }
  int status_of(const std::string& name) {
    try {
      find_command(name);
    } catch (const CommandNotRun& e) {
      return e.status();
    }
    return 0;
  }

  fs::path dir_;
  std::string old_path_;
};

TEST_F(FindCommand, SearchesPathAsExecvp) {
  file(dir_ / "a" / "tool", 0644);  // found first, not runnable: passed over
  file(dir_ / "b" / "tool", 0755);
  setenv("PATH", (dir_ / "a").string().append(":").append((dir_ / "b").string()).c_str(), 1);
  EXPECT_EQ(find_command("tool"), (dir_ / "b" / "tool").string());
  EXPECT_EQ(status_of("missing"), 127);
  fs::remove(dir_ / "b" / "tool");
  EXPECT_EQ(status_of("tool"), 126) << "only a file it may not run";
  EXPECT_EQ(status_of((dir_ / "a" / "tool").string()), 126);
  EXPECT_EQ(status_of((dir_ / "a").string()), 126) << "a directory";
  EXPECT_EQ(status_of((dir_ / "nothing").string()), 127);
  EXPECT_EQ(status_of(""), 127);
}

int wait_exit(CommandChild& child) {
  pollfd p = {child.pidfd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1);
  EXPECT_TRUE(child.reap());
  return child.exit_status();
}

TEST(CommandChild, RunsOnlyOnceReleasedAndGivesItsStatus) {
  const fs::path mark = fs::temp_directory_path() / ("smt-cmd-mark-" + std::to_string(getpid()));
  {
    CommandChild held({"sh", "-c", "touch " + mark.string()});
    pollfd p = {held.pidfd(), POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 200), 0) << "it waits for release()";
  }  // never released: ends without running
  EXPECT_FALSE(fs::exists(mark));

  CommandChild seven({"sh", "-c", "exit 7"});
  seven.release();
  EXPECT_EQ(wait_exit(seven), 7);

  CommandChild killed({"sh", "-c", "kill -TERM $$"});
  killed.release();
  EXPECT_EQ(wait_exit(killed), 128 + SIGTERM);

  CommandChild missing({"/nonexistent/cmd"});
  missing.release();
  try {
    wait_exit(missing);
    ADD_FAILURE() << "exec failed: CommandNotRun expected";
  } catch (const CommandNotRun& e) {
    EXPECT_EQ(e.status(), 127);
    EXPECT_STREQ(e.what(), "cannot run '/nonexistent/cmd': No such file or directory");
  }
}

}  // namespace
}  // namespace stackmapd

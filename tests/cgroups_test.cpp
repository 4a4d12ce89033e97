// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/cgroups.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(UnitOfCgroup, FollowsSystemdsCgPathGetUnit) {
  struct Case {
    const char* path;
    const char* unit;
  } cases[] = {
      {"/system.slice/ssh.service", "ssh.service"},
      {"/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope", "user@1000.service"},
      {"/user.slice/user-1000.slice/session-3.scope", "session-3.scope"},
      {"/system.slice/docker-0123abcd.scope", "docker-0123abcd.scope"},
      {"/machine.slice/libpod-abc.scope/container", "libpod-abc.scope"},
      {"/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service"},
      {"/init.scope", "init.scope"},
      {"/system.slice", "system.slice"},
      {"/user.slice/user-1000.slice", "user-1000.slice"},
      {"/user.slice/user-1000.slice/", "user-1000.slice"},
      {"/", "-.slice"},
      {"", "-.slice"},
      {"/docker/abc", ""},
      {"/system.slice/not-a-unit", ""},
      {"/system.slice/x.nosuchtype", ""},
      {"/system.slice/@.service", ""},
      {"/system.slice/foo@.service", ""},
      {"/system.slice/_cpu.service", "cpu.service"},
      {"/system.slice/a b.service", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(unit_of_cgroup(c.path), c.unit) << c.path;
}

// A plain directory tree stands in for the cgroup2 mount: inode numbers work the same.
class CgroupNamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/cgroups_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
    fs::create_directories(root_ / "system.slice" / "ssh.service");
  }
  void TearDown() override { fs::remove_all(root_); }
  uint64_t ino(const fs::path& p) {
    struct stat st;
    EXPECT_EQ(stat(p.c_str(), &st), 0) << p;
    return st.st_ino;
  }
  // A clock the test moves.
  CgroupNames names() {
    return CgroupNames(root_, [this] { return std::chrono::steady_clock::time_point(now_); });
  }

  fs::path root_;
  std::chrono::steady_clock::duration now_ = 100s;
};

TEST_F(CgroupNamesTest, NamesEveryDirectoryRelativeToTheRoot) {
  CgroupNames n = names();
  EXPECT_EQ(n.path(ino(root_)), "/");
  EXPECT_EQ(n.path(ino(root_ / "system.slice")), "/system.slice");
  EXPECT_EQ(n.path(ino(root_ / "system.slice" / "ssh.service")), "/system.slice/ssh.service");
  EXPECT_FALSE(n.provisional(ino(root_ / "system.slice")));
}

TEST_F(CgroupNamesTest, RewalksOnAMissAtMostOnceASecond) {
  CgroupNames n = names();
  fs::create_directory(root_ / "new.scope");
  uint64_t id = ino(root_ / "new.scope");
  now_ += 500ms;
  EXPECT_EQ(n.path(id), "cgroup:" + std::to_string(id)) << "within a second of the walk";
  EXPECT_TRUE(n.provisional(id));
  now_ += 600ms;
  EXPECT_EQ(n.path(id), "/new.scope") << "a second after the walk";
  EXPECT_FALSE(n.provisional(id));
}

TEST_F(CgroupNamesTest, AnIdNoWalkFindsIsNamedByIdForGood) {
  CgroupNames n = names();
  fs::create_directory(root_ / "gone.scope");
  uint64_t id = ino(root_ / "gone.scope");
  fs::remove(root_ / "gone.scope");
  now_ += 2s;
  EXPECT_EQ(n.path(id), "cgroup:" + std::to_string(id));
  EXPECT_FALSE(n.provisional(id)) << "the walk after its event did not find it";
  // Named for good: later calls are hits, walks or not.
  fs::create_directory(root_ / "later.scope");
  now_ += 2s;
  EXPECT_EQ(n.path(id), "cgroup:" + std::to_string(id));
}

TEST_F(CgroupNamesTest, ARenamedDirectoryIsRenamedAtTheNextWalk) {
  CgroupNames n = names();
  uint64_t id = ino(root_ / "system.slice" / "ssh.service");
  fs::rename(root_ / "system.slice" / "ssh.service", root_ / "system.slice" / "sshd.service");
  fs::create_directory(root_ / "miss.scope");
  now_ += 2s;
  EXPECT_EQ(n.path(ino(root_ / "miss.scope")), "/miss.scope");
  EXPECT_EQ(n.path(id), "/system.slice/sshd.service");
}

TEST_F(CgroupNamesTest, AMissingRootIsAnError) {
  EXPECT_THROW(CgroupNames((root_ / "absent").string()), Error);
}

TEST(CgroupNames, FindsTheCgroup2MountInMountinfo) {
  fs::path f = fs::temp_directory_path() / ("mountinfo." + std::to_string(getpid()));
  std::ofstream(f) << "22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n"
                      "30 22 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
                      "41 30 0:38 / /sys/fs/cgroup/uni\\040fied rw,relatime shared:10 - cgroup2 "
                      "cgroup2 rw,nsdelegate\n";
  EXPECT_EQ(CgroupNames::cgroup2_mount(f), "/sys/fs/cgroup/uni fied");
  std::ofstream(f) << "22 1 0:21 / /proc rw - proc proc rw\n";
  EXPECT_THROW(CgroupNames::cgroup2_mount(f), Error);
  fs::remove(f);
}

// Root: a real cgroup on this machine's cgroup2 mount, named by the id BPF reports (its inode).
TEST(CgroupNamesRoot, NamesARealCgroup) {
  std::string mount = CgroupNames::cgroup2_mount();
  std::string name = "stackmapd-test-" + std::to_string(getpid());
  fs::path dir = fs::path(mount) / name;
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << dir << ": " << strerror(errno);
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  CgroupNames n;
  EXPECT_EQ(n.root(), mount);
  std::string path = n.path(st.st_ino);
  EXPECT_EQ(rmdir(dir.c_str()), 0);
  EXPECT_EQ(path, "/" + name);
  EXPECT_EQ(unit_of_cgroup(path), "");
}

}  // namespace
}  // namespace stackmapd

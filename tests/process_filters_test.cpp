// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/process_filters.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

TEST(TaskNames, ListsAndRepeatsAsTheKernelKeepsNames) {
  EXPECT_EQ(task_names({"nginx,postgres", "nginx", "systemd-journald"}),
            (std::vector<std::string>{"nginx", "postgres", "systemd-journal"}));
  EXPECT_TRUE(task_names({}).empty());
  EXPECT_THROW(task_names({","}), Error);
  std::vector<std::string> many;
  for (int i = 0; i <= SMT_MAX_COMMS; ++i) many.push_back("t" + std::to_string(i));
  EXPECT_THROW(task_names(many), Error);
}

class CgroupFilters : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("smt-cgf-" + std::to_string(getpid()));
    fs::create_directories(root_ / "system.slice" / "nginx.service");
  }
  void TearDown() override { fs::remove_all(root_); }
  uint64_t inode(const fs::path& p) {
    struct stat st = {};
    EXPECT_EQ(stat(p.c_str(), &st), 0);
    return st.st_ino;
  }
  fs::path root_;
};

TEST_F(CgroupFilters, ByPathBelowTheMountOrUnderIt) {
  const auto f = cgroup_filters({"/system.slice/nginx.service", root_.string() + "/system.slice"},
                                root_.string());
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].path, "/system.slice/nginx.service");
  EXPECT_EQ(f[0].level, 2u);
  EXPECT_EQ(f[0].id, inode(root_ / "system.slice" / "nginx.service"));
  EXPECT_EQ(f[1].path, "/system.slice");
  EXPECT_EQ(f[1].level, 1u);
  EXPECT_EQ(f[1].id, inode(root_ / "system.slice"));
  // The same cgroup twice is one filter; the root is level 0.
  EXPECT_EQ(cgroup_filters({"system.slice//", "/system.slice"}, root_.string()).size(), 1u);
  EXPECT_EQ(cgroup_filters({"/"}, root_.string()).at(0).level, 0u);
}

TEST_F(CgroupFilters, RefusesWhatNamesNoCgroup) {
  EXPECT_THROW(cgroup_filters({"/system.slice/none.service"}, root_.string()), Error);
  EXPECT_THROW(cgroup_filters({"/system.slice/../system.slice"}, root_.string()), Error);
  EXPECT_TRUE(cgroup_filters({}, root_.string()).empty());
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The export set on a disk that fills up: every file of the new
// snapshot is written before any replaces its old one, so a full disk leaves
// all of the old set, never some files of each. Root: it mounts a small tmpfs.
#include "daemon/sys/staged_files.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>

#include "daemon/export/exports.h"
#include "daemon/model/fsmb.h"
#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

class StagedFilesRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stackmapd-staged-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    ASSERT_EQ(mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=256k"), 0) << strerror(errno);
  }
  void TearDown() override {
    umount2(dir_.c_str(), MNT_DETACH);
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

Snapshot stacks(uint32_t n, size_t depth) {
  Snapshot snap;
  for (uint32_t i = 0; i < n; ++i)
    snap.stacks.push_back({2 * i + 1, i + 1, std::vector<uint64_t>(depth, 0xffffffff81000000 + i)});
  intern_callstacks(snap);
  return snap;
}

TEST_F(StagedFilesRoot, AFullDiskKeepsTheWholeOldSet) {
  write_exports(dir_, stacks(2, 3), nullptr);
  // stack_map_bin (~190 KiB) fits in the 256 KiB, stack_map.json (~600 KiB) does not.
  EXPECT_THROW(write_exports(dir_, stacks(2000, 10), nullptr), Error);
  EXPECT_EQ(fsmb_read_file(dir_ / "stack_map_bin").stacks.size(), 2u)
      << "stack_map_bin of the new snapshot beside the rest of the old one";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"stack_map", "stack_map.json", "stack_map_bin",
                                             "stack_map_stat"}))
      << "no temp file left behind";
}

TEST_F(StagedFilesRoot, NothingCommittedLeavesNoTemp) {
  {
    StagedFiles set;
    set.add(dir_ / "a", "x", 0640, kNoGroup);
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/history.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/export/exports.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("history-test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "history");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const fs::path& path, size_t bytes) { std::ofstream(path) << std::string(bytes, 'x'); }
  // An older snapshot, named as keep_history names them (UTC stamps sort in time order).
  void old_snapshot(const std::string& stamp, size_t bytes) {
    write(dir_ / "history" / (stamp + ".stack_map_bin"), bytes);
    write(dir_ / "history" / (stamp + ".stack_map.kernel"), 100);
  }
  std::vector<std::string> names() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_ / "history"))
      out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }
  uint64_t total() {
    uint64_t sum = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "history")) sum += e.file_size();
    return sum;
  }

  fs::path dir_;
};

TEST_F(HistoryTest, RemovesTheOldestSnapshotsBeyondTheCap) {
  old_snapshot("20200101T000000Z", 10000);
  old_snapshot("20200101T000001Z", 10000);
  old_snapshot("20200101T000002Z", 10000);
  write(dir_ / "stack_map_bin", 10000);
  write(dir_ / "stack_map.kernel", 100);
  keep_history(dir_.string(), 25000, kNoGroup);
  // 4 snapshots of 10100 bytes; 25000 holds the newest two.
  std::vector<std::string> left = names();
  ASSERT_EQ(left.size(), 4u);
  EXPECT_EQ(left[0], "20200101T000002Z.stack_map.kernel");
  EXPECT_EQ(left[1], "20200101T000002Z.stack_map_bin");
  EXPECT_NE(left[3].find(".stack_map_bin"), std::string::npos);
  EXPECT_LE(total(), 25000u);
}

TEST_F(HistoryTest, KeepsTheNewestEvenWhenItAloneExceedsTheCap) {
  old_snapshot("20200101T000000Z", 10000);
  write(dir_ / "stack_map_bin", 50000);
  keep_history(dir_.string(), 1000, kNoGroup);
  std::vector<std::string> left = names();
  ASSERT_EQ(left.size(), 1u);  // no stack_map.kernel beside this export
  EXPECT_EQ(fs::file_size(dir_ / "history" / left[0]), 50000u);
}

TEST_F(HistoryTest, UnderTheCapNothingIsRemoved) {
  old_snapshot("20200101T000000Z", 10000);
  write(dir_ / "stack_map_bin", 10000);
  keep_history(dir_.string(), 1 << 20, kNoGroup);
  EXPECT_EQ(names().size(), 3u);
}

}  // namespace
}  // namespace stackmapd

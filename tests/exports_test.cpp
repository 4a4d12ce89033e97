// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/exports.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "daemon/export/breakdown.h"
#include "daemon/export/user_binaries.h"
#include "daemon/model/fsmb.h"
#include "daemon/model/user_stack.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/sys/error.h"
#include "tests/snapshot_outputs.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

Kallsyms fixture_symbols() {
  return Kallsyms::parse(
      "ffffffff81000000 T alpha\n"
      "ffffffff81000100 T schedule\n"
      "ffffffff810001c0 T schedule_timeout\n"
      "ffffffff810001f0 T omega\n");
}

std::vector<StackRecord> two_stacks() {
  return {{42, 1337, {0xffffffff81000148, 0xffffffff810001dc}}, {7, 5, {0xdead}}};
}

TEST(Exports, StackMapTextMatchesTheRfcLayout) {
  Kallsyms k = fixture_symbols();
  std::vector<StackRecord> s = {two_stacks()[0]};
  EXPECT_EQ(stack_map_of(s, &k),
            "stack_id 42 [ref 1337, depth 2]\n"
            "  [0] schedule+0x48/0xc0\n"
            "  [1] schedule_timeout+0x1c/0x30\n"
            "\n");
  EXPECT_EQ(stack_map_of({two_stacks()[1]}, &k), "stack_id 7 [ref 5, depth 1]\n  [0] 0xdead\n\n");
}

TEST(Exports, StatKeepsTheRfcLinesFirst) {
  TableStats st;
  st.entries = 2500;
  st.pool_size = 16384;
  st.table_size = 32768;
  st.counters[SMC_HITS] = 148923;
  st.counters[SMC_INSERTS] = 2500;
  st.counters[SMC_DROP_PROBE_LIMIT] = 1000;
  st.counters[SMC_DROP_RINGBUF_FULL] = 77;
  std::string text = format_stat(st);
  EXPECT_EQ(text.substr(0, text.find("events:")),
            "entries:    2500 / 16384\n"
            "table_size: 32768\n"
            "hits:       148923\n"
            "drops:      1077\n"
            "hit_rate:   99%\n"  // 148923 * 100 / 150000
            "reuse_rate: 97%\n");
  EXPECT_NE(text.find("\ndrop_ringbuf_full: 77\n"), std::string::npos);
  EXPECT_NE(text.find("\npool_full:  no\n"), std::string::npos);
}

// The RFC's published runs (its cover letter), read as its stack_map_stat printed them.
struct RfcRun {
  uint64_t hits, drops, inserts;
  uint64_t hit_rate, reuse_rate;
};

TEST(Exports, HitRateIsTheRfcsOnItsPublishedRuns) {
  for (const RfcRun& run : {
           RfcRun{8264, 0, 774, 100, 90},    // kmem_cache_alloc, 1 s: "100% hit rate"
           RfcRun{25466, 0, 3632, 100, 85},  // function tracer, 3 s
           RfcRun{92, 8, 40, 92, 52},        // "92% hit rate under heavy load"
           RfcRun{100, 0, 100, 100, 0},      // all-new stacks: hits to the RFC, no reuse
           RfcRun{0, 5, 0, 0, 0},            // only drops
       }) {
    TableStats st;
    st.counters[SMC_HITS] = run.hits;
    st.counters[SMC_INSERTS] = run.inserts;
    st.counters[SMC_DROP_POOL_FULL] = run.drops;
    EXPECT_EQ(st.hit_rate_percent(), run.hit_rate) << run.hits << " hits";
    EXPECT_EQ(st.reuse_rate_percent(), run.reuse_rate) << run.hits << " hits";
    const std::string text = format_stat(st);
    EXPECT_NE(text.find("\nhit_rate:   " + std::to_string(run.hit_rate) +
                        "%\nreuse_rate: " + std::to_string(run.reuse_rate) + "%\n"),
              std::string::npos)
        << text;
    Snapshot snap;
    snap.stats = st;
    auto doc = nlohmann::json::parse(json_of(snap, nullptr));
    EXPECT_EQ(doc["stats"]["hit_rate"], run.hit_rate);
    EXPECT_EQ(doc["stats"]["reuse_rate"], run.reuse_rate);
  }
}

TEST(Exports, NoEventsNoRates) {
  TableStats st;
  st.pool_size = 16384;
  st.table_size = 32768;
  EXPECT_EQ(st.hit_rate_percent(), std::nullopt);
  EXPECT_EQ(st.reuse_rate_percent(), std::nullopt);
  const std::string text = format_stat(st);
  EXPECT_EQ(text.substr(0, text.find("events:")),
            "entries:    0 / 16384\n"
            "table_size: 32768\n"
            "hits:       0\n"
            "drops:      0\n");
  EXPECT_EQ(text.find("_rate"), std::string::npos) << text;
  Snapshot snap;
  snap.stats = st;
  auto doc = nlohmann::json::parse(json_of(snap, nullptr));
  ASSERT_TRUE(doc["stats"].contains("hit_rate"));
  EXPECT_TRUE(doc["stats"]["hit_rate"].is_null());
  EXPECT_TRUE(doc["stats"]["reuse_rate"].is_null());
}

// A line of its own once pairs were folded, after key_overflow; none before
// (the exports as earlier versions wrote them).
TEST(Exports, FoldedPairsOnlyOnceFolded) {
  TableStats st;
  EXPECT_EQ(format_stat(st).find("key_pairs_folded"), std::string::npos);
  st.key_pairs_folded = 3;
  const std::string text = format_stat(st);
  EXPECT_NE(text.find("key_overflow: 0\nkey_pairs_folded: 3\n"), std::string::npos) << text;
  Snapshot snap;
  snap.stats = st;
  EXPECT_EQ(nlohmann::json::parse(json_of(snap, nullptr))["stats"]["key_pairs_folded"], 3);
}

TEST(Exports, MoreInsertsThanHitsIsNoReuse) {
  // The RFC's kernel counts an element before its hit; a stat read in between shows both.
  TableStats st;
  st.counters[SMC_HITS] = 0;
  st.counters[SMC_INSERTS] = 1;
  st.counters[SMC_DROP_POOL_FULL] = 3;
  EXPECT_EQ(st.reuse_rate_percent(), 0u);
}

TEST(Exports, JsonCarriesTableParametersStatsAndSymbols) {
  Kallsyms k = fixture_symbols();
  Snapshot snap;
  snap.bits = 14;
  snap.hash_seed = 0x1234;
  snap.stats.table_size = 32768;
  snap.stats.pool_size = 16384;
  snap.stats.entries = 2;
  snap.stacks = two_stacks();
  auto doc = nlohmann::json::parse(json_of(snap, &k));
  EXPECT_EQ(doc["bits"], 14);
  EXPECT_EQ(doc["hash_seed"], 0x1234);
  EXPECT_EQ(doc["table_size"], 32768);
  EXPECT_EQ(doc["stats"]["entries"], 2);
  ASSERT_EQ(doc["stacks"].size(), 2u);
  auto& s = doc["stacks"][0];
  EXPECT_EQ(s["stack_id"], 42);
  EXPECT_EQ(s["ref_count"], 1337);
  EXPECT_EQ(s["depth"], 2);
  EXPECT_EQ(s["ips"][0], "0xffffffff81000148");
  EXPECT_EQ(s["symbols"][1], "schedule_timeout+0x1c/0x30");
}

TEST(Exports, TopOrdersByCountWithShares) {
  Snapshot snap;
  snap.stacks = two_stacks();
  intern_callstacks(snap);
  std::string top = format_top(snap, 1, FrameNames(snap, nullptr));
  EXPECT_NE(top.find("1342 events, 2 unique stacks; top 1:"), std::string::npos) << top;
  EXPECT_NE(top.find("#1 stack_id 42: 1337 events (99.63%), depth 2"), std::string::npos) << top;
  EXPECT_EQ(top.find("stack_id 7"), std::string::npos);
}

class ExportFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stackmapd-exports-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ExportFiles, WritesAllFourAtomicallyWithPrivateModes) {
  prepare_output_dir(dir_);
  Snapshot snap;
  snap.stacks = two_stacks();
  intern_callstacks(snap);
  write_exports(dir_, snap, nullptr);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"stack_map", "stack_map.json", "stack_map_bin",
                                             "stack_map_stat"}))
      << "no temporary files left behind";
  struct stat st;
  ASSERT_EQ(stat((dir_ / "stack_map_bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  FsmbFile f = fsmb_read_file(dir_ / "stack_map_bin");
  ASSERT_EQ(f.stacks.size(), 2u);
  EXPECT_EQ(f.stacks[0].ips, two_stacks()[0].ips);
}

TEST_F(ExportFiles, ReplacingKeepsTheOldFileUntilTheNewOneIsComplete) {
  prepare_output_dir(dir_);
  std::string path = dir_ / "f";
  write_file_atomic(path, "old", 0644);
  write_file_atomic(path, "new contents", 0644);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "new contents");
}

TEST_F(ExportFiles, UnwritableDirectoryIsRefusedUpFront) {
  try {
    prepare_output_dir("/proc/stackmapd-cannot-exist");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--output"), std::string::npos) << e.what();
  }
}

// This test binary, deleted at its path while a process maps it (here: at
// its own path), first under a cap one byte too small, then under one it fits.
TEST_F(ExportFiles, SavedBinariesStayWithinTheirCap) {
  prepare_output_dir(dir_);
  // The file itself: qemu-user (the arm64 tests) cannot read /proc/self/exe.
  const std::string self = fs::read_symlink("/proc/self/exe");
  FileIdentity mapped;
  const std::string id = elf_build_id(self, &mapped);
  ASSERT_FALSE(id.empty()) << "the test binary has no build id";
  const uint64_t size = fs::file_size(self);
  const std::string deleted = (dir_ / "deleted").string();
  UserStackSet set;
  set.enabled = true;
  set.binaries.push_back({deleted, id, mapped, self});
  save_user_binaries(dir_, set, kNoGroup, size - 1);
  EXPECT_FALSE(fs::exists(dir_ / "binaries" / id)) << "copied past the cap";
  std::ifstream index(dir_ / "binaries" / "index");
  std::string line;
  std::getline(index, line);
  EXPECT_EQ(line, id + " " + deleted) << "a binary over the cap is still indexed";

  save_user_binaries(dir_, set, kNoGroup, size + 4096);  // the index counts too
  EXPECT_TRUE(fs::exists(dir_ / "binaries" / id)) << "a binary within the cap is copied";
  EXPECT_EQ(fs::file_size(dir_ / "binaries" / id), size);
}

__attribute__((noinline)) int exports_test_marker_function() { return 7; }

// A binary still at its path is indexed, not copied, and decode
// --user-symbols-from reads it there (its build id checked); replaced, it is
// copied from where it is mapped, and read from the copy.
TEST_F(ExportFiles, CopiesOnlyABinaryNoLongerAtItsPath) {
  prepare_output_dir(dir_);
  const std::optional<ProcessMaps> maps = ProcessMaps::read(getpid());
  ASSERT_TRUE(maps);
  const uint64_t addr = reinterpret_cast<uint64_t>(&exports_test_marker_function);
  const MappedFile* self = maps->find(addr);
  ASSERT_NE(self, nullptr);
  ASSERT_FALSE(self->build_id.empty());
  const fs::path bin = dir_ / "prog";
  fs::copy_file(self->path, bin);
  FileIdentity mapped;
  ASSERT_EQ(elf_build_id(bin.string(), &mapped), self->build_id);
  fs::create_hard_link(bin, dir_ / "mapped");  // as /proc/PID/map_files names it
  UserStackSet set;
  set.enabled = true;
  set.binaries.push_back({bin.string(), self->build_id, mapped, (dir_ / "mapped").string()});
  UserFrame frame{addr, 0, addr - self->start + self->pgoff, 0, {"live_name+0x0"}, ""};
  set.stacks[1].frames.push_back(frame);
  const fs::path copy = dir_ / "binaries" / self->build_id;

  save_user_binaries(dir_, set, kNoGroup, 1ull << 30);
  EXPECT_FALSE(fs::exists(copy)) << "a binary at its path was copied";
  std::ifstream index(dir_ / "binaries" / "index");
  std::string line;
  std::getline(index, line);
  EXPECT_EQ(line, self->build_id + " " + bin.string());
  UserStackSet offline = set;
  resymbolize_user_stacks(offline, dir_.string());
  ASSERT_FALSE(offline.stacks[1].frames[0].symbols.empty());
  EXPECT_EQ(user_function_name(offline.stacks[1].frames[0].symbols.back()),
            "stackmapd::(anonymous namespace)::exports_test_marker_function()")
      << "read at its path";

  fs::remove(bin);
  fs::copy_file("/bin/true", bin);  // another build id at the path
  offline = set;
  resymbolize_user_stacks(offline, dir_.string());
  EXPECT_EQ(offline.stacks[1].frames[0].symbols, frame.symbols)
      << "another file at its path is not read: the names found live stay";

  save_user_binaries(dir_, set, kNoGroup, 1ull << 30);
  ASSERT_TRUE(fs::exists(copy)) << "a binary replaced at its path is copied";
  EXPECT_EQ(fs::file_size(copy), fs::file_size(dir_ / "mapped"));
  offline = set;
  resymbolize_user_stacks(offline, dir_.string());
  ASSERT_FALSE(offline.stacks[1].frames[0].symbols.empty());
  EXPECT_EQ(user_function_name(offline.stacks[1].frames[0].symbols.back()),
            "stackmapd::(anonymous namespace)::exports_test_marker_function()")
      << "read from the copy";
}

}  // namespace
}  // namespace stackmapd

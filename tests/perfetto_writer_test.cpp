// SPDX-License-Identifier: GPL-2.0
// --perfetto's writer (daemon/export/perfetto_writer.h) read back with the
// tests' own wire reader; tests/perfetto_test.sh checks a real session's trace.
#include "daemon/export/perfetto_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "daemon/sys/error.h"
#include "tests/proto_reader.h"

namespace stackmapd {
namespace {

using testing::Field;
using testing::fields_of;
using testing::parse_message;
using testing::varints_of;

smt_trace_record record(uint32_t stack_id, uint32_t tgid, uint32_t tid, uint64_t ts) {
  smt_trace_record r{};
  r.event.stack_id = stack_id;
  r.event.tgid = tgid;
  r.event.tid = tid;
  r.event.cpu = 3;
  r.ts_ns = ts;
  return r;
}

class PerfettoWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("perfetto_test." + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "trace.pftrace").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::vector<Field>> packets() {
    std::ifstream in(path_, std::ios::binary);
    data_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::vector<std::vector<Field>> out;
    for (const Field& f : parse_message(data_)) {
      EXPECT_EQ(f.number, 1u);
      out.push_back(parse_message(f.bytes));
    }
    return out;
  }

  std::filesystem::path dir_;
  std::string path_, data_;
};

TEST_F(PerfettoWriterTest, InternsEachStackOnceRootFirstUnpacked) {
  KernelInfo kernel;
  kernel.build_id = "0011223344556677889900112233445566778899";
  kernel.text_address = 0xffffffff81000000;
  {
    PerfettoWriter w(
        path_, [](uint64_t ip) { return ip == 0xffffffff81000010 ? "leaf" : ""; }, kernel);
    EXPECT_TRUE(std::filesystem::exists(path_ + ".tmp"));
    const std::vector<uint64_t> a{0xffffffff81000010, 0xffffffff81000020};
    w.write(record(5, 100, 100, 1000), "main", a);
    w.write(record(5, 100, 101, 2000), "worker", a);
    w.write(record(5, 100, 101, 3000), "worker",
            {0xffffffff81000030});  // id 5 reused after a reset
    w.finish();
    EXPECT_EQ(w.samples(), 3u);
  }
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
  auto p = packets();

  // The sequence starts with its incremental state cleared and the mapping.
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(varints_of(p[0], 13), std::vector<uint64_t>{1});
  EXPECT_EQ(varints_of(p[0], 87), std::vector<uint64_t>{1});
  auto interned0 = parse_message(fields_of(p[0], 12).at(0).bytes);
  EXPECT_EQ(fields_of(interned0, 19).size(), 1u);
  EXPECT_EQ(parse_message(fields_of(interned0, 16).at(0).bytes).at(1).bytes.size(), 20u);

  std::map<uint64_t, std::vector<uint64_t>> callstacks;  // iid -> frame ids
  std::map<uint64_t, uint64_t> rel_pc;                   // frame iid -> rel_pc
  std::set<uint64_t> threads;
  std::vector<uint64_t> sample_iids, timestamps;
  const int64_t offset = PerfettoWriter::boottime_offset_ns();
  for (const auto& packet : p) {
    EXPECT_EQ(varints_of(packet, 10), std::vector<uint64_t>{1});
    for (const Field& i : fields_of(packet, 12)) {
      auto interned = parse_message(i.bytes);
      for (const Field& f : fields_of(interned, 6)) {
        auto frame = parse_message(f.bytes);
        rel_pc[varints_of(frame, 1).at(0)] = varints_of(frame, 4).at(0);
      }
      for (const Field& c : fields_of(interned, 7)) {
        auto cs = parse_message(c.bytes);
        for (const Field& id : fields_of(cs, 2)) EXPECT_EQ(id.wire_type, 0u) << "packed frame_ids";
        const uint64_t iid = varints_of(cs, 1).at(0);
        EXPECT_FALSE(callstacks.count(iid)) << "callstack " << iid << " interned twice";
        callstacks[iid] = varints_of(cs, 2);
      }
    }
    for (const Field& t : fields_of(packet, 2))
      for (const Field& th : fields_of(parse_message(t.bytes), 2))
        threads.insert(varints_of(parse_message(th.bytes), 1).at(0));
    for (const Field& s : fields_of(packet, 66)) {
      auto sample = parse_message(s.bytes);
      const uint64_t iid = varints_of(sample, 4).at(0);
      EXPECT_TRUE(callstacks.count(iid)) << "callstack " << iid << " used before it is interned";
      EXPECT_EQ(varints_of(sample, 5), std::vector<uint64_t>{1});  // kernel mode
      EXPECT_EQ(varints_of(sample, 1), std::vector<uint64_t>{3});
      EXPECT_EQ(varints_of(packet, 58), std::vector<uint64_t>{6});  // BOOTTIME
      EXPECT_EQ(varints_of(packet, 13), std::vector<uint64_t>{2});
      sample_iids.push_back(iid);
      timestamps.push_back(varints_of(packet, 8).at(0));
    }
  }
  ASSERT_EQ(sample_iids.size(), 3u);
  EXPECT_EQ(sample_iids[0], sample_iids[1]);
  EXPECT_NE(sample_iids[1], sample_iids[2]);
  EXPECT_EQ(callstacks.size(), 2u);
  // Root first: the outermost frame (…020) before the leaf (…010).
  const auto& frames = callstacks.at(sample_iids[0]);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(rel_pc.at(frames[0]), 0x20u);
  EXPECT_EQ(rel_pc.at(frames[1]), 0x10u);
  EXPECT_EQ(threads, (std::set<uint64_t>{100, 101}));
  EXPECT_NEAR(static_cast<double>(timestamps[0]), 1000.0 + static_cast<double>(offset), 1e6);
}

TEST_F(PerfettoWriterTest, ABadPathFailsAtOnceAndNothingIsLeftUnfinished) {
  EXPECT_THROW(PerfettoWriter((dir_ / "missing" / "t.pftrace").string(), {}, {}), Error);
  { PerfettoWriter w(path_, {}, {}); }  // never finished: no file
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

}  // namespace
}  // namespace stackmapd

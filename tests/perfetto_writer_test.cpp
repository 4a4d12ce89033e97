// SPDX-License-Identifier: GPL-2.0
// --perfetto's writer (daemon/export/perfetto_writer.h) read back with the
// tests' own wire reader; tests/perfetto_test.sh checks a real session's trace.
#include "daemon/export/perfetto_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
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

TEST_F(PerfettoWriterTest, UserFramesComeFirstInTheirBinarysMapping) {
  KernelInfo kernel;
  kernel.text_address = 0xffffffff81000000;
  UserStackSet user;
  user.enabled = true;
  user.binaries = {{"/usr/bin/app", "aabbccddeeff00112233445566778899aabbccdd"}};
  UserStack s;
  s.pid = 100;
  // Leaf first: `three` with `inl` inlined into it, `main` at a return
  // address (its ELF address, not its file offset), a frame in no file.
  s.frames.push_back({0x555500001130, 0, 0x1130, 0x2130, {"inl+0x4", "three+0x10"}, "w.c:12"});
  s.frames.push_back({0x555500001200, 0, 0x1200, 0x2200, {"main+0x8"}, ""});
  s.frames.push_back({0x7ffff000, -1, 0, 0, {}, ""});
  user.stacks[9] = s;
  {
    PerfettoWriter w(
        path_, [](uint64_t ip) { return ip == 0xffffffff81000010 ? "leaf" : ""; }, kernel);
    smt_trace_record r = record(5, 100, 100, 1000);
    r.event.user_stack_id = 9;
    w.write(r, "app", {0xffffffff81000010}, &user);
    w.write(r, "app", {}, &user);  // no kernel frames: a user-mode sample
    r.event.user_stack_id = kNoUserStack;
    w.write(r, "app", {0xffffffff81000010}, &user);
    w.finish();
  }
  std::map<uint64_t, std::vector<Field>> frames, mappings;
  std::map<uint64_t, std::string> strings, build_ids;  // function names and paths; build ids
  std::map<uint64_t, std::vector<uint64_t>> callstacks;
  std::vector<std::pair<uint64_t, uint64_t>> samples;  // (callstack, cpu mode)
  for (const auto& packet : packets()) {
    for (const Field& i : fields_of(packet, 12)) {
      auto interned = parse_message(i.bytes);
      for (const Field& f : fields_of(interned, 6)) {
        auto frame = parse_message(f.bytes);
        frames[varints_of(frame, 1).at(0)] = frame;
      }
      for (const Field& f : fields_of(interned, 19)) {
        auto m = parse_message(f.bytes);
        mappings[varints_of(m, 1).at(0)] = m;
      }
      for (uint32_t n : {5u, 17u})
        for (const Field& f : fields_of(interned, n)) {
          auto str = parse_message(f.bytes);
          strings[n << 16 | varints_of(str, 1).at(0)] = fields_of(str, 2).at(0).bytes;
        }
      for (const Field& f : fields_of(interned, 16)) {
        auto str = parse_message(f.bytes);
        build_ids[varints_of(str, 1).at(0)] = fields_of(str, 2).at(0).bytes;
      }
      for (const Field& c : fields_of(interned, 7)) {
        auto cs = parse_message(c.bytes);
        callstacks[varints_of(cs, 1).at(0)] = varints_of(cs, 2);
      }
    }
    for (const Field& f : fields_of(packet, 66)) {
      auto sample = parse_message(f.bytes);
      samples.emplace_back(varints_of(sample, 4).at(0), varints_of(sample, 5).at(0));
    }
  }
  // Each frame as "path:rel_pc:function", root first.
  const auto describe = [&](uint64_t callstack) {
    std::vector<std::string> out;
    for (uint64_t id : callstacks.at(callstack)) {
      const auto& frame = frames.at(id);
      const auto& m = mappings.at(varints_of(frame, 3).at(0));
      auto fn = varints_of(frame, 2);
      char pc[24];
      snprintf(pc, sizeof(pc), "%llx", static_cast<unsigned long long>(varints_of(frame, 4).at(0)));
      out.push_back(strings.at(17 << 16 | varints_of(m, 7).at(0)) + ":" + pc + ":" +
                    (fn.empty() ? "" : strings.at(5 << 16 | fn[0])));
    }
    return out;
  };
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(describe(samples[0].first),
            (std::vector<std::string>{"[unknown]:7fffefff:", "/usr/bin/app:21ff:main",
                                      "/usr/bin/app:2130:three", "/usr/bin/app:2130:inl (inlined)",
                                      "[kernel.kallsyms]:10:leaf"}));
  EXPECT_EQ(samples[0].second, 1u);  // kernel mode: the leaf is the kernel's
  EXPECT_EQ(
      describe(samples[1].first),
      (std::vector<std::string>{"[unknown]:7fffefff:", "/usr/bin/app:21ff:main",
                                "/usr/bin/app:2130:three", "/usr/bin/app:2130:inl (inlined)"}));
  EXPECT_EQ(samples[1].second, 2u);  // user mode
  EXPECT_EQ(describe(samples[2].first), std::vector<std::string>{"[kernel.kallsyms]:10:leaf"});
  EXPECT_EQ(samples[2].second, 1u);
  // The binary's mapping: its build id as raw bytes, an empty range.
  ASSERT_EQ(mappings.size(), 3u);  // the kernel, the app, [unknown]
  for (const auto& [iid, m] : mappings) {
    if (strings.at(17 << 16 | varints_of(m, 7).at(0)) != "/usr/bin/app") continue;
    EXPECT_EQ(build_ids.at(varints_of(m, 2).at(0)),
              std::string("\xaa\xbb\xcc\xdd\xee\xff\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99"
                          "\xaa\xbb\xcc\xdd",
                          20));
    EXPECT_TRUE(varints_of(m, 4).empty() && varints_of(m, 5).empty());
  }
}

// Names and paths are bytes: the thread name, a function name and
// a binary's path go into the trace escaped (utf8_text.h), never raw.
TEST_F(PerfettoWriterTest, NamesThatAreNotUtf8AreEscaped) {
  KernelInfo kernel;
  kernel.text_address = 0xffffffff81000000;
  UserStackSet user;
  user.enabled = true;
  user.binaries = {{"/tmp/\xff\xfe/app", "aabb"}};
  UserStack s;
  s.frames.push_back({0x555500001130, 0, 0x1130, 0x2130, {"f\xc0\xaf"}, ""});
  user.stacks[9] = s;
  {
    PerfettoWriter w(
        path_, [](uint64_t) { return "k\xed\xa0\x80"; }, kernel);
    smt_trace_record r = record(5, 0x7ffffff0, 0x7ffffff0, 1000);  // no such process
    r.event.user_stack_id = 9;
    w.write(r, "\xff-x", {0xffffffff81000010}, &user);
    w.finish();
  }
  packets();
  for (const char* text : {"\\xff-x", "/tmp/\\xff\\xfe/app", "f\\xc0\\xaf", "k\\xed\\xa0\\x80"})
    EXPECT_NE(data_.find(text), std::string::npos) << text;
  for (const char* raw : {"\xff-x", "\xff\xfe/app", "f\xc0\xaf", "k\xed"})
    EXPECT_EQ(data_.find(raw), std::string::npos) << raw;
}

TEST_F(PerfettoWriterTest, ABadPathFailsAtOnceAndNothingIsLeftUnfinished) {
  EXPECT_THROW(PerfettoWriter((dir_ / "missing" / "t.pftrace").string(), {}, {}), Error);
  { PerfettoWriter w(path_, {}, {}); }  // never finished: no file
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

}  // namespace
}  // namespace stackmapd

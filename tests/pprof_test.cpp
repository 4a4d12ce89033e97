// SPDX-License-Identifier: GPL-2.0
// The pprof encoder (daemon/export/pprof.h) and its protobuf writer, read
// back with the tests' own wire reader; tests/pprof_test.sh runs the real pprof.
#include "daemon/export/pprof.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "daemon/export/proto_wire.h"
#include "tests/proto_reader.h"

namespace stackmapd {
namespace {

using testing::Field;
using testing::fields_of;
using testing::parse_message;
using testing::varints_of;

TEST(ProtoWriterTest, WritesTheWireFormat) {
  ProtoWriter w;
  w.varint(1, 150);  // protobuf.dev's example: 08 96 01
  w.bytes(2, "testing");
  w.packed_varints(4, {3, 270});
  w.packed_varints(5, {});
  EXPECT_EQ(w.data(), std::string("\x08\x96\x01\x12\x07testing\x22\x03\x03\x8e\x02", 17));
  ProtoWriter outer;
  outer.message(3, w);
  EXPECT_EQ(outer.data(), "\x1a\x11" + w.data());
  ProtoWriter big;
  big.varint(1, UINT64_MAX);
  EXPECT_EQ(big.size(), 11u);  // 1 tag byte + 10 varint bytes
}

// The decoded profile: its fields, and its string table.
struct Profile {
  std::string bytes;
  std::vector<Field> fields;
  std::vector<std::string> strings;

  explicit Profile(const std::string& gz) : bytes(testing::gunzip(gz)) {
    fields = parse_message(bytes);
    for (const Field& f : fields_of(fields, 6)) strings.emplace_back(f.bytes);
  }
  std::vector<std::vector<Field>> messages(uint32_t number) const {
    std::vector<std::vector<Field>> out;
    for (const Field& f : fields_of(fields, number)) out.push_back(parse_message(f.bytes));
    return out;
  }
  std::vector<std::pair<std::string, std::string>> sample_types() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& vt : messages(1))
      out.emplace_back(strings.at(varints_of(vt, 1).at(0)), strings.at(varints_of(vt, 2).at(0)));
    return out;
  }
  // Per sample: its label "key=value" strings.
  std::vector<std::string> labels(const std::vector<Field>& sample) const {
    std::vector<std::string> out;
    for (const Field& f : fields_of(sample, 3)) {
      auto l = parse_message(f.bytes);
      std::string s = strings.at(varints_of(l, 1).at(0)) + "=";
      if (auto str = varints_of(l, 2); !str.empty()) s += strings.at(str[0]);
      if (auto num = varints_of(l, 3); !num.empty())
        s += std::to_string(num[0]) + strings.at(varints_of(l, 4).at(0));
      out.push_back(s);
    }
    return out;
  }
};

KeyCount key(uint32_t pid, const std::string& comm, uint64_t count, uint64_t weight = 0) {
  KeyCount k;
  k.key.pid = pid;
  k.key.comm = comm;
  k.count = count;
  k.weight = weight ? weight : count;
  return k;
}

Snapshot two_stacks() {
  Snapshot snap;
  snap.kernel.release = "6.1.0-test";
  snap.kernel.build_id = "00112233445566778899aabbccddeeff00112233";
  snap.stacks.push_back({7, 5, {0xffffffff81000010, 0xffffffff81000100}, 5});
  snap.stacks.push_back({42, 2, {0xffffffff81000020, 0xffffffff81000100, 0xffffffffc0000000}, 2});
  return snap;
}

// The profile of `snap` (interned here, as its producers do), kernel frames
// named by a table as a JSON export names them.
std::string pprof_of(Snapshot snap, const PprofOptions& opt = {}) {
  static const FunctionNames table{{0xffffffff81000010, {"schedule", ""}},
                                   {0xffffffff81000020, {"kmem_cache_alloc", ""}},
                                   {0xffffffff81000100, {"do_syscall_64", ""}}};
  intern_callstacks(snap);
  return encode_pprof(snap, FrameNames(snap, nullptr, &table), opt);
}

TEST(PprofTest, FollowsPprofsRules) {
  Profile p(pprof_of(two_stacks()));
  ASSERT_FALSE(p.strings.empty());
  EXPECT_EQ(p.strings[0], "");
  EXPECT_EQ(p.sample_types(),
            (std::vector<std::pair<std::string, std::string>>{{"events", "count"}}));
  auto locations = p.messages(4);
  EXPECT_EQ(locations.size(), 4u);  // distinct addresses
  for (const auto& loc : locations) {
    EXPECT_NE(varints_of(loc, 1).at(0), 0u);
    EXPECT_EQ(varints_of(loc, 2).at(0), 1u);  // the kernel mapping
  }
  auto mappings = p.messages(3);
  ASSERT_EQ(mappings.size(), 1u);
  EXPECT_EQ(p.strings.at(varints_of(mappings[0], 5).at(0)), "[kernel.kallsyms]");
  EXPECT_EQ(p.strings.at(varints_of(mappings[0], 6).at(0)),
            "00112233445566778899aabbccddeeff00112233");
  EXPECT_LE(varints_of(mappings[0], 2).at(0), 0xffffffff81000010u);
  EXPECT_GT(varints_of(mappings[0], 3).at(0), 0xffffffffc0000000u);
  EXPECT_EQ(p.messages(5).size(), 4u);  // functions: the unresolved address is its own
}

// pprof names a location of a mapping that claims functions by the mapping
// alone when it has none: an unsymbolized profile would be one node.
TEST(PprofTest, KernelMappingClaimsFunctionsOnlyWhenItsFramesHaveThem) {
  Profile named(pprof_of(two_stacks()));
  EXPECT_EQ(varints_of(named.messages(3).at(0), 7), std::vector<uint64_t>{1});
  Snapshot snap = two_stacks();
  intern_callstacks(snap);
  Profile raw(encode_pprof(snap, FrameNames(snap, nullptr), {}));
  ASSERT_EQ(raw.messages(3).size(), 1u);
  EXPECT_TRUE(varints_of(raw.messages(3)[0], 7).empty());  // has_functions not written
  EXPECT_EQ(raw.messages(4).size(), 4u);                   // each address its own location
  // ... named by its address, since pprof's default view drops addresses and
  // would show every unnamed location as one "[kernel.kallsyms]" node.
  std::set<std::string> names;
  for (const auto& fn : raw.messages(5)) names.insert(raw.strings.at(varints_of(fn, 2).at(0)));
  EXPECT_EQ(names, (std::set<std::string>{"0xffffffff81000010", "0xffffffff81000020",
                                          "0xffffffff81000100", "0xffffffffc0000000"}));
  PprofOptions based;
  based.address_base = 0xffffffff81000000;  // no raw kernel address, not even in a name
  Profile offsets(encode_pprof(snap, FrameNames(snap, nullptr), based));
  names.clear();
  for (const auto& fn : offsets.messages(5))
    names.insert(offsets.strings.at(varints_of(fn, 2).at(0)));
  EXPECT_EQ(names.count("_text+0x10"), 1u);
  EXPECT_EQ(names.count("0xffffffff81000010"), 0u);
}

TEST(PprofTest, OneSamplePerStackLeafFirstWithItsCount) {
  Profile p(pprof_of(two_stacks()));
  auto samples = p.messages(2);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(varints_of(samples[0], 2), std::vector<uint64_t>{5});
  EXPECT_EQ(varints_of(samples[1], 2), std::vector<uint64_t>{2});
  // Location ids map back to the stack's addresses, innermost first.
  std::map<uint64_t, uint64_t> address;
  std::map<uint64_t, std::string> function_of_location;
  std::map<uint64_t, std::string> function_name;
  for (const auto& fn : p.messages(5))
    function_name[varints_of(fn, 1).at(0)] = p.strings.at(varints_of(fn, 2).at(0));
  for (const auto& loc : p.messages(4)) {
    address[varints_of(loc, 1).at(0)] = varints_of(loc, 3).at(0);
    for (const Field& line : fields_of(loc, 4))
      function_of_location[varints_of(loc, 1)[0]] =
          function_name.at(varints_of(parse_message(line.bytes), 1).at(0));
  }
  std::vector<uint64_t> ips;
  for (uint64_t id : varints_of(samples[1], 1)) ips.push_back(address.at(id));
  EXPECT_EQ(ips, two_stacks().stacks[1].ips);
  EXPECT_EQ(function_of_location.at(varints_of(samples[1], 1)[0]), "kmem_cache_alloc");
  EXPECT_EQ(function_of_location.at(varints_of(samples[1], 1)[2]), "0xffffffffc0000000");
}

TEST(PprofTest, ByKeysBecomeLabelsNumericOnesWithAUnit) {
  Snapshot snap = two_stacks();
  snap.keys = KeySpec::parse("pid,comm");
  snap.keys_requested = true;
  snap.stacks[0].by = {key(0, "swapper/0", 3), key(812, "nginx", 2)};
  KeyCount other;
  other.other = true;
  other.count = other.weight = 2;
  snap.stacks[1].by = {other};
  Profile p(pprof_of(snap));
  auto samples = p.messages(2);
  std::multiset<std::vector<std::string>> labels;
  uint64_t total = 0;
  for (const auto& s : samples) {
    labels.insert(p.labels(s));
    total += varints_of(s, 2).at(0);
  }
  EXPECT_EQ(total, 7u);
  EXPECT_EQ(labels,
            (std::multiset<std::vector<std::string>>{
                {"pid=0pid", "comm=swapper/0"}, {"pid=812pid", "comm=nginx"}, {"other=true"}}));
  // Label keys as Pyroscope accepts them: [a-zA-Z_][a-zA-Z0-9_]*.
  for (const auto& s : samples)
    for (const Field& f : fields_of(s, 3)) {
      const std::string& k = p.strings.at(varints_of(parse_message(f.bytes), 1).at(0));
      EXPECT_TRUE(std::regex_match(k, std::regex("[a-zA-Z_][a-zA-Z0-9_]*"))) << k;
    }
}

TEST(PprofTest, LeftOutLabelsMergeTheirSamples) {
  Snapshot snap = two_stacks();
  snap.keys = KeySpec::parse("pid,comm");
  snap.keys_requested = true;
  snap.stacks[0].by = {key(1, "worker", 3), key(2, "worker", 2)};
  PprofOptions opt;
  opt.label_keys = std::vector<KeyField>{KeyField::comm};
  Profile p(pprof_of(snap, opt));
  auto samples = p.messages(2);
  ASSERT_EQ(samples.size(), 2u);  // stack 7 merged, stack 42 without keys
  EXPECT_EQ(p.labels(samples[0]), std::vector<std::string>{"comm=worker"});
  EXPECT_EQ(varints_of(samples[0], 2), std::vector<uint64_t>{5});
}

TEST(PprofTest, ProfileHzGivesCpuTimeAndItsPeriod) {
  PprofOptions opt;
  opt.profile_hz = 100;
  Profile p(pprof_of(two_stacks(), opt));
  EXPECT_EQ(p.sample_types(), (std::vector<std::pair<std::string, std::string>>{
                                  {"samples", "count"}, {"cpu", "nanoseconds"}}));
  EXPECT_EQ(varints_of(p.messages(2)[0], 2), (std::vector<uint64_t>{5, 5 * 10000000ull}));
  EXPECT_EQ(varints_of(p.fields, 12), std::vector<uint64_t>{10000000});
  auto period_type = p.messages(11);
  ASSERT_EQ(period_type.size(), 1u);
  EXPECT_EQ(p.strings.at(varints_of(period_type[0], 1).at(0)), "cpu");
}

TEST(PprofTest, WeightsAreASecondValueInTheirUnit) {
  Snapshot snap = two_stacks();
  snap.weight_unit = "bytes_alloc";
  snap.stacks[0].weight = 640;
  snap.stacks[1].weight = 64;
  Profile p(pprof_of(snap));
  EXPECT_EQ(p.sample_types(), (std::vector<std::pair<std::string, std::string>>{
                                  {"events", "count"}, {"bytes_alloc", "bytes"}}));
  EXPECT_EQ(varints_of(p.messages(2)[0], 2), (std::vector<uint64_t>{5, 640}));
  EXPECT_EQ(p.strings.at(varints_of(p.fields, 14).at(0)), "bytes_alloc");
  snap.weight_unit = "nr_pages";  // no byte-like name: a count of it
  EXPECT_EQ(Profile(pprof_of(snap)).sample_types()[1],
            (std::pair<std::string, std::string>{"nr_pages", "count"}));
  snap.weight_unit = "ns";
  Profile offcpu(pprof_of(snap));
  EXPECT_EQ(offcpu.sample_types()[1],
            (std::pair<std::string, std::string>{"offcpu", "nanoseconds"}));
}

// --user-stacks: stack 7 split between two user stacks and the `other` entry.
Snapshot with_user_stacks() {
  Snapshot snap = two_stacks();
  snap.user.enabled = true;
  snap.user.binaries = {{"/usr/bin/app", "aabbccddeeff00112233445566778899aabbccdd"},
                        {"/usr/lib/libc.so.6", ""}};
  UserStack app;
  app.pid = 812;
  // Leaf first: a function inlined into `three`, then `two` at a return
  // address, then a frame in libc that did not resolve, then one in no file.
  app.frames.push_back({0x55550000a130, 0, 0x1130, 0x1130, {"inl+0x4", "three+0x10"}, "w.c:12"});
  app.frames.push_back({0x55550000a200, 0, 0x1200, 0x1200, {"two+0x8"}, ""});
  app.frames.push_back({0x7f0000029d90, 1, 0x29d90, 0, {}, ""});
  app.frames.push_back({0x7ffff000, -1, 0, 0, {}, ""});
  snap.user.stacks[3] = app;
  UserStack other_app;
  other_app.frames.push_back({0x55660000a200, 0, 0x1200, 0x1200, {"two+0x8"}, ""});
  snap.user.stacks[4] = other_app;
  KeyCount a, b, other;
  a.key.ustack = 3;
  a.count = a.weight = 3;
  b.key.ustack = 4;
  b.count = b.weight = 1;
  other.other = true;
  other.count = other.weight = 1;
  snap.stacks[0].by = {a, b, other};
  snap.stacks[1].by = {other};
  snap.stacks[1].by[0].count = snap.stacks[1].by[0].weight = 2;
  return snap;
}

TEST(PprofTest, UserFramesFollowTheKernelsInTheirBinarysMapping) {
  const Snapshot snap = with_user_stacks();
  Profile p(pprof_of(snap));
  std::map<uint64_t, std::vector<Field>> location, mapping;
  for (const auto& loc : p.messages(4)) location[varints_of(loc, 1).at(0)] = loc;
  for (const auto& m : p.messages(3)) mapping[varints_of(m, 1).at(0)] = m;
  std::map<uint64_t, std::pair<std::string, std::string>> function;  // id -> (name, file)
  for (const auto& fn : p.messages(5)) {
    auto file = varints_of(fn, 4);
    function[varints_of(fn, 1).at(0)] = {p.strings.at(varints_of(fn, 2).at(0)),
                                         file.empty() ? "" : p.strings.at(file[0])};
  }
  // Per sample, leaf first: "K:address" for kernel frames, "U<mapping>:address".
  std::multiset<std::pair<std::vector<std::string>, uint64_t>> samples;
  for (const auto& s : p.messages(2)) {
    std::vector<std::string> frames;
    for (uint64_t id : varints_of(s, 1)) {
      const auto& loc = location.at(id);
      auto m = varints_of(loc, 2);
      char buf[64];
      snprintf(buf, sizeof(buf), "%s%llu:%llx", m.empty() || m[0] != 1 ? "U" : "K",
               m.empty() ? 0ull : static_cast<unsigned long long>(m[0]),
               static_cast<unsigned long long>(varints_of(loc, 3).at(0)));
      frames.push_back(buf);
    }
    samples.insert({frames, varints_of(s, 2).at(0)});
  }
  using Sample = std::pair<std::vector<std::string>, uint64_t>;
  EXPECT_EQ(samples,
            (std::multiset<Sample>{
                // Return addresses less one; the frame in no file keeps its address.
                {{"K1:ffffffff81000010", "K1:ffffffff81000100", "U2:1130", "U2:11ff", "U3:29d8f",
                  "U0:7fffefff"},
                 3},
                {{"K1:ffffffff81000010", "K1:ffffffff81000100", "U2:1200"}, 1},
                {{"K1:ffffffff81000010", "K1:ffffffff81000100"}, 1},
                {{"K1:ffffffff81000020", "K1:ffffffff81000100", "K1:ffffffffc0000000"}, 2}}));

  // The inlined frame: two lines, innermost first, file:line on it.
  std::vector<std::tuple<std::string, std::string, uint64_t>> lines;
  for (const auto& [id, loc] : location)
    if (varints_of(loc, 3).at(0) == 0x1130)
      for (const Field& l : fields_of(loc, 4)) {
        auto line = parse_message(l.bytes);
        auto number = varints_of(line, 2);
        const auto& fn = function.at(varints_of(line, 1).at(0));
        lines.emplace_back(fn.first, fn.second, number.empty() ? 0 : number[0]);
      }
  EXPECT_EQ(lines, (std::vector<std::tuple<std::string, std::string, uint64_t>>{{"inl", "w.c", 12},
                                                                                {"three", "", 0}}));
  // Unresolved in a binary: no line, pprof names it by its mapping ("[libc.so.6]")
  // and may resolve it by the build id. In no file: named by its address, as the
  // text outputs name it, never pprof's "<unknown>".
  for (const auto& [id, loc] : location) {
    if (varints_of(loc, 3).at(0) == 0x29d8f) {
      EXPECT_TRUE(fields_of(loc, 4).empty()) << "an unresolved frame in a binary has no line";
    }
    if (varints_of(loc, 3).at(0) == 0x7fffefff) {
      ASSERT_EQ(fields_of(loc, 4).size(), 1u);
      const auto line = parse_message(fields_of(loc, 4)[0].bytes);
      EXPECT_EQ(function.at(varints_of(line, 1).at(0)).first, "0x7ffff000");
    }
  }

  // The kernel's mapping, then one per binary: path, build id, addresses
  // from 0 (file offsets), what its frames resolved to.
  ASSERT_EQ(mapping.size(), 3u);
  const auto& app = mapping.at(2);
  EXPECT_EQ(p.strings.at(varints_of(app, 5).at(0)), "/usr/bin/app");
  EXPECT_EQ(p.strings.at(varints_of(app, 6).at(0)), "aabbccddeeff00112233445566778899aabbccdd");
  EXPECT_TRUE(varints_of(app, 2).empty() || varints_of(app, 2)[0] == 0);  // memory_start
  EXPECT_TRUE(varints_of(app, 4).empty() || varints_of(app, 4)[0] == 0);  // file_offset
  EXPECT_EQ(varints_of(app, 3), std::vector<uint64_t>{0x1201});           // past the highest
  for (uint32_t flag : {7, 8, 9, 10}) EXPECT_EQ(varints_of(app, flag), std::vector<uint64_t>{1});
  const auto& libc = mapping.at(3);
  EXPECT_EQ(p.strings.at(varints_of(libc, 5).at(0)), "/usr/lib/libc.so.6");
  EXPECT_TRUE(varints_of(libc, 6).empty());
  for (uint32_t flag : {7, 8, 9, 10}) EXPECT_TRUE(varints_of(libc, flag).empty()) << flag;
}

TEST(PprofTest, WithoutUserStacksNoUserMapping) {
  Snapshot snap = with_user_stacks();
  snap.user.enabled = false;
  Profile p(pprof_of(snap));
  EXPECT_EQ(p.messages(3).size(), 1u);
  EXPECT_EQ(p.messages(2).size(), 2u);
}

TEST(DeltaSnapshotTest, SubtractsPerStackAndKey) {
  Snapshot before = two_stacks(), after = two_stacks();
  before.keys = after.keys = KeySpec::parse("pid,comm");
  before.keys_requested = after.keys_requested = true;
  before.stacks[0].by = {key(1, "a", 4), key(2, "b", 1)};
  after.stacks[0] = {7, 9, before.stacks[0].ips, 9, {key(2, "b", 5), key(1, "a", 4)}};
  // Stack 42 did not change; stack 99 is new; stack 7's key "a" did not change.
  after.stacks.push_back({99, 3, {0xffffffff81000030}, 3});
  before.stats.counters[SMC_HITS] = 7;
  after.stats.counters[SMC_HITS] = 14;
  Snapshot d = delta_snapshot(before, after);
  ASSERT_EQ(d.stacks.size(), 2u);
  EXPECT_EQ(d.stacks[0].stack_id, 7u);
  EXPECT_EQ(d.stacks[0].ref_count, 4u);
  ASSERT_EQ(d.stacks[0].by.size(), 1u);
  EXPECT_EQ(d.stacks[0].by[0].key.comm, "b");
  EXPECT_EQ(d.stacks[0].by[0].count, 4u);
  EXPECT_EQ(d.stacks[1].stack_id, 99u);
  EXPECT_EQ(d.stacks[1].ref_count, 3u);
  EXPECT_EQ(d.stats.get(SMC_HITS), 7u);
}

TEST(DeltaSnapshotTest, AReusedOrResetIdCountsWhole) {
  Snapshot before = two_stacks(), after = two_stacks();
  after.stacks[0].ips = {0xffffffff81000040};  // id 7 now another stack (a reset came between)
  after.stacks[1].ref_count = 1;               // fewer than before: counted since a reset
  after.stats.resets = 1;
  after.stats.counters[SMC_HITS] = 6;
  before.stats.counters[SMC_HITS] = 7;
  Snapshot d = delta_snapshot(before, after);
  ASSERT_EQ(d.stacks.size(), 2u);
  EXPECT_EQ(d.stacks[0].ref_count, 5u);
  EXPECT_EQ(d.stacks[1].ref_count, 1u);
  EXPECT_EQ(d.stats.get(SMC_HITS), 6u);
}

}  // namespace
}  // namespace stackmapd

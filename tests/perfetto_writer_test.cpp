// SPDX-License-Identifier: GPL-2.0
// --perfetto's writer (daemon/export/perfetto_writer.h) read back with the
// tests' own wire reader, with the field numbers of Perfetto's protos spelled
// out here (not taken from daemon/export/perfetto_protos.h, which they check);
// tests/perfetto_test.sh checks a real session's trace.
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

smt_trace_record record(uint32_t stack_id, uint32_t tgid, uint32_t tid, uint64_t ts,
                        uint16_t source = 0, uint16_t cpu = 3, uint64_t weight = 1) {
  smt_trace_record r{};
  r.event.stack_id = stack_id;
  r.event.tgid = tgid;
  r.event.tid = tid;
  r.event.cpu = cpu;
  r.event.source = source;
  r.event.weight = weight;
  r.ts_ns = ts;
  return r;
}

PerfettoSource tracepoint(const std::string& name, const std::string& sum = "") {
  return {PerfettoSource::Kind::tracepoint, name, 0, sum};
}

std::string str(const std::vector<Field>& m, uint32_t n) {
  auto f = fields_of(m, n);
  return f.empty() ? "" : std::string(f.back().bytes);
}

// A trace read back: its packets, and what each sequence interned.
struct Decoded {
  struct Sample {
    uint32_t sequence;
    uint64_t ts;
    std::vector<Field> packet, sample;
  };
  std::vector<std::vector<Field>> packets;
  std::vector<Sample> samples;
  // By (sequence, iid).
  std::map<std::pair<uint32_t, uint64_t>, std::vector<Field>> frames, mappings;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<uint64_t>> callstacks;
  // By (sequence, InternedData field, iid): function names, paths, build ids.
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, std::string> strings;
  std::map<uint32_t, std::vector<Field>> first_packet;  // by sequence
  std::vector<std::vector<Field>> threads, processes;   // ProcessTree's

  explicit Decoded(const std::vector<std::vector<Field>>& p) : packets(p) {
    for (const auto& packet : packets) {
      const auto seq = varints_of(packet, 10);
      EXPECT_EQ(seq.size(), 1u) << "a packet without trusted_packet_sequence_id";
      const uint32_t s = seq.empty() ? 0 : static_cast<uint32_t>(seq[0]);
      if (!first_packet.count(s)) first_packet[s] = packet;
      for (const Field& i : fields_of(packet, 12)) {
        auto interned = parse_message(i.bytes);
        for (uint32_t n : {5u, 16u, 17u})
          for (const Field& f : fields_of(interned, n)) {
            auto m = parse_message(f.bytes);
            const auto key = std::make_tuple(s, n, varints_of(m, 1).at(0));
            EXPECT_FALSE(strings.count(key)) << "string " << n << " interned twice";
            strings[key] = str(m, 2);
          }
        for (const Field& f : fields_of(interned, 6)) {
          auto m = parse_message(f.bytes);
          EXPECT_TRUE(frames.emplace(std::make_pair(s, varints_of(m, 1).at(0)), m).second)
              << "frame interned twice";
        }
        for (const Field& f : fields_of(interned, 19)) {
          auto m = parse_message(f.bytes);
          mappings[{s, varints_of(m, 1).at(0)}] = m;
        }
        for (const Field& c : fields_of(interned, 7)) {
          auto cs = parse_message(c.bytes);
          for (const Field& id : fields_of(cs, 2))
            EXPECT_EQ(id.wire_type, 0u) << "packed frame_ids";
          EXPECT_TRUE(
              callstacks.emplace(std::make_pair(s, varints_of(cs, 1).at(0)), varints_of(cs, 2))
                  .second)
              << "callstack interned twice";
        }
      }
      for (const Field& t : fields_of(packet, 2)) {
        auto tree = parse_message(t.bytes);
        for (const Field& th : fields_of(tree, 2)) threads.push_back(parse_message(th.bytes));
        for (const Field& pr : fields_of(tree, 1)) processes.push_back(parse_message(pr.bytes));
      }
      for (const Field& f : fields_of(packet, 66)) {
        auto sample = parse_message(f.bytes);
        auto cs = varints_of(sample, 4);
        if (!cs.empty()) {
          EXPECT_TRUE(callstacks.count({s, cs[0]}))
              << "callstack " << cs[0] << " used before sequence " << s << " interned it";
        }
        samples.push_back({s, varints_of(packet, 8).at(0), packet, sample});
      }
    }
  }

  // The sequence's PerfSampleDefaults, from the packet that started it.
  std::vector<Field> perf_defaults(uint32_t seq) const {
    const auto& p = first_packet.at(seq);
    auto defaults = fields_of(p, 59);
    if (defaults.empty()) return {};
    auto d = parse_message(defaults.at(0).bytes);
    EXPECT_EQ(varints_of(d, 58), std::vector<uint64_t>{6});  // BOOTTIME
    auto perf = fields_of(d, 12);
    return perf.empty() ? std::vector<Field>{} : parse_message(perf.at(0).bytes);
  }
  std::vector<Field> timebase(uint32_t seq) const {
    auto t = fields_of(perf_defaults(seq), 1);
    return t.empty() ? std::vector<Field>{} : parse_message(t.at(0).bytes);
  }
  // Each frame of a callstack as "path:rel_pc:function", root first.
  std::vector<std::string> describe(uint32_t seq, uint64_t callstack) const {
    std::vector<std::string> out;
    for (uint64_t id : callstacks.at({seq, callstack})) {
      const auto& frame = frames.at({seq, id});
      const auto& m = mappings.at({seq, varints_of(frame, 3).at(0)});
      auto fn = varints_of(frame, 2);
      char pc[24];
      snprintf(pc, sizeof(pc), "%llx", static_cast<unsigned long long>(varints_of(frame, 4).at(0)));
      out.push_back(strings.at({seq, 17, varints_of(m, 7).at(0)}) + ":" + pc + ":" +
                    (fn.empty() ? "" : strings.at({seq, 5, fn[0]})));
    }
    return out;
  }
};

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

const FrameNamer kLeafNamer = [](uint64_t ip) { return ip == 0xffffffff81000010 ? "leaf" : ""; };

TEST_F(PerfettoWriterTest, InternsEachStackOnceRootFirstUnpacked) {
  {
    PerfettoWriter w(path_, kLeafNamer);
    w.set_sources({tracepoint("sched:sched_switch")});
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
  Decoded d(packets());

  ASSERT_EQ(d.samples.size(), 3u);
  const int64_t offset = PerfettoWriter::boottime_offset_ns();
  EXPECT_GE(offset, 0) << "BOOTTIME is MONOTONIC and the time suspended";
  for (const auto& s : d.samples) {
    EXPECT_EQ(s.sequence, 2u);                                     // source 0's
    EXPECT_EQ(varints_of(s.sample, 5), std::vector<uint64_t>{1});  // kernel mode
    EXPECT_EQ(varints_of(s.sample, 1), std::vector<uint64_t>{3});
    EXPECT_EQ(varints_of(s.packet, 58), std::vector<uint64_t>{6});  // BOOTTIME
    EXPECT_EQ(varints_of(s.packet, 13), std::vector<uint64_t>{2});  // needs incremental state
  }
  const uint64_t cs0 = varints_of(d.samples[0].sample, 4).at(0);
  EXPECT_EQ(cs0, varints_of(d.samples[1].sample, 4).at(0));
  EXPECT_NE(cs0, varints_of(d.samples[2].sample, 4).at(0));
  EXPECT_EQ(d.callstacks.size(), 2u);
  // Root first: the outermost frame (…020) before the leaf (…010).
  EXPECT_EQ(d.describe(2, cs0),
            (std::vector<std::string>{"kernel:ffffffff81000020:", "kernel:ffffffff81000010:leaf"}));
  std::set<uint64_t> tids;
  for (const auto& t : d.threads) tids.insert(varints_of(t, 1).at(0));
  EXPECT_EQ(tids, (std::set<uint64_t>{100, 101}));
  EXPECT_NEAR(static_cast<double>(d.samples[0].ts), 1000.0 + static_cast<double>(offset), 1e6);
}

// Reported: Thread.tgid written as field 5 (Perfetto's is 3), so trace
// processor put every thread under pid 0. Process: ppid, cmdline, and
// cmdline_is_comm when the cmdline is the main thread's name.
TEST_F(PerfettoWriterTest, ThreadsBelongToTheirProcessByTgid) {
  const uint32_t self = static_cast<uint32_t>(getpid());
  const uint32_t gone = 0x7ffffff0;  // no such process
  {
    PerfettoWriter w(path_, {});
    w.set_sources({tracepoint("sched:sched_switch")});
    w.write(record(1, self, self + 1, 1000), "worker", {0xffffffff81000010});
    w.write(record(1, gone, gone, 2000), "gone-main", {0xffffffff81000010});
    w.write(record(1, gone - 2, gone - 1, 3000), "gone-thread", {0xffffffff81000010});
    w.write(record(1, 2, 2, 4000), "kthreadd", {0xffffffff81000010});
    w.finish();
  }
  Decoded d(packets());
  std::map<uint64_t, std::vector<Field>> threads, processes;
  for (const auto& t : d.threads) threads[varints_of(t, 1).at(0)] = t;
  for (const auto& p : d.processes) processes[varints_of(p, 1).at(0)] = p;
  ASSERT_EQ(threads.size(), 4u);
  for (const auto& [tid, t] : threads) {
    EXPECT_TRUE(fields_of(t, 5).empty()) << "Thread has no field 5: Perfetto drops it";
    EXPECT_EQ(varints_of(t, 3).size(), 1u) << "tgid (3) of thread " << tid;
  }
  EXPECT_EQ(varints_of(threads.at(self + 1), 3), std::vector<uint64_t>{self});
  EXPECT_EQ(str(threads.at(self + 1), 2), "worker");
  EXPECT_EQ(varints_of(threads.at(gone - 1), 3), std::vector<uint64_t>{gone - 2});
  for (const auto& s : d.samples) {  // each sample's thread was named before it, in its process
    const auto& t = threads.at(varints_of(s.sample, 3).at(0));
    EXPECT_EQ(varints_of(t, 3), varints_of(s.sample, 2));
  }

  const auto& me = processes.at(self);
  EXPECT_EQ(varints_of(me, 2), std::vector<uint64_t>{static_cast<uint64_t>(getppid())});  // ppid
  ASSERT_FALSE(fields_of(me, 3).empty());
  EXPECT_NE(std::string(fields_of(me, 3).at(0).bytes).find("unit_tests"), std::string::npos);
  EXPECT_TRUE(varints_of(me, 9).empty()) << "a real cmdline is no comm";
  EXPECT_TRUE(varints_of(me, 8).empty()) << "not a kernel thread";
  // Gone: the main thread's name is the cmdline, and says so; a thread's is not.
  EXPECT_EQ(str(processes.at(gone), 3), "gone-main");
  EXPECT_EQ(varints_of(processes.at(gone), 9), std::vector<uint64_t>{1});
  EXPECT_TRUE(varints_of(processes.at(gone), 2).empty()) << "no ppid known";
  EXPECT_EQ(str(processes.at(gone - 2), 3), "gone-thread");
  EXPECT_TRUE(varints_of(processes.at(gone - 2), 9).empty());
  // A kernel thread (where pid 2 is kthreadd, not in a PID namespace).
  std::ifstream comm2("/proc/2/comm");
  if (std::string name; std::getline(comm2, name) && name == "kthreadd") {
    const auto& k = processes.at(2);
    EXPECT_EQ(str(k, 3), "kthreadd");
    EXPECT_EQ(varints_of(k, 9), std::vector<uint64_t>{1});
    EXPECT_EQ(varints_of(k, 8), std::vector<uint64_t>{1});
    EXPECT_EQ(varints_of(k, 2), std::vector<uint64_t>{0});
  }
}

// Reported: the kernel's mapping was "[kernel.kallsyms]" with a range and a
// build id, which trace processor takes for a user mapping in every process.
// traced_perf's, which it takes for the kernel: one path component "kernel",
// start, end, exact_offset and build id 0 (unset); frames keep their names.
TEST_F(PerfettoWriterTest, KernelMappingIsTracedPerfs) {
  {
    PerfettoWriter w(path_, kLeafNamer);
    w.set_sources({tracepoint("sched:sched_switch"), tracepoint("kmem:kmalloc")});
    w.write(record(5, 100, 100, 1000, 0), "a", {0xffffffff81000010, 0xffffffff81000020});
    w.write(record(5, 100, 100, 2000, 1), "a", {0xffffffff81000010, 0xffffffff81000020});
    w.finish();
  }
  Decoded d(packets());
  ASSERT_EQ(d.samples.size(), 2u);
  // On each sequence with samples (one per source: EachSourceIsASession...).
  for (const auto& sample : d.samples) {
    const uint32_t seq = sample.sequence;
    SCOPED_TRACE("sequence " + std::to_string(seq));
    // Interned where the sequence starts (clearing its incremental state).
    const auto& first = d.first_packet.at(seq);
    EXPECT_EQ(varints_of(first, 13), std::vector<uint64_t>{1});
    ASSERT_FALSE(fields_of(first, 12).empty());
    auto interned = parse_message(fields_of(first, 12).at(0).bytes);
    ASSERT_EQ(fields_of(interned, 19).size(), 1u);
    auto m = parse_message(fields_of(interned, 19).at(0).bytes);
    const auto paths = varints_of(m, 7);
    ASSERT_EQ(paths.size(), 1u);
    EXPECT_EQ(d.strings.at({seq, 17, paths[0]}), "kernel");
    for (uint32_t n : {2u, 3u, 4u, 5u, 6u, 8u})  // build_id, offsets, start, end, load_bias
      for (uint64_t v : varints_of(m, n)) EXPECT_EQ(v, 0u) << "Mapping field " << n;
    EXPECT_TRUE(fields_of(interned, 16).empty()) << "no build id interned";
    // Both frames in it, rel_pc the address, the leaf named.
    const uint64_t cs = varints_of(sample.sample, 4).at(0);
    EXPECT_EQ(d.describe(seq, cs), (std::vector<std::string>{"kernel:ffffffff81000020:",
                                                             "kernel:ffffffff81000010:leaf"}));
    for (uint64_t id : d.callstacks.at({seq, cs}))
      EXPECT_EQ(varints_of(d.frames.at({seq, id}), 3), varints_of(m, 1));
  }
}

// Reported: no timebase, so the UI could not say what a sample is, nor
// tell -e sources apart. Each source is a sequence (a perf session to trace
// processor) whose defaults name its timebase; samples count it per CPU.
TEST_F(PerfettoWriterTest, EachSourceIsASessionWithItsTimebase) {
  const std::vector<uint64_t> stack{0xffffffff81000010};
  {
    PerfettoWriter w(path_, kLeafNamer);
    w.set_sources({tracepoint("sched:sched_switch"),
                   tracepoint("kmem:kmalloc", "bytes_alloc"),
                   {PerfettoSource::Kind::function, "vfs_read", 0, ""},
                   {PerfettoSource::Kind::profile, "profile", 99, ""},
                   {PerfettoSource::Kind::offcpu, "offcpu", 0, ""}});
    w.write(record(5, 100, 100, 1000, 0, 0), "a", stack);
    w.write(record(5, 100, 100, 1100, 1, 0, 64), "a", stack);  // same stack, other source
    w.write(record(5, 100, 100, 1200, 0, 0), "a", stack);
    w.write(record(5, 100, 100, 1300, 0, 1), "a", stack);  // CPU 1 counts apart
    w.write(record(5, 100, 100, 1400, 1, 0, 128), "a", stack);
    w.write(record(6, 100, 100, 1500, 2, 0), "a", stack);
    w.write(record(6, 100, 100, 1600, 3, 0), "a", stack);
    w.write(record(6, 100, 100, 1700, 3, 0), "a", stack);
    w.write(record(6, 100, 100, 1800, 4, 0, 5000), "a", stack);
    w.write(record(6, 100, 100, 1900, 4, 0, 7000), "a", stack);
    w.write(record(6, 100, 100, 2000, 7, 0), "a", stack);  // a source it was not told of
    w.finish();
  }
  Decoded d(packets());
  // Source S on sequence 2 + S, each started by its own packet.
  std::map<uint32_t, std::vector<uint64_t>> counts;  // by sequence: timebase_count in order
  std::map<uint32_t, std::vector<uint64_t>> followers;
  for (const auto& s : d.samples) {
    EXPECT_EQ(varints_of(s.packet, 13), std::vector<uint64_t>{2});
    ASSERT_EQ(varints_of(s.sample, 6).size(), 1u) << "timebase_count (6)";
    counts[s.sequence].push_back(varints_of(s.sample, 6)[0]);
    for (uint64_t f : varints_of(s.sample, 7)) followers[s.sequence].push_back(f);
  }
  EXPECT_EQ(counts, (std::map<uint32_t, std::vector<uint64_t>>{
                        {2, {1, 2, 1}},  // events, per CPU
                        {3, {1, 2}},     // events; --sum's field in the follower
                        {4, {1}},
                        {5, {10101010, 20202020}},  // 1e9/99 ns of cpu-clock a sample
                        {6, {5000, 12000}},         // ns off the CPU
                        {9, {1}},
                    }));
  EXPECT_EQ(followers, (std::map<uint32_t, std::vector<uint64_t>>{{3, {64, 192}}}));

  for (uint32_t seq : {2u, 3u, 4u, 5u, 6u, 9u}) {
    const auto& first = d.first_packet.at(seq);
    EXPECT_EQ(varints_of(first, 13), std::vector<uint64_t>{1}) << seq;  // cleared
    EXPECT_EQ(varints_of(first, 87), std::vector<uint64_t>{1}) << seq;
    EXPECT_TRUE(fields_of(first, 66).empty()) << "defaults and samples apart";
  }
  // Tracepoints: period 1, the tracepoint by name (trace processor names
  // the session after it, unit "count").
  for (auto [seq, name] : {std::pair{2u, "sched:sched_switch"}, {3u, "kmem:kmalloc"}}) {
    auto t = d.timebase(seq);
    EXPECT_EQ(varints_of(t, 1), std::vector<uint64_t>{1});  // period
    ASSERT_EQ(fields_of(t, 3).size(), 1u) << seq;
    EXPECT_EQ(str(parse_message(fields_of(t, 3)[0].bytes), 1), name);
    EXPECT_TRUE(fields_of(t, 10).empty()) << "the tracepoint names it";
  }
  EXPECT_TRUE(fields_of(d.perf_defaults(2), 4).empty()) << "no follower without --sum";
  auto followers3 = fields_of(d.perf_defaults(3), 4);
  ASSERT_EQ(followers3.size(), 1u);
  EXPECT_EQ(str(parse_message(followers3[0].bytes), 4), "bytes_alloc");
  // -f: named after its function, period 1, no event of perf's.
  EXPECT_EQ(str(d.timebase(4), 10), "vfs_read");
  EXPECT_EQ(varints_of(d.timebase(4), 1), std::vector<uint64_t>{1});
  EXPECT_TRUE(fields_of(d.timebase(4), 3).empty() && fields_of(d.timebase(4), 4).empty());
  // --profile 99: cpu-clock (SW_CPU_CLOCK = 1) at 99 Hz (unit "ns").
  EXPECT_EQ(varints_of(d.timebase(5), 2), std::vector<uint64_t>{99});
  EXPECT_EQ(varints_of(d.timebase(5), 4), std::vector<uint64_t>{1});
  EXPECT_TRUE(fields_of(d.timebase(5), 10).empty()) << "trace processor says cpu-clock";
  // --offcpu: a name only.
  EXPECT_EQ(str(d.timebase(6), 10), "offcpu");
  EXPECT_EQ(d.timebase(6).size(), 1u);
  EXPECT_EQ(str(d.timebase(9), 10), "source 7");

  // Interning is per sequence: stack 5 is interned on both of its sources'.
  EXPECT_EQ(d.describe(2, varints_of(d.samples[0].sample, 4).at(0)),
            std::vector<std::string>{"kernel:ffffffff81000010:leaf"});
  EXPECT_EQ(d.describe(3, varints_of(d.samples[1].sample, 4).at(0)),
            std::vector<std::string>{"kernel:ffffffff81000010:leaf"});
}

TEST(PerfettoSources, KindsFromTheSessionsConfig) {
  SessionConfig config;
  config.events = {{"sched", "sched_switch"}, {"kmem", "kmalloc"}};
  config.functions = {{"vfs_read", true, ""}, {"profile", true, ""}};  // a function named "profile"
  config.profile_hz = 49;
  config.offcpu = OffcpuConfig{};
  using K = PerfettoSource::Kind;
  EXPECT_EQ(perfetto_sources(
                {"sched:sched_switch", "kmem:kmalloc", "vfs_read", "profile", "profile", "offcpu"},
                config),
            (std::vector<PerfettoSource>{{K::tracepoint, "sched:sched_switch", 0, ""},
                                         {K::tracepoint, "kmem:kmalloc", 0, ""},
                                         {K::function, "vfs_read", 0, ""},
                                         {K::function, "profile", 0, ""},
                                         {K::profile, "profile", 49, ""},
                                         {K::offcpu, "offcpu", 0, ""}}));
  config = {};
  config.events = {{"kmem", "kmalloc"}};
  config.sum_field = "bytes_alloc";
  config.functions = {{"offcpu", true, ""}};  // no --offcpu: a function
  EXPECT_EQ(perfetto_sources({"kmem:kmalloc", "offcpu"}, config),
            (std::vector<PerfettoSource>{{K::tracepoint, "kmem:kmalloc", 0, "bytes_alloc"},
                                         {K::function, "offcpu", 0, ""}}));
}

TEST_F(PerfettoWriterTest, UserFramesComeFirstInTheirBinarysMapping) {
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
    PerfettoWriter w(path_, kLeafNamer);
    w.set_sources({tracepoint("kmem:kmalloc")});
    smt_trace_record r = record(5, 100, 100, 1000);
    r.event.user_stack_id = 9;
    w.write(r, "app", {0xffffffff81000010}, &user);
    w.write(r, "app", {}, &user);  // no kernel frames: a user-mode sample
    r.event.user_stack_id = kNoUserStack;
    w.write(r, "app", {0xffffffff81000010}, &user);
    w.finish();
  }
  Decoded d(packets());
  ASSERT_EQ(d.samples.size(), 3u);
  const auto callstack = [&](size_t i) { return varints_of(d.samples[i].sample, 4).at(0); };
  const auto mode = [&](size_t i) { return varints_of(d.samples[i].sample, 5).at(0); };
  EXPECT_EQ(d.describe(2, callstack(0)),
            (std::vector<std::string>{"[unknown]:7fffefff:", "/usr/bin/app:21ff:main",
                                      "/usr/bin/app:2130:three", "/usr/bin/app:2130:inl (inlined)",
                                      "kernel:ffffffff81000010:leaf"}));
  EXPECT_EQ(mode(0), 1u);  // kernel mode: the leaf is the kernel's
  EXPECT_EQ(
      d.describe(2, callstack(1)),
      (std::vector<std::string>{"[unknown]:7fffefff:", "/usr/bin/app:21ff:main",
                                "/usr/bin/app:2130:three", "/usr/bin/app:2130:inl (inlined)"}));
  EXPECT_EQ(mode(1), 2u);  // user mode
  EXPECT_EQ(d.describe(2, callstack(2)), std::vector<std::string>{"kernel:ffffffff81000010:leaf"});
  EXPECT_EQ(mode(2), 1u);
  // The binary's mapping: its build id as raw bytes, an empty range.
  ASSERT_EQ(d.mappings.size(), 3u);  // the kernel, the app, [unknown]
  for (const auto& [key, m] : d.mappings) {
    if (d.strings.at({key.first, 17, varints_of(m, 7).at(0)}) != "/usr/bin/app") continue;
    EXPECT_EQ(d.strings.at({key.first, 16, varints_of(m, 2).at(0)}),
              std::string("\xaa\xbb\xcc\xdd\xee\xff\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99"
                          "\xaa\xbb\xcc\xdd",
                          20));
    EXPECT_TRUE(varints_of(m, 4).empty() && varints_of(m, 5).empty());
  }
}

// Names and paths are bytes: the thread name, a function name and
// a binary's path go into the trace escaped (utf8_text.h), never raw.
TEST_F(PerfettoWriterTest, NamesThatAreNotUtf8AreEscaped) {
  UserStackSet user;
  user.enabled = true;
  user.binaries = {{"/tmp/\xff\xfe/app", "aabb"}};
  UserStack s;
  s.frames.push_back({0x555500001130, 0, 0x1130, 0x2130, {"f\xc0\xaf"}, ""});
  user.stacks[9] = s;
  {
    PerfettoWriter w(path_, [](uint64_t) { return "k\xed\xa0\x80"; });
    w.set_sources({{PerfettoSource::Kind::function, "g\xff", 0, ""}});
    smt_trace_record r = record(5, 0x7ffffff0, 0x7ffffff0, 1000);  // no such process
    r.event.user_stack_id = 9;
    w.write(r, "\xff-x", {0xffffffff81000010}, &user);
    w.finish();
  }
  packets();
  for (const char* text :
       {"\\xff-x", "/tmp/\\xff\\xfe/app", "f\\xc0\\xaf", "k\\xed\\xa0\\x80", "g\\xff"})
    EXPECT_NE(data_.find(text), std::string::npos) << text;
  for (const char* raw : {"\xff-x", "\xff\xfe/app", "f\xc0\xaf", "k\xed", "g\xff"})
    EXPECT_EQ(data_.find(raw), std::string::npos) << raw;
}

TEST_F(PerfettoWriterTest, ABadPathFailsAtOnceAndNothingIsLeftUnfinished) {
  EXPECT_THROW(PerfettoWriter((dir_ / "missing" / "t.pftrace").string(), {}), Error);
  { PerfettoWriter w(path_, {}); }  // never finished: no file
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

}  // namespace
}  // namespace stackmapd

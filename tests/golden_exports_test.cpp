// SPDX-License-Identifier: GPL-2.0
// Every output of one fixed snapshot, byte for byte, against the files in
// tests/fixtures/golden/: the file contracts (stack_map, stack_map_stat,
// stack_map_bin, stack_map.json, stack_map.kernel), the views (--top, folded,
// SVG, pprof, JSON without addresses, metrics) and what decode reads back
// from the JSON and FSMB files. Moving code must leave these bytes alone.
// After a deliberate format change, rewrite them with
// STACKMAPD_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "daemon/export/breakdown.h"
#include "daemon/export/decode.h"
#include "daemon/export/exports.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/pprof.h"
#include "daemon/http/metrics.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/build_info.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

const char kKallsyms[] =
    "ffffffff81000000 T _text\n"
    "ffffffff81000100 T schedule\n"
    "ffffffff810001c0 T schedule_timeout\n"
    "ffffffff81000200 T do_syscall_64\n"
    "ffffffff81000300 T entry_SYSCALL_64\n"
    "ffffffff81000400 T omega\n"
    "ffffffffc0000000 t nf_hook_slow\t[nf_tables]\n"
    "ffffffffc0000100 t nf_next\t[nf_tables]\n";

KeyCount key(uint32_t pid, const char* comm, const char* source, uint32_t ustack, uint64_t count,
             uint64_t weight) {
  KeyCount k;
  k.key.pid = pid;
  k.key.comm = comm;
  k.key.source = source;
  k.key.ustack = ustack;
  k.count = count;
  k.weight = weight;
  return k;
}

// Kernel stacks with keys, weights, a name that is not UTF-8, an unresolved
// frame, a module frame, the `other` entry, and user stacks of two binaries.
Snapshot golden_snapshot() {
  Snapshot s;
  s.bits = 10;
  s.hash_seed = 0x5eed;
  s.stats.counters[SMC_HITS] = 11;
  s.stats.counters[SMC_INSERTS] = 3;
  s.stats.entries = 7;
  s.stats.pool_size = 1024;
  s.stats.table_size = 1024;
  s.stats.resets = 1;
  s.stats.events_total = 12;
  s.stats.key_pairs = 4;
  s.stats.max_key_pairs = 49152;
  s.stats.user_stacks = true;
  s.stats.user_entries = 2;
  s.kernel.release = "6.1.0-golden";
  s.kernel.build_id = "00112233445566778899aabbccddeeff00112233";
  s.kernel.text_address = 0xffffffff81000000;
  s.keys = KeySpec{{KeyField::pid, KeyField::comm, KeyField::source}};
  s.keys_requested = true;
  s.weight_unit = "bytes_alloc";
  s.sources = {"kmem:kmalloc", "syscalls:sys_enter_read"};

  s.user.enabled = true;
  s.user.binaries = {{"/usr/bin/app", "abcdef0123456789"}, {"/lib/libc.so.6", ""}};
  UserStack u3{100, false, {}};
  u3.frames.push_back({0x555555555234, 0, 0x1234, 0x1234, {"inner+0x4", "outer+0x10"}, "app.c:12"});
  u3.frames.push_back({0x7ffff7dd0100, 1, 0x29100, 0x29100, {}, ""});
  u3.frames.push_back({0x7ffff7dd0200, 1, 0x29200, 0x29200, {"__libc_start_main+0x80"}, ""});
  s.user.stacks[3] = u3;
  UserStack u5{200, true, {}};
  u5.frames.push_back({0x1000, -1, 0, 0, {}, ""});
  s.user.stacks[5] = u5;

  StackRecord a{42, 6, {0xffffffff81000148, 0xffffffff810001dc, 0xffffffff81000310}, 410};
  a.by = {key(100, "app", "kmem:kmalloc", 3, 3, 300), key(200, "\xff-x", "kmem:kmalloc", 5, 2, 100),
          KeyCount{{}, true, 1, 10}};
  StackRecord b{7, 5, {0xffffffffc0000010, 0xdead}, 5};
  b.by = {key(1, "init", "syscalls:sys_enter_read", kNoUserStack, 5, 5)};
  s.stacks = {b, a};  // by stack_id
  intern_callstacks(s);
  return s;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Compares `actual` with the golden file `name` (or rewrites it).
void expect_golden(const std::string& name, const std::string& actual) {
  const fs::path path = fs::path(STACKMAPD_FIXTURES_DIR) / "golden" / name;
  if (std::getenv("STACKMAPD_UPDATE_GOLDEN")) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing: STACKMAPD_UPDATE_GOLDEN=1 writes it";
  const std::string want = read(path);
  EXPECT_TRUE(want == actual) << name << " differs from " << path << " (" << actual.size()
                              << " bytes, golden " << want.size() << ")";
}

class GoldenExports : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stackmapd-golden-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  Kallsyms ksyms_ = Kallsyms::parse(kKallsyms);
  Snapshot snap_ = golden_snapshot();
};

TEST_F(GoldenExports, FileContracts) {
  prepare_output_dir((dir_ / "out").string());
  write_exports((dir_ / "out").string(), snap_, &ksyms_);
  std::map<std::string, std::string> files;
  std::set<std::string> names;  // directories too, with a '/'
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "out")) {
    const std::string name = fs::relative(e.path(), dir_ / "out").string();
    names.insert(name + (e.is_directory() ? "/" : ""));
    if (e.is_regular_file()) files[name] = read(e.path());
  }
  std::string list;
  for (const std::string& n : names) list += n + "\n";
  expect_golden("export_files.txt", list);
  for (const auto& [name, bytes] : files)
    expect_golden("export_" + fs::path(name).filename().string(), bytes);
}

TEST_F(GoldenExports, Views) {
  const FrameNames names(snap_, &ksyms_);
  expect_golden("top.txt", format_top(snap_, 0, names));
  expect_golden("top1.txt", format_top(snap_, 1, names));
  const std::vector<SymbolizedStack> flame = flame_stacks(snap_, names);
  expect_golden("flame.folded", format_folded(flame));
  FlameGraphOptions svg;
  svg.unit = snap_.weight_unit;  // as every output plan draws it
  expect_golden("flame.svg", render_flamegraph_svg(flame, svg));
  expect_golden("json_no_addresses.json", format_json(snap_, names, JsonOptions{false}));
  expect_golden("stacks.json", format_stacks_json(snap_.stacks, names));
  expect_golden("profile.pb.gz", encode_pprof(snap_, names, {}));
  PprofOptions opt;
  opt.profile_hz = 99;
  opt.label_keys = std::vector<KeyField>{KeyField::comm};
  opt.time_nanos = 1700000000000000000;
  opt.duration_nanos = 5000000000;
  opt.address_base = 0xffffffff81000000;
  expect_golden("profile_options.pb.gz", encode_pprof(snap_, names, opt));
  Snapshot later = golden_snapshot();
  later.stacks[1].ref_count += 4;
  later.stacks[1].weight += 40;
  later.stacks[1].by[0].count += 4;
  later.stacks[1].by[0].weight += 40;
  const Snapshot delta = delta_snapshot(snap_, later);
  expect_golden("delta.pb.gz", encode_pprof(delta, FrameNames(delta, &ksyms_), {}));
  http::MetricsInput in;
  in.stats = snap_.stats;
  in.source_events = {{"kmem:kmalloc", 5}, {"syscalls:sys_enter_read", 5}};
  in.ring_used_bytes = 4096;
  in.ring_size_bytes = 1 << 20;
  in.programs = {{"tracepoint", 1234, 11}};
  // The build's own version and revision stand as words: a golden file holds no build.
  std::string metrics = http::format_metrics(in);
  for (auto [value, word] : {std::pair{build_revision(), "REVISION"}, {build_version(), "VERSION"}})
    if (size_t at = metrics.find(std::string("\"") + value + "\""); at != std::string::npos)
      metrics.replace(at + 1, std::strlen(value), word);
  expect_golden("metrics.txt", metrics);
}

// decode reads both files back: the JSON export's views and the FSMB file's.
TEST_F(GoldenExports, DecodeReadsThemBack) {
  write_exports(dir_.string(), snap_, &ksyms_);
  std::ofstream(dir_ / "kallsyms") << kKallsyms;
  DecodeOptions json;
  json.file = (dir_ / "stack_map.json").string();
  json.folded = (dir_ / "json.folded").string();
  json.svg = (dir_ / "json.svg").string();
  json.pprof = (dir_ / "json.pb.gz").string();
  json.top = 0;
  std::ostringstream json_out;
  decode(json, json_out);
  expect_golden("decode_json_top.txt", json_out.str());
  expect_golden("decode_json.folded", read(json.folded));
  expect_golden("decode_json.svg", read(json.svg));
  expect_golden("decode_json.pb.gz", read(json.pprof));

  DecodeOptions bin;
  bin.file = (dir_ / "stack_map_bin").string();
  bin.symbols.kallsyms = (dir_ / "kallsyms").string();
  std::ostringstream text;
  decode(bin, text);
  expect_golden("decode_bin.txt", text.str());
  bin.json = true;
  std::ostringstream as_json;
  decode(bin, as_json);
  expect_golden("decode_bin.json", as_json.str());
  bin.json = false;
  bin.folded = (dir_ / "bin.folded").string();
  bin.svg = (dir_ / "bin.svg").string();
  bin.pprof = (dir_ / "bin.pb.gz").string();
  std::ostringstream none;
  decode(bin, none);
  expect_golden("decode_bin.folded", read(bin.folded));
  expect_golden("decode_bin.svg", read(bin.svg));
  expect_golden("decode_bin.pb.gz", read(bin.pprof));
}

}  // namespace
}  // namespace stackmapd

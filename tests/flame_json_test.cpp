// SPDX-License-Identifier: GPL-2.0
// The live page's data (daemon/http/flame_json.h): the merged tree, the
// filter by a --by value and its errors, names of any bytes as valid JSON;
// and the windows' history (daemon/run/window_history.h): which snapshot a
// window starts from and what is kept.
#include "daemon/http/flame_json.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "daemon/export/pprof.h"
#include "daemon/run/window_history.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {
namespace {

using nlohmann::json;

Kallsyms symbols() {
  return Kallsyms::parse(
      "ffffffff81000000 T entry\nffffffff81000100 T alloc\nffffffff81000200 T free_one\n"
      "ffffffff81000300 T end\n");
}

KeyCount key(std::string comm, uint32_t pid, uint64_t count) {
  KeyCount k;
  k.key.comm = std::move(comm);
  k.key.pid = pid;
  k.count = k.weight = count;
  return k;
}

// Two stacks under entry: alloc (7 events: bash 5, "\xff<x>" 2), free_one (3, bash).
Snapshot sample() {
  Snapshot snap;
  snap.keys = KeySpec::parse("comm,pid");
  snap.keys_requested = true;
  snap.stacks = {{10, 7, {0xffffffff81000110, 0xffffffff81000010}, 7, {}},
                 {20, 3, {0xffffffff81000210, 0xffffffff81000010}, 3, {}}};
  snap.stacks[0].by = {key("bash", 1, 5), key("\xff<x>", 2, 2)};
  snap.stacks[1].by = {key("bash", 1, 3)};
  intern_callstacks(snap);
  return snap;
}

// The tree back as "a;b;c" -> value, with self values only at leaves.
void paths(const json& d, const json& node, const std::string& prefix,
           std::map<std::string, uint64_t>& out) {
  const std::string name = d["names"][node[0].get<size_t>()];
  const std::string path = prefix.empty() ? name : prefix + ";" + name;
  out[path] = node[1];
  for (const json& c : node[2]) paths(d, c, path, out);
}

json render(const Snapshot& snap, const http::FlameJsonOptions& opt = {}) {
  const Kallsyms k = symbols();
  return json::parse(http::flame_json(snap, FrameNames(snap, &k), opt));
}

TEST(FlameJson, MergedTreeRootFirstWithCountsAndKeys) {
  const json d = render(sample());
  EXPECT_EQ(d["total"], 10);
  EXPECT_EQ(d["unit"], "events");
  std::map<std::string, uint64_t> p;
  paths(d, d["tree"], "", p);
  const std::map<std::string, uint64_t> want = {
      {"all", 10}, {"all;entry", 10}, {"all;entry;alloc", 7}, {"all;entry;free_one", 3}};
  EXPECT_EQ(p, want);
  // The --by values present, the most frequent first; any bytes as valid UTF-8.
  EXPECT_EQ(d["keys"]["comm"][0], json::array({"bash", 8}));
  EXPECT_EQ(d["keys"]["comm"][1], json::array({"\\xff<x>", 2}));
  EXPECT_EQ(d["keys"]["pid"][0][0], "pid 1");
}

// Counted by comm too, a pid says whose it is: the comm most of its events had.
TEST(FlameJson, APidCarriesItsComm) {
  Snapshot snap = sample();
  snap.stacks[1].by = {key("bash", 1, 2), key("sh", 1, 1)};  // pid 1 exec'd sh for one event
  intern_callstacks(snap);
  json d = render(snap);
  EXPECT_EQ(d["keys"]["pid"][0], json::array({"pid 1", 8, "bash"}));
  EXPECT_EQ(d["keys"]["pid"][1], json::array({"pid 2", 2, "\\xff<x>"}));
  EXPECT_EQ(d["keys"]["comm"][0], json::array({"bash", 7}));  // a comm is its own name
  snap.keys = KeySpec::parse("pid");
  d = render(snap);
  EXPECT_EQ(d["keys"]["pid"][0], json::array({"pid 1", 8}));  // no comm counted: none said
}

TEST(FlameJson, ExcludeOneKeyValue) {
  http::FlameJsonOptions opt;
  ASSERT_FALSE(
      http::parse_flame_filter("key=comm&value=bash&exclude=1", sample().keys, opt.filter));
  EXPECT_TRUE(opt.filter.exclude);
  json d = render(sample(), opt);
  EXPECT_EQ(d["total"], 2);
  std::map<std::string, uint64_t> p;
  paths(d, d["tree"], "", p);
  EXPECT_EQ(
      p, (std::map<std::string, uint64_t>{{"all", 2}, {"all;entry", 2}, {"all;entry;alloc", 2}}));
  ASSERT_FALSE(
      http::parse_flame_filter("key=pid&value=pid%202&exclude=0", sample().keys, opt.filter));
  EXPECT_FALSE(opt.filter.exclude);
  EXPECT_EQ(render(sample(), opt)["total"], 2);
  // Events of no known value (past the store's cap on keys) are not the value's: they stay.
  Snapshot capped = sample();
  KeyCount other;
  other.other = true;
  other.count = other.weight = 4;
  capped.stacks[1].by.push_back(other);
  capped.stacks[1].ref_count = capped.stacks[1].weight = 7;
  intern_callstacks(capped);
  ASSERT_FALSE(http::parse_flame_filter("key=comm&value=bash&exclude=1", capped.keys, opt.filter));
  EXPECT_EQ(render(capped, opt)["total"], 6);
}

// /flame.pprof's snapshot: the view's events only, with the same totals as its tree.
TEST(FlameJson, TheFilteredSnapshotIsTheViewsEvents) {
  http::FlameFilter filter;
  ASSERT_FALSE(http::parse_flame_filter("key=comm&value=bash&exclude=1", sample().keys, filter));
  Snapshot but = http::filtered_snapshot(sample(), filter);
  ASSERT_EQ(but.stacks.size(), 1u);  // free_one's events were all bash's
  EXPECT_EQ(but.stacks[0].stack_id, 10u);
  EXPECT_EQ(but.stacks[0].ref_count, 2u);
  EXPECT_EQ(but.stacks[0].weight, 2u);
  ASSERT_EQ(but.stacks[0].by.size(), 1u);
  EXPECT_EQ(but.stacks[0].by[0].key.comm, "\xff<x>");
  EXPECT_EQ(callstacks(but).size(), 1u);
  http::FlameJsonOptions opt;
  opt.filter = filter;
  EXPECT_EQ(render(sample(), opt)["total"], render(but)["total"]);
  ASSERT_FALSE(http::parse_flame_filter("key=pid&value=pid%201", sample().keys, filter));
  const Snapshot only = http::filtered_snapshot(sample(), filter);
  ASSERT_EQ(only.stacks.size(), 2u);
  EXPECT_EQ(only.stacks[0].ref_count + only.stacks[1].ref_count, 8u);
  // No filter: the snapshot as it is.
  EXPECT_EQ(http::filtered_snapshot(sample(), http::FlameFilter{}).stacks.size(), 2u);
}

TEST(FlameJson, FilterByOneKeyValue) {
  http::FlameJsonOptions opt;
  // The page names a value as the JSON did: "\xff<x>" for the byte 0xff; the byte itself too.
  ASSERT_FALSE(http::parse_flame_filter("key=comm&value=%5Cxff%3Cx%3E", sample().keys, opt.filter));
  json d = render(sample(), opt);
  EXPECT_EQ(d["total"], 2);
  ASSERT_FALSE(http::parse_flame_filter("key=comm&value=%FF%3Cx%3E", sample().keys, opt.filter));
  EXPECT_EQ(render(sample(), opt)["total"], 2);
  ASSERT_FALSE(http::parse_flame_filter("key=pid&value=pid%201", sample().keys, opt.filter));
  d = render(sample(), opt);
  EXPECT_EQ(d["total"], 8);
  std::map<std::string, uint64_t> p;
  paths(d, d["tree"], "", p);
  EXPECT_EQ(p["all;entry;free_one"], 3u);
}

TEST(FlameJson, BadFiltersAreNamed) {
  http::FlameFilter f;
  const KeySpec keys = KeySpec::parse("comm,pid");
  auto e = http::parse_flame_filter("key=colour&value=x", keys, f);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("colour"), std::string::npos) << *e;
  e = http::parse_flame_filter("key=cgroup&value=x", keys, f);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("--by comm,pid"), std::string::npos) << *e;
  EXPECT_TRUE(http::parse_flame_filter("key=comm", keys, f));
  e = http::parse_flame_filter("key=comm&value=x&exclude=yes", keys, f);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("exclude=yes"), std::string::npos) << *e;
  e = http::parse_flame_filter("exclude=1", keys, f);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("needs a value"), std::string::npos) << *e;
  EXPECT_FALSE(http::parse_flame_filter("window=1m", keys, f));
  EXPECT_FALSE(f.field);
}

TEST(FlameJson, AnyBytesMakeValidJson) {
  std::string out;
  http::append_json_string(out, std::string("a\"\\\n\x01</script>\xc3\xa9\xff", 17));
  EXPECT_EQ(out, "\"a\\\"\\\\\\u000a\\u0001\\u003c/script\\u003e\xc3\xa9\\\\xff\"");
  EXPECT_EQ(json::parse(out), "a\"\\\n\x01</script>\xc3\xa9\\xff");
}

TEST(FlameJson, UnresolvedFramesHideTheirAddressWhenAsked) {
  Snapshot snap;
  snap.stacks = {{1, 4, {0xdead}}};
  intern_callstacks(snap);
  http::FlameJsonOptions opt;
  EXPECT_EQ(render(snap, opt)["names"][1], "0xdead");
  opt.addresses = false;
  const json d = render(snap, opt);
  EXPECT_EQ(d["names"][1], "[unknown]");
  EXPECT_EQ(d.dump().find("0xdead"), std::string::npos);
}

// Compared with a base: each node carries the base's value fourth; the
// base's total and the largest change of a share are said.
TEST(FlameJson, DiffModeCarriesTheBaseOfEveryNode) {
  Snapshot base = sample();
  base.stacks[0].ref_count = 1;  // alloc: 7 of 10 now, 1 of 4 in the base
  base.stacks[0].by = {key("bash", 1, 1)};
  intern_callstacks(base);
  const Snapshot now = sample();
  const Kallsyms k = symbols();
  const FrameNames base_names(base, &k);
  const http::FlameJsonBase b{base, base_names, "the minute before", 60.0};
  const json d = json::parse(http::flame_json(now, FrameNames(now, &k), {}, &b));
  EXPECT_EQ(d["total"], 10);
  EXPECT_EQ(d["base"]["total"], 4);
  EXPECT_EQ(d["base"]["window"], "the minute before");
  EXPECT_DOUBLE_EQ(d["base"]["seconds"].get<double>(), 60.0);
  std::map<std::string, std::pair<uint64_t, uint64_t>> p;
  std::function<void(const json&, const std::string&)> walk = [&](const json& n,
                                                                  const std::string& prefix) {
    ASSERT_EQ(n.size(), 4u) << n.dump();
    const std::string path = prefix + std::string(d["names"][n[0].get<size_t>()]);
    p[path] = {n[3], n[1]};
    for (const json& c : n[2]) walk(c, path + ";");
  };
  walk(d["tree"], "");
  EXPECT_EQ(p["all"], std::make_pair(uint64_t{4}, uint64_t{10}));
  EXPECT_EQ(p["all;entry;alloc"], std::make_pair(uint64_t{1}, uint64_t{7}));
  EXPECT_EQ(p["all;entry;free_one"], std::make_pair(uint64_t{3}, uint64_t{3}));
  // alloc grew from 25% to 70%, free_one shrank from 75% to 30%.
  EXPECT_NEAR(d["max_delta"].get<double>(), 0.45, 1e-9);
  // Filtered, both sides are: bash had 1 + 3 then, 5 + 3 now.
  http::FlameJsonOptions opt;
  ASSERT_FALSE(http::parse_flame_filter("key=comm&value=bash", now.keys, opt.filter));
  const json f = json::parse(http::flame_json(now, FrameNames(now, &k), opt, &b));
  EXPECT_EQ(f["total"], 8);
  EXPECT_EQ(f["base"]["total"], 4);
  // A plain tree has no base anywhere.
  const json plain = render(now);
  EXPECT_FALSE(plain.contains("base"));
  EXPECT_EQ(plain["tree"].size(), 3u);
}

TEST(FlameJson, DiffModeKeepsWhatOnlyTheBaseHad) {
  Snapshot base;
  base.stacks = {{30, 5, {0xffffffff81000210}}};  // free_one as a root: not now
  intern_callstacks(base);
  const Snapshot now = sample();
  const Kallsyms k = symbols();
  const FrameNames base_names(base, &k);
  const http::FlameJsonBase b{base, base_names, "since start", 0};
  const json d = json::parse(http::flame_json(now, FrameNames(now, &k), {}, &b));
  bool found = false;
  for (const json& c : d["tree"][2])
    if (d["names"][c[0].get<size_t>()] == "free_one") {
      found = true;
      EXPECT_EQ(c[1], 0);
      EXPECT_EQ(c[3], 5);
    }
  EXPECT_TRUE(found) << d.dump();
  EXPECT_NEAR(d["max_delta"].get<double>(), 1.0, 1e-9);
}

std::shared_ptr<const Snapshot> counted(uint64_t n) {
  auto s = std::make_shared<Snapshot>();
  s->stacks = {{1, n, {0xffffffff81000110}}};
  intern_callstacks(*s);
  return s;
}

TEST(WindowHistory, AWindowStartsAtItsOldestSnapshot) {
  using namespace std::chrono_literals;
  WindowHistory h;
  const auto t0 = WindowHistory::Clock::time_point{} + 1h;
  for (int i = 0; i <= 12; ++i) h.add(t0 + i * 10s, counted(100 * i));
  const auto now = t0 + 120s;
  // The last minute: the snapshot of 60 s ago; its delta is the minute's events.
  WindowHistory::Base b = h.oldest_within(now, 1min);
  ASSERT_TRUE(b.snap);
  EXPECT_EQ(b.at, t0 + 60s);
  EXPECT_EQ(delta_snapshot(*b.snap, *counted(1200)).stacks.at(0).ref_count, 600u);
  // Nothing kept that old yet: the oldest there is.
  EXPECT_EQ(h.oldest_within(now, 10min).at, t0);
  EXPECT_FALSE(h.oldest_within(now + 10min, 1min).snap);
}

TEST(WindowHistory, BoundedInTimeAndBytes) {
  using namespace std::chrono_literals;
  WindowHistory h;
  const auto t0 = WindowHistory::Clock::time_point{} + 1h;
  for (int i = 0; i <= 6 * 30; ++i) h.add(t0 + i * 10s, counted(i));  // 30 minutes
  // 11 minutes: every 10 s for 70 s, then one a minute.
  EXPECT_LE(h.size(), 8u + 10u);
  EXPECT_GE(h.size(), 15u);
  const auto now = t0 + 30min;
  EXPECT_LE(now - h.oldest_within(now, 1h).at, 11min);
  EXPECT_GE(now - h.oldest_within(now, 10min).at, 9min);

  WindowHistory::Limits small;
  small.max_bytes = 3 * WindowHistory::approx_bytes(*counted(1));
  WindowHistory tiny(small);
  for (int i = 0; i < 6; ++i) tiny.add(t0 + i * 10s, counted(i));
  EXPECT_EQ(tiny.size(), 3u);
  EXPECT_LE(tiny.bytes(), small.max_bytes);
}

}  // namespace
}  // namespace stackmapd

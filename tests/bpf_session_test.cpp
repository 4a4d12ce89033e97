// SPDX-License-Identifier: GPL-2.0
// Runs the real BPF program on this kernel: root required. These tests fail,
// never skip, unless STACKMAPD_SKIP_BPF_TESTS=1 says BPF is unavailable here.
#include "daemon/bpf/bpf_session.h"

#include <gtest/gtest.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/http/metrics.h"
#include "daemon/run/http_endpoints.h"
#include "daemon/source/session_setup.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"
#include "daemon/sys/preflight.h"
#include "tests/load.h"

namespace stackmapd {
namespace {

class BpfSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* skip = std::getenv("STACKMAPD_SKIP_BPF_TESTS");
    if (skip && std::strcmp(skip, "1") == 0) GTEST_SKIP() << "STACKMAPD_SKIP_BPF_TESTS=1";
    mount_tracefs_events();  // as the daemon does
  }
};

SessionConfig kmem_config(uint32_t bits = SMT_DEFAULT_BITS) {
  SessionConfig c;
  c.events.push_back({"kmem", "kmem_cache_alloc"});
  c.bits = bits;
  return c;
}

// Allocations from two threads (one per CPU here) until stop() or the end.
class TwoThreadLoad {
 public:
  TwoThreadLoad() {
    for (int t = 0; t < 2; ++t)
      threads_.emplace_back([this] {
        while (!stop_) generate_allocations(200);
      });
  }
  ~TwoThreadLoad() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

uint64_t total_refs(const Snapshot& snap) {
  uint64_t n = 0;
  for (const StackRecord& r : snap.stacks) n += r.ref_count;
  return n;
}

void run_load(BpfSession& s, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    generate_allocations(2000);
    s.drain(0);
  }
  s.detach();
  s.drain(0);
}

TEST_F(BpfSessionTest, EveryIdResolvesAndCountsAgree) {
  BpfSession s(kmem_config());
  run_load(s, 50);
  TableStats st = s.stats();
  ASSERT_GT(st.get(SMC_HITS), 100000u) << "the workload made too few events";
  EXPECT_EQ(st.events_total, st.events()) << "every event counted once, as a hit or a drop";
  EXPECT_EQ(st.drops(), 0u);
  EXPECT_EQ(st.bad_records, 0u) << "ids that did not resolve to a published stack";

  // The daemon's counts (from the ring buffer) against the table's own.
  EXPECT_EQ(s.store().total_events(), st.counted());
  EXPECT_EQ(s.store().size(), st.entries);
  EXPECT_EQ(st.get(SMC_INSERTS), st.entries);
  uint64_t table_refs = 0;
  for (const StackRecord& t : s.table_stacks()) table_refs += t.ref_count;
  EXPECT_EQ(table_refs, st.counted());
  for (const StackRecord& r : s.store().snapshot(s.sources())) {
    StackRecord t = s.table_stack(r.stack_id);
    ASSERT_EQ(t.ips, r.ips) << "stack_id " << r.stack_id;
    EXPECT_EQ(t.ref_count, r.ref_count) << "stack_id " << r.stack_id;
    EXPECT_GE(r.ips.size(), 1u);
  }
}

// A sample's value in Prometheus' text format: the sum over every series of
// `family` (any labels), or nullopt without one.
std::optional<uint64_t> metric_sum(const std::string& text, const std::string& family) {
  std::optional<uint64_t> sum;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(family, 0) != 0) continue;
    const char next = line[family.size()];
    if (next != ' ' && next != '{') continue;
    sum = sum.value_or(0) + std::stoull(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// The per-source series of /metrics against the total, after a real burst of
// two sources' events (batched: a count record carries many events).
// Each program loaded is verified whole: a session loads only those it
// attaches, and a reload that adds tracepoints to one without them needs a
// new session.
TEST_F(BpfSessionTest, LoadsOnlyTheProgramsItAttaches) {
  SessionConfig c;
  c.profile_hz = 99;
  const std::unique_ptr<BpfSession> s = BpfSession::load(c);
  std::vector<std::string> roles;
  for (const auto& [role, fd] : s->programs()) roles.push_back(role);
  EXPECT_EQ(roles, std::vector<std::string>{"profile"});
  EXPECT_TRUE(s->can_reattach({}));
  EXPECT_FALSE(s->can_reattach(kmem_config().events));
  EXPECT_TRUE(BpfSession::load(kmem_config())->can_reattach(kmem_config().events));
}

TEST_F(BpfSessionTest, SourceEventsSeriesSumToEventsTotal) {
  SessionConfig c = kmem_config();
  c.events.push_back({"kmem", "kmalloc"});
  BpfSession s(c);
  run_load(s, 50);
  const std::string m = http::format_metrics(collect_metrics(s, 0));
  const TableStats st = s.stats();
  ASSERT_GT(st.events_total, 100000u) << "the workload made too few events";
  ASSERT_EQ(st.drops(), 0u) << "a dropped event counts in no source";
  ASSERT_EQ(st.events_total, st.counted());
  EXPECT_EQ(metric_sum(m, "stackmapd_events_total"), st.events_total) << m;
  EXPECT_EQ(metric_sum(m, "stackmapd_source_events_total"), st.events_total) << m;
  for (const std::string& source : s.sources())
    EXPECT_GT(metric_sum(m, "stackmapd_source_events_total{source=\"" + source + "\"}"), 0u)
        << source << " counted nothing";
}

// Bytes of BPF maps this process has resident (its mmaps of them).
uint64_t resident_bpf_map_bytes() {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return 0;
  char line[512];
  bool bpf_map = false;
  uint64_t kb = 0;
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long n = 0;
    if (std::strchr(line, '-') && std::strchr(line, '-') < std::strchr(line, ' '))
      bpf_map = std::strstr(line, "anon_inode:bpf-map") != nullptr;
    else if (bpf_map && std::sscanf(line, "Rss: %llu kB", &n) == 1) kb += n;
  }
  std::fclose(f);
  return kb << 10;
}

// The pool is mapped as far as it is handed out (pool_window.h): mapping all
// of it would make every page resident, 8.6 MB at the default --bits 14.
TEST_F(BpfSessionTest, PoolIsResidentOnlyAsFarAsItIsHandedOut) {
  BpfSession s(kmem_config());
  run_load(s, 20);
  const TableStats st = s.stats();
  // A quiet machine gives a handful of stacks, a busy one hundreds: either
  // leaves most of the pool unused.
  ASSERT_GT(st.entries, 0u);
  ASSERT_LT(st.entries, st.pool_size / 4) << "the workload filled the pool: nothing to measure";
  const uint64_t pool_bytes = uint64_t{sizeof(smt_elt)} * st.pool_size;
  const uint64_t resident = resident_bpf_map_bytes();
  // The ring (its data mapped twice), slots, batches, globals and the used pool.
  EXPECT_LT(resident, pool_bytes / 2) << resident << " bytes of BPF maps resident";
  for (const StackRecord& r : s.store().snapshot(s.sources()))
    ASSERT_EQ(s.table_stack(r.stack_id).ips, r.ips) << "stack_id " << r.stack_id;
}

TEST_F(BpfSessionTest, TopStackResolvesToTheAllocator) {
  BpfSession s(kmem_config());
  run_load(s, 20);
  auto stacks = s.store().snapshot(s.sources());
  ASSERT_FALSE(stacks.empty());
  const StackRecord* top = &stacks[0];
  for (const auto& r : stacks)
    if (r.ref_count > top->ref_count) top = &r;
  Kallsyms ksyms = Kallsyms::load();
  ASSERT_FALSE(ksyms.addresses_hidden());
  bool in_allocator = false, in_syscall_path = false;
  for (uint64_t ip : top->ips) {
    auto m = ksyms.lookup(ip);
    ASSERT_TRUE(m.has_value()) << "frame 0x" << std::hex << ip << " does not resolve";
    in_allocator |= m->name.starts_with("kmem_cache_alloc");
    in_syscall_path |= m->name.find("sys_") != std::string_view::npos ||
                       m->name.starts_with("do_syscall") || m->name.starts_with("entry_SYSCALL");
  }
  EXPECT_TRUE(in_allocator) << ksyms.format(top->ips[0]);
  EXPECT_TRUE(in_syscall_path);
}

// Several busy tracepoints, for more than the 1024 unique stacks of --bits 10.
SessionConfig small_table_config() {
  SessionConfig c = kmem_config(SMT_MIN_BITS);
  c.ringbuf_bytes = 16u << 20;  // room for every stack sent whole (576 B each)
  for (const char* name : {"kmalloc", "kfree", "kmem_cache_free", "mm_page_alloc", "mm_page_free"})
    c.events.push_back({"kmem", name});
  c.events.push_back({"sched", "sched_switch"});
  c.events.push_back({"sched", "sched_wakeup"});
  c.events.push_back({"timer", "hrtimer_start"});
  return c;
}

// A varied workload until the pool is full; then detached and drained.
void fill_pool(BpfSession& s) {
  for (int i = 0; i < 20 && s.stats().get(SMC_DROP_POOL_FULL) == 0; ++i) {
    generate_allocations(2000);
    // Drained while the workload runs, as the daemon's timer does: past
    // the full pool every new stack is a 576-byte record.
    std::atomic<bool> done{false};
    int rc = -1;
    std::thread work([&] {
      rc = system(
          "find /usr/lib -maxdepth 3 2>/dev/null | head -2000 | xargs stat >/dev/null 2>&1;"
          "tar cf - /usr/include 2>/dev/null | gzip -1 >/dev/null");
      done = true;
    });
    while (!done) s.drain(10);
    work.join();
    ASSERT_EQ(rc, 0);
    s.drain(0);
  }
  s.detach();
  s.drain(0);
}

TEST_F(BpfSessionTest, SmallTableCountsPoolExhaustionExactly) {
  BpfSession s(small_table_config());
  fill_pool(s);
  TableStats st = s.stats();
  ASSERT_TRUE(st.pool_full()) << st.entries << " unique stacks only";
  EXPECT_GT(st.get(SMC_DROP_POOL_FULL), 0u);
  EXPECT_EQ(st.events_total, st.events()) << "every event counted once, as a hit or a drop";
  // No stack is lost: what the table could not take came whole.
  const uint64_t not_taken =
      st.get(SMC_DROP_POOL_FULL) + st.get(SMC_DROP_PROBE_LIMIT) + st.get(SMC_DROP_BUSY);
  ASSERT_EQ(st.get(SMC_DROP_RINGBUF_FULL), 0u);
  EXPECT_EQ(st.get(SMC_SENT_WHOLE), not_taken) << "the ring buffer had room for every one";
  EXPECT_EQ(st.overflow_lost, 0u);
  EXPECT_EQ(s.store().total_events(), st.get(SMC_HITS) + st.get(SMC_SENT_WHOLE));
  EXPECT_EQ(st.entries, s.pool_size());
  EXPECT_GT(st.overflow_stacks, 0u);
  EXPECT_EQ(s.store().size(), s.pool_size() + st.overflow_stacks);
  for (const StackRecord& r : s.store().snapshot(s.sources())) {
    if (r.stack_id < s.table_size()) {
      EXPECT_EQ(s.table_stack(r.stack_id).ips, r.ips) << "stack_id " << r.stack_id;
    } else {
      EXPECT_LT(r.stack_id, s.table_size() + RingConsumer::kOverflowStacks);
      EXPECT_FALSE(r.ips.empty());
    }
  }
  EXPECT_EQ(st.bad_records, 0u);
}

TEST_F(BpfSessionTest, TraceGivesEveryEventOfAFullPoolWithItsStack) {
  SessionConfig c = small_table_config();
  c.trace = true;
  c.ringbuf_bytes = 64u << 20;  // each event's trace entry besides the stacks sent whole
  // The exact count needs a ring that never filled: a drain that fell behind
  // on a busy machine (a build beside it did, once, with 16 MiB) runs again.
  std::optional<BpfSession> s;
  std::map<uint32_t, uint64_t> traced;  // stack id -> events the sink saw
  TableStats st;
  for (int attempt = 0; attempt < 3; ++attempt) {
    s.reset();
    traced.clear();
    s.emplace(c);
    s->set_trace_sink(
        [&](const smt_trace_record& r, const std::string&) { ++traced[r.event.stack_id]; });
    fill_pool(*s);
    st = s->stats();
    if (st.get(SMC_DROP_RINGBUF_FULL) == 0) break;
  }
  ASSERT_TRUE(st.pool_full()) << st.entries << " unique stacks only";
  ASSERT_GT(st.get(SMC_SENT_WHOLE), 0u);
  ASSERT_EQ(st.get(SMC_DROP_RINGBUF_FULL), 0u) << "in each of 3 runs";
  EXPECT_EQ(st.overflow_lost, 0u);
  // Every event counted is traced once, under the id the store counts it by:
  // those sent whole too, as --perfetto needs (one PerfSample per event).
  uint64_t total = 0, whole = 0;
  for (const StackRecord& r : s->store().snapshot(s->sources())) {
    EXPECT_EQ(traced[r.stack_id], r.ref_count) << "stack_id " << r.stack_id;
    total += r.ref_count;
    if (r.stack_id >= s->table_size()) whole += r.ref_count;
  }
  EXPECT_EQ(total, st.get(SMC_HITS) + st.get(SMC_SENT_WHOLE));
  EXPECT_GT(whole, 0u) << "events in the overflow store";
  uint64_t seen = 0;
  for (const auto& [id, n] : traced) seen += n;
  EXPECT_EQ(seen, total);
  EXPECT_EQ(st.bad_records, 0u);
}

TEST_F(BpfSessionTest, VerifyModeFindsEverySampledStackStoredUnderItsId) {
  SessionConfig c = kmem_config();
  c.verify_every = 7;
  // This process's events only: a busy machine's others would fill the ring
  // with samples between drains.
  c.filter_pids = {static_cast<uint32_t>(getpid())};
  BpfSession s(c);
  run_load(s, 20);
  TableStats st = s.stats();
  EXPECT_GT(st.verify_ok, st.get(SMC_HITS) / 7 - 10);
  EXPECT_EQ(st.verify_mismatch, 0u);
  EXPECT_EQ(st.bad_records, 0u);
  EXPECT_EQ(s.store().total_events(), st.counted()) << "a sample also counts its event, once";
}

// Both CPUs produce while snapshots are taken: each one is exact (every event
// counted in a batch or the store, once), with no wait for anything to be sent.
TEST_F(BpfSessionTest, SnapshotsUnderLoadAreExact) {
  SessionConfig c = kmem_config();
  c.keys = KeySpec::parse("pid,tid,source");
  BpfSession s(c);
  TwoThreadLoad load;
  uint64_t pending_seen = 0, last_hits = 0;
  // 200 snapshots at least, and enough events on a busy machine.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; i < 200 || (last_hits < 20000 && std::chrono::steady_clock::now() < until); ++i) {
    const Snapshot snap = s.snapshot();
    ASSERT_EQ(total_refs(snap), snap.stats.counted()) << "snapshot " << i;
    ASSERT_EQ(snap.stats.events_total, snap.stats.events()) << "snapshot " << i;
    for (const StackRecord& r : snap.stacks) {
      uint64_t by = 0;
      for (const KeyCount& k : r.by) by += k.count;
      ASSERT_EQ(by, r.ref_count) << "snapshot " << i << ", stack_id " << r.stack_id;
    }
    pending_seen += snap.stats.get(SMC_HITS) - s.store().total_events();
    EXPECT_GE(snap.stats.get(SMC_HITS), last_hits);
    last_hits = snap.stats.get(SMC_HITS);
    if (i % 50 == 0) s.drain(0);
  }
  load.stop();
  EXPECT_GT(pending_seen, 0u) << "every snapshot found the batches empty: nothing was tested";
  EXPECT_GT(last_hits, 10000u);
  s.detach();
  const TableStats st = s.stats();
  EXPECT_EQ(s.store().total_events(), st.counted()) << "detached, the store holds all";
  EXPECT_LT(st.ring_bytes, st.events() * 16) << "batches send less than a record per event";
}

// Enabling the ftrace event beside us makes the tracepoint call its probes
// through __traceiter_<event>, a frame on top of every stack: cut, a code path
// keeps its one id; uncut (the control session), it would get a second one.
TEST_F(BpfSessionTest, MachineryFramesNeverReachTheTable) {
  const Kallsyms ksyms = Kallsyms::load();
  SessionConfig cut = kmem_config();
  cut.machinery = machinery_ranges(ksyms, cut);
  ASSERT_FALSE(cut.machinery.empty()) << "no __traceiter_kmem_cache_alloc in kallsyms";
  BpfSession with(cut), without(kmem_config());
  const std::string instance =
      "/sys/kernel/tracing/instances/stackmapd-test-" + std::to_string(getpid());
  ASSERT_TRUE(std::filesystem::create_directory(instance));
  const std::string enable = instance + "/events/kmem/kmem_cache_alloc/enable";
  ASSERT_EQ(system(("echo 1 > " + enable).c_str()), 0);
  generate_allocations(20000);
  with.detach();
  without.detach();
  EXPECT_EQ(system(("echo 0 > " + enable).c_str()), 0);
  std::filesystem::remove(instance);
  auto leading_machinery = [&](const BpfSession& s) {
    size_t n = 0;
    for (const StackRecord& r : s.store().snapshot(s.sources())) {
      auto m = ksyms.lookup(r.ips.at(0));
      n += m && m->name.starts_with("__traceiter_");
    }
    return n;
  };
  EXPECT_GT(leading_machinery(without), 0u) << "the control saw no __traceiter frame";
  EXPECT_EQ(leading_machinery(with), 0u);
  EXPECT_GT(with.store().size(), 0u);
}

// Resets while both CPUs insert: no stale or torn stack may ever be exported.
TEST_F(BpfSessionTest, ResetUnderLoadNeverExposesOldOrTornStacks) {
  SessionConfig c = kmem_config();
  for (const char* name : {"kmalloc", "kfree", "kmem_cache_free"})
    c.events.push_back({"kmem", name});
  c.events.push_back({"sched", "sched_switch"});
  c.verify_every = 3;
  c.ringbuf_bytes = 16u << 20;  // room for the samples' frames (576 B each) between drains
  BpfSession s(c);
  TwoThreadLoad load;

  const int kResets = 60;
  uint64_t ended_hits = 0, ended_drops = 0, reset_drops = 0;
  for (int i = 0; i < kResets; ++i) {
    for (int d = 0; d < 5; ++d) s.drain(10);
    Snapshot ended = s.reset().finish();
    uint64_t refs = 0;
    for (const auto& st : ended.stacks) refs += st.ref_count;
    ASSERT_EQ(refs, ended.stats.counted()) << "reset " << i << ": the ended epoch is exact";
    ASSERT_EQ(ended.stacks.size(), ended.stats.get(SMC_INSERTS)) << "reset " << i;
    ended_hits += ended.stats.get(SMC_HITS);
    ended_drops += ended.stats.drops();
    reset_drops += ended.stats.get(SMC_DROP_RESETTING);
    ASSERT_EQ(s.epoch(), static_cast<uint32_t>(i + 1));
  }
  load.stop();
  s.detach();
  s.drain(0);

  TableStats st = s.stats();
  EXPECT_EQ(st.resets, static_cast<uint64_t>(kResets));
  EXPECT_EQ(st.stale_records, 0u) << "records of an ended epoch reached the daemon";
  EXPECT_EQ(st.bad_records, 0u);
  EXPECT_EQ(st.verify_mismatch, 0u) << "an id named a stack other than the one captured";
  EXPECT_GT(st.verify_ok, 1000u);
  EXPECT_EQ(st.past_events, ended_hits + ended_drops);
  EXPECT_EQ(st.events_total, st.past_events + st.events()) << "every event of every epoch, once";
  // What the table holds now is exactly what the daemon exports.
  auto table = s.table_stacks();
  auto stored = s.store().snapshot(s.sources());
  ASSERT_EQ(table.size(), stored.size());
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(table[i].stack_id, stored[i].stack_id);
    EXPECT_EQ(table[i].ips, stored[i].ips);
    EXPECT_EQ(table[i].ref_count, stored[i].ref_count);
  }
  std::printf(
      "resets %d under load: %llu events checked by --verify, %llu mismatches, "
      "%llu dropped while resetting\n",
      kResets, static_cast<unsigned long long>(st.verify_ok + st.verify_mismatch),
      static_cast<unsigned long long>(st.verify_mismatch),
      static_cast<unsigned long long>(reset_drops));
}

// A daemon that dies leaves its table pinned; the next one continues it.
TEST_F(BpfSessionTest, PinnedTableSurvivesTheDaemon) {
  const std::string dir = "/sys/fs/bpf/stackmapd-test-" + std::to_string(getpid());
  SessionConfig c = kmem_config();
  c.pin_dir = dir;
  std::vector<StackRecord> before;
  uint32_t seed;
  {
    BpfSession s(c);
    EXPECT_FALSE(s.resumed());
    for (int i = 0; i < 5; ++i) {
      generate_allocations(2000);
      s.drain(0);
    }
    s.reset();  // epoch and reset count must survive too
    run_load(s, 5);
    before = s.store().snapshot(s.sources());
    seed = s.hash_seed();
    ASSERT_FALSE(before.empty());
  }  // no unpin(): as after kill -9
  {
    BpfSession s(c);
    ASSERT_TRUE(s.resumed());
    EXPECT_EQ(s.hash_seed(), seed);
    EXPECT_EQ(s.epoch(), 1u);
    EXPECT_EQ(s.stats().resets, 1u);
    auto after = s.store().snapshot(s.sources());
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_EQ(after[i].stack_id, before[i].stack_id);
      EXPECT_EQ(after[i].ref_count, before[i].ref_count);
      EXPECT_EQ(after[i].ips, before[i].ips);
    }
    run_load(s, 5);
    TableStats st = s.stats();
    EXPECT_EQ(s.store().total_events(), st.counted()) << "counting goes on exactly";
    EXPECT_GT(st.get(SMC_HITS), before.empty() ? 0 : before[0].ref_count);
    for (const auto& r : before)  // the same stack keeps its id
      EXPECT_EQ(s.table_stack(r.stack_id).ips, r.ips);
  }
  {
    SessionConfig other = c;
    other.bits = SMT_MIN_BITS;  // another layout: start clean, say why
    BpfSession s(other);
    EXPECT_FALSE(s.resumed());
    EXPECT_EQ(s.store().size(), 0u);
    s.unpin();
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// Spins in user mode for `ms`: --profile samples with no kernel frames.
void spin_in_user_mode(int ms) {
  static volatile uint64_t sink;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end)
    for (int i = 0; i < 100000; ++i) sink = sink + i;
}

// --user-stacks: the user table is pinned beside the kernel table, and a
// daemon that takes the table over resolves the user stack ids of the one
// before; so does the count of the samples taken in user mode
// (SMT_NO_KERNEL_STACK). A session without --user-stacks replaces the user
// table's pins: the next one with it starts its user table clean.
TEST_F(BpfSessionTest, PinnedUserTableSurvivesTheDaemon) {
  const std::string dir = "/sys/fs/bpf/stackmapd-utest-" + std::to_string(getpid());
  SessionConfig c = kmem_config();
  c.pin_dir = dir;
  c.user_stacks = true;
  c.profile_hz = 999;
  // This process only: the consumer keeps up (no ring-full drops, which
  // leave stacks in the table that the store never saw) and symbolizes
  // only its own stacks.
  c.filter_pids = {static_cast<uint32_t>(getpid())};
  std::vector<StackRecord> before;
  uint32_t user_id = kNoUserStack;
  std::optional<UserStackIps> user_before;
  {
    BpfSession s(c);
    for (int i = 0; i < 5; ++i) {
      generate_allocations(2000);
      spin_in_user_mode(50);
      s.drain(0);
    }
    s.detach();
    s.drain(0);
    before = s.store().snapshot(s.sources());
    for (const StackRecord& r : before)
      for (const KeyCount& k : r.by)
        if (!k.other && k.key.ustack != kNoUserStack && k.key.ustack != SMT_NO_STACK_ID)
          user_id = k.key.ustack;
    ASSERT_NE(user_id, kNoUserStack) << "events with a user stack";
    user_before = s.user_table_stack(user_id);
    ASSERT_TRUE(user_before.has_value());
    const StackRecord* user_mode = s.store().find(SMT_NO_KERNEL_STACK);
    ASSERT_NE(user_mode, nullptr) << "samples taken in user mode count with their user stack";
    EXPECT_TRUE(user_mode->ips.empty());
    EXPECT_GT(user_mode->ref_count, 0u);
    TableStats st = s.stats();
    EXPECT_EQ(s.store().total_events(), st.counted());
    EXPECT_EQ(st.events_total, st.events());
  }  // no unpin(): as after kill -9
  {
    BpfSession s(c);
    ASSERT_TRUE(s.resumed());
    auto after = s.store().snapshot(s.sources());
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_EQ(after[i].stack_id, before[i].stack_id);
      EXPECT_EQ(after[i].ref_count, before[i].ref_count);
    }
    const std::optional<UserStackIps> user_after = s.user_table_stack(user_id);
    ASSERT_TRUE(user_after.has_value()) << "user stack " << user_id << " resolves after take-over";
    EXPECT_EQ(user_after->pid, user_before->pid);
    EXPECT_EQ(user_after->ips, user_before->ips);
    generate_allocations(2000);
    spin_in_user_mode(50);
    s.detach();
    s.drain(0);
    TableStats st = s.stats();
    EXPECT_EQ(s.store().total_events(), st.counted()) << "counting goes on exactly";
    EXPECT_EQ(st.bad_records, 0u);
  }
  {
    SessionConfig plain = c;
    plain.user_stacks = false;
    BpfSession s(plain);
    EXPECT_TRUE(s.resumed()) << "the kernel table goes on without --user-stacks";
  }
  {
    BpfSession s(c);
    EXPECT_TRUE(s.resumed());
    EXPECT_FALSE(s.user_table_stack(user_id).has_value()) << "a clean user table";
    s.unpin();
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// Events counted after a burst of allocations: the session is attached.
uint64_t counts_more(BpfSession& s) {
  s.drain(0);
  uint64_t before = s.stats().events_total;
  generate_allocations(2000);
  s.drain(0);
  return s.stats().events_total - before;
}

// A reset whose first grace period fails has cleared nothing: it must leave
// the table live in the same epoch, not RESETTING until a restart.
TEST_F(BpfSessionTest, ResetRollsBackWhenTheGracePeriodFails) {
  BpfSession s(kmem_config());
  run_load(s, 0);  // detach + drain: nothing counted yet
  s.attach();
  generate_allocations(2000);
  s.drain(0);
  const uint64_t stacks = s.snapshot().stacks.size();
  ASSERT_GT(stacks, 0u);
  s.set_grace_period([] {
    errno = ENOSYS;
    return -1;
  });
  std::string error;
  try {
    s.reset();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("membarrier"), std::string::npos) << error;
  EXPECT_NE(error.find("nothing was reset"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(s.epoch(), 0u);
  EXPECT_EQ(s.stats().resets, 0u);
  TableStats before = s.stats();
  generate_allocations(2000);
  s.drain(0);
  TableStats after = s.stats();
  EXPECT_GT(after.get(SMC_HITS), before.get(SMC_HITS) + 1000) << "the table is live again";
  EXPECT_EQ(after.get(SMC_DROP_RESETTING), before.get(SMC_DROP_RESETTING))
      << "the table was left resetting";
  const Snapshot live = s.snapshot();
  EXPECT_GE(live.stacks.size(), stacks) << "nothing was cleared";
  EXPECT_EQ(total_refs(live), live.stats.counted()) << "a snapshot is exact, attached too";

  s.set_grace_period(
      [] { return static_cast<int>(syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0)); });
  Snapshot ended = s.reset().finish();
  EXPECT_EQ(s.epoch(), 1u) << "a reset with a working grace period goes through";
  EXPECT_GT(ended.stats.get(SMC_HITS), 0u);
  EXPECT_GT(counts_more(s), 1000u);
  s.detach();
  s.drain(0);
  EXPECT_EQ(s.stats().stale_records, 0u);
  EXPECT_EQ(s.store().total_events(), s.stats().counted());
}

// load() attaches nothing; attach() all or nothing; detach() and attach() again.
TEST_F(BpfSessionTest, StagedSessionAttachesAllOrNothing) {
  std::unique_ptr<BpfSession> s = BpfSession::load(kmem_config());
  EXPECT_FALSE(s->attached());
  EXPECT_EQ(counts_more(*s), 0u) << "a loaded session counts nothing before attach()";
  s->attach();
  EXPECT_TRUE(s->attached());
  EXPECT_GT(counts_more(*s), 1000u);
  s->detach();
  EXPECT_EQ(counts_more(*s), 0u);
  s->attach();
  EXPECT_GT(counts_more(*s), 1000u);

  // ftrace's own events are in tracefs but BPF cannot attach to them.
  SessionConfig bad = kmem_config();
  bad.events.push_back({"ftrace", "print"});
  std::unique_ptr<BpfSession> b = BpfSession::load(bad);
  EXPECT_THROW(b->attach(), Error);
  EXPECT_FALSE(b->attached());
  EXPECT_EQ(counts_more(*b), 0u) << "a failed attach left kmem:kmem_cache_alloc attached";
}

// A re-attach attaches the added events before closing the removed ones, and
// on failure keeps every link it had.
TEST_F(BpfSessionTest, FailedReattachKeepsTheAttachedEvents) {
  BpfSession s(kmem_config());
  ASSERT_GT(counts_more(s), 1000u);
  std::string error;
  try {
    s.reattach({{"ftrace", "print"}, {"kmem", "kmalloc"}});
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("ftrace:print"), std::string::npos) << error;
  EXPECT_GT(counts_more(s), 1000u) << "kmem:kmem_cache_alloc stopped counting";
  s.reattach({{"kmem", "kmem_cache_alloc"}, {"kmem", "kmalloc"}});
  ASSERT_EQ(s.sources().size(), 2u);
  EXPECT_EQ(s.sources()[1], "kmem:kmalloc");
  EXPECT_GT(counts_more(s), 1000u);
  s.detach();
  s.drain(0);
  TableStats st = s.stats();
  EXPECT_EQ(s.store().total_events(), st.counted());
  EXPECT_EQ(st.events_total, st.events());
  EXPECT_EQ(st.bad_records, 0u);
}

// A reload's handover on a pinned table: the new session is built while the
// old one counts, the old one detaches, the new one attaches and counts on
// from the table's counts; a failed attach hands the table back.
TEST_F(BpfSessionTest, HandoverOfAPinnedTableCountsEveryEventOnce) {
  const std::string dir = "/sys/fs/bpf/A-test-" + std::to_string(getpid());
  SessionConfig c = kmem_config();
  c.pin_dir = dir;
  auto old = BpfSession::load(c);
  EXPECT_FALSE(std::filesystem::exists(dir + "/slots")) << "load() pins nothing";
  old->attach();
  EXPECT_TRUE(std::filesystem::exists(dir + "/slots")) << "attach() pins the table";
  ASSERT_GT(counts_more(*old), 1000u);

  SessionConfig next = c;
  next.verify_every = 5;  // another program, the same table
  auto fresh = BpfSession::load(next);
  EXPECT_GT(counts_more(*old), 1000u) << "the old session counts while the new one loads";
  old->detach();
  old->drain(0);
  // Before the new session attaches: stats() reads the shared batches' live
  // counters, which its programs count into from then on.
  EXPECT_EQ(old->store().total_events(), old->stats().counted());
  fresh->attach();
  EXPECT_TRUE(fresh->resumed());
  EXPECT_EQ(fresh->store().total_events(), old->store().total_events())
      << "the new session starts from the table's counts";
  EXPECT_GT(counts_more(*fresh), 1000u);
  // (The old session must not drain any more: it would consume the new one's
  // records from the ring they share. A reload destroys it here.)

  // A handover that fails to attach: the old session takes the table back.
  SessionConfig bad = c;
  bad.events.push_back({"ftrace", "print"});
  auto failing = BpfSession::load(bad);
  fresh->detach();
  fresh->drain(0);
  EXPECT_THROW(failing->attach(), Error);
  fresh->attach();
  EXPECT_GT(counts_more(*fresh), 1000u);
  fresh->detach();
  fresh->drain(0);
  failing.reset();
  old.reset();
  TableStats st = fresh->stats();
  EXPECT_EQ(fresh->store().total_events(), st.counted()) << "every event counted once";
  uint64_t table_refs = 0;
  for (const StackRecord& t : fresh->table_stacks()) table_refs += t.ref_count;
  EXPECT_EQ(table_refs, st.counted());
  EXPECT_EQ(st.stale_records, 0u);
  EXPECT_EQ(st.bad_records, 0u);
  EXPECT_EQ(st.verify_mismatch, 0u);
  fresh->unpin();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace stackmapd

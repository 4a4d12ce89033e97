// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_set>

#include "daemon/resolve/sandboxed_parser.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

uint32_t random_seed() {
  uint32_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
    throw Error(std::string("cannot read a random hash seed: ") + std::strerror(errno));
  return seed;
}

// bpf_ktime_get_ns()'s clock.
uint64_t monotonic_ns() {
  timespec now = {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + now.tv_nsec;
}

// --user-stacks' resolver of the user table's stacks; null without it.
// With unwind tables, the processes of --pid have theirs before the first
// event, not from their first stack on.
std::unique_ptr<UserStackCollector> user_stack_collector(const BpfObject& object,
                                                         const UserTable& table,
                                                         const std::vector<uint32_t>& pids) {
  if (!table.enabled()) return nullptr;
  std::unique_ptr<UnwindLoader> unwind;
  if (object.user_unwind()) {
    // Tables are parsed in a sandbox of their own (the unwind thread's).
    auto parser = std::make_shared<SandboxedParser>("unwind tables");
    unwind = std::make_unique<UnwindLoader>(object.unwind_fds(), object.unwind_rows(),
                                            sandboxed_tables(parser));
    for (uint32_t pid : pids)
      if (std::optional<ProcessMaps> maps =
              ProcessMaps::read(pid, "/proc", nullptr, sandboxed_build_ids(*parser)))
        unwind->load(pid, UnwindLoader::kAnyExec, *maps);
  }
  return std::make_unique<UserStackCollector>(
      table.table_size(), [&table](uint32_t id) { return table.stack(id); }, "/proc",
      UserStackCollector::kDefaultMaxQueued, std::move(unwind));
}

void put_user_counts(TableStats& s, const UserStackCounts& c) {
  s.user_stacks_truncated = c.truncated;
  s.user_processes_gone = c.gone;
  s.user_maps_evicted = c.processes_evicted;
  s.user_binaries_evicted = c.binaries_evicted;
  s.user_parse_failures = c.parse_failures;
  s.user_stacks_dropped = c.dropped;
  s.unwind_processes = c.unwind.processes;
  s.unwind_tables = c.unwind.tables;
  s.unwind_rows = c.unwind.rows;
  s.unwind_rows_full = c.unwind.rows_full;
  s.unwind_tables_freed = c.unwind.tables_evicted;  // their rows went to others
}

int membarrier_global() {
  return static_cast<int>(syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0));
}

}  // namespace

BpfSession::BpfSession(const SessionConfig& config) : BpfSession(config, Stage::kAttached) {}

std::unique_ptr<BpfSession> BpfSession::load(const SessionConfig& config) {
  return std::unique_ptr<BpfSession>(new BpfSession(config, Stage::kLoaded));
}

BpfSession::BpfSession(const SessionConfig& config, Stage stage)
    : object_(config),
      table_(object_),
      user_table_(object_),
      batches_(object_.batches_fd(), object_.batch_count()),
      store_(table_.table_size() + RingConsumer::kOverflowStacks,
             config.keys.empty() ? KeySpec::parse("pid,comm") : config.keys, config.max_key_pairs,
             config.user_stacks),
      resolver_(store_.strings(), store_.keys(),
                user_stack_collector(object_, user_table_, config.filter_pids)),
      consumer_(object_.ids_fd(), table_, store_, resolver_, object_.batch_count(), config.trace),
      attachments_(object_, config),
      exits_(store_.keys().process_field() ? std::make_unique<ExitWatch>() : nullptr),
      grace_period_(membarrier_global),
      keys_requested_(!config.keys.empty()),
      weight_unit_(config.offcpu ? "ns" : config.sum_field),
      min_block_ns_(config.offcpu ? config.offcpu->min_block_ns : 0),
      trace_(config.trace) {
  // A table of our own is ours alone until pinned; one from pins is taken
  // over when attaching, when whoever used it before has let go.
  if (!object_.pinned_table()) start_fresh();
  if (stage == Stage::kAttached) attach();
}

void BpfSession::start_fresh() {
  hash_seed_ = random_seed();
  table_.shared() = smt_shared{};
  table_.shared().hash_seed = hash_seed_;
  table_.book() = smt_daemon_state{};
  table_.book().layout_version = SMT_LAYOUT_VERSION;
  table_.book().bits = table_.bits();
  user_table_.clear(random_seed());
  user_scanned_ = 0;
  batches_.clear();
  consumer_.set_epoch(0);
}

// Nothing of ours is attached; whoever counted into the table before (a
// daemon that died, the session a reload replaces) is detached.
void BpfSession::take_over() {
  const std::string& where = object_.pinned_where();
  smt_daemon_state& book = table_.book();
  if (book.layout_version == 0) {  // maps as a loader created them: zeroed
    start_fresh();
    return;
  }
  // Programs detached a moment ago may still be finishing their event.
  if (grace_period_() != 0)
    spdlog::debug("membarrier: {}: taking the table over without a grace period", strerror(errno));
  if (book.layout_version != SMT_LAYOUT_VERSION || book.bits != table_.bits()) {
    spdlog::warn("the table pinned in {} is of layout {} (want {}): starting clean", where,
                 book.layout_version, SMT_LAYOUT_VERSION);
    table_.clear();
    start_fresh();
    return;
  }
  smt_shared& shared = table_.shared();
  hash_seed_ = shared.hash_seed;
  // The user table goes on with the kernel table when its pins were taken
  // over too (bpf_object.h); otherwise this session's starts empty.
  if (!object_.user_table_pinned()) user_table_.clear(random_seed());
  if (UserStackCollector* u = resolver_.user_stacks()) u->clear();
  user_scanned_ = 0;
  uint32_t epoch = SMT_STATE_EPOCH(shared.state);
  if (shared.state & SMT_STATE_RESETTING) {
    spdlog::warn("a reset of the table pinned in {} did not finish: finishing it", where);
    table_.clear();
    user_table_.clear(random_seed());
    ++epoch;
    ++book.resets;
    shared.state = epoch << 1;
  }
  consumer_.set_epoch(epoch);
  // The ref_counts hold what the daemon before counted; the records it left
  // unread and its batches' entries count now.
  store_.clear();
  consumer_.clear_overflow();
  for (StackRecord& r : table_.stacks()) store_.insert(r.stack_id, std::move(r.ips), r.ref_count);
  drain(0);
  const std::vector<smt_batch> batches = batches_.read();
  consumer_.sync(batches);
  consumer_.absorb(batches);
  batches_.clear_entries();
  batches_.forget_names();  // ids the names map we start with does not hold
  if (!resumed_)
    spdlog::info("continuing the table pinned in {}: {} stacks, {} events, epoch {}", where,
                 store_.size(), store_.total_events(), epoch);
  resumed_ = true;
}

void BpfSession::attach() {
  if (attachments_.attached()) return;
  if (object_.pinned_table()) take_over();
  object_.write_settings();
  attachments_.attach();
  try {
    object_.pin();
  } catch (...) {
    attachments_.detach();
    throw;
  }
}

void BpfSession::reattach(const std::vector<Tracepoint>& events) { attachments_.reattach(events); }

void BpfSession::detach() {
  const bool was_attached = attachments_.attached();
  attachments_.detach();
  if (was_attached) absorb_batches();
  watch_ring_drops(true);
}

// Nothing writes the batches once the programs detached a moment ago have
// finished their events (a grace period, as for a take-over).
void BpfSession::absorb_batches() {
  if (grace_period_() != 0)
    spdlog::debug("membarrier: {}: absorbing the batches without a grace period", strerror(errno));
  consume_committed();
  consumer_.absorb(batches_.read());
  batches_.clear_entries();
}

void BpfSession::watch_ring_drops(bool at_end) {
  const auto now = DropBursts::Clock::now();
  if (!at_end && now < next_drop_look_) return;
  next_drop_look_ = now + std::chrono::milliseconds(250);
  uint64_t total = 0;  // every epoch's: a reset does not end a burst
  for (const smt_cpu_counters& c : batches_.counters())
    total += c.epoch[0][SMC_DROP_RINGBUF_FULL] + c.epoch[1][SMC_DROP_RINGBUF_FULL];
  const auto say = [this](const DropBursts::Burst& b) {
    bpf_map_info info = {};
    __u32 len = sizeof(info);
    const uint32_t kb =
        bpf_obj_get_info_by_fd(object_.ids_fd(), &info, &len) == 0 ? info.max_entries >> 10 : 0;
    spdlog::warn("ring buffer full: {} events dropped in {:.1f} s; raise --ringbuf-kb (now {})",
                 b.dropped, b.seconds, kb);
  };
  if (auto burst = ring_full_.observe(now, total)) say(*burst);
  if (!at_end) return;
  if (auto burst = ring_full_.finish()) say(*burst);
}

// A user stack goes to the resolver when the table publishes it, not when
// an event naming it leaves the batches: a process that exits meanwhile
// is still there to be read.
void BpfSession::see_user_stacks() {
  if (UserStackCollector* u = resolver_.user_stacks())
    user_scanned_ = user_table_.scan(user_scanned_, [u](uint32_t id) { u->see(id); });
}

size_t BpfSession::drain(int timeout_ms) {
  const size_t n = consumer_.drain(timeout_ms);
  if (exits_)
    if (const std::vector<uint32_t> gone = exits_->take(); !gone.empty()) store_.fold_exited(gone);
  watch_ring_drops(false);
  see_user_stacks();
  if (trace_) {
    // A snapshot holding its cut reads its own copies (snapshot()).
    if (!consumer_.holding()) {
      const uint64_t now = monotonic_ns();
      consumer_.read_in_place(batches_.read(), now);
    }
    consumer_.flush_traces();
  }
  return n;
}

TableStats BpfSession::stats_of(const std::vector<smt_cpu_counters>& counters,
                                uint32_t parity) const {
  TableStats s = table_.stats_of(counters, parity);
  consumer_.add_counts(s);
  store_.add_counts(s);
  add_user_counts(s);
  return s;
}

TableStats BpfSession::stats() const { return stats_of(batches_.counters(), epoch() & 1); }

std::vector<std::pair<std::string, int>> BpfSession::programs() const {
  std::vector<std::pair<std::string, int>> out;
  for (auto [role, fd] :
       {std::pair{"tracepoint", object_.tracepoint_prog()},
        std::pair{"profile", object_.profile_prog()}, std::pair{"offcpu", object_.offcpu_prog()}})
    if (fd >= 0) out.emplace_back(role, fd);
  if (bpf_program* uprobe = object_.uprobe_prog())
    out.emplace_back("uprobe", bpf_program__fd(uprobe));
  return out;
}

SnapshotCut BpfSession::cut() {
  // The exact cut (ring_consumer.h): the batches as copied, and every record
  // they had sent by then, nothing after.
  drain(0);
  const uint64_t read_ns = monotonic_ns();
  const std::vector<smt_batch> batches = batches_.read();
  consumer_.hold_after(batches);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  // A record sent before the copy may wait behind one another CPU is writing.
  // --trace: the copies' events not sent yet are read in place, into the store.
  for (drain(0); !consumer_.caught_up(batches) || !consumer_.read_in_place(batches, read_ns);
       drain(0)) {
    if (std::chrono::steady_clock::now() > deadline) {
      consumer_.release();
      throw Error("snapshot: the ring buffer did not deliver the batches' records within 2 s");
    }
    sched_yield();
  }
  // pending() may intern strings (a new cgroup): before the copy, which must hold them.
  const std::vector<PendingCount> pending = consumer_.pending(batches);
  SnapshotCut out(Snapshot{}, store_);
  StackStore& cut = out.store;
  for (const PendingCount& p : pending) {
    if (cut.count(p.stack_id, p.key, p.weight, p.count)) continue;
    if (const smt_elt* e = table_.published_elt(p.stack_id))
      cut.insert(p.stack_id, std::vector<uint64_t>(e->ips, e->ips + e->nr), p.key, p.weight,
                 p.count);
  }
  std::vector<smt_cpu_counters> counters;
  for (const smt_batch& b : batches) counters.push_back(b.counters);
  consumer_.release();
  if (trace_) consumer_.flush_traces();
  // The pairs of this cut's processes that exited fold at a drain after it:
  // each pair is in one snapshot at least under its own key.
  if (exits_) exits_->check(store_.process_ids());

  Snapshot& snap = out.snap;
  snap.bits = bits();
  snap.hash_seed = hash_seed_;
  snap.stats = table_.stats_of(counters, epoch() & 1);
  consumer_.add_counts(snap.stats);
  cut.add_counts(snap.stats);
  snap.keys = store_.keys();
  snap.keys_requested = keys_requested_;
  snap.weight_unit = weight_unit_;
  snap.sources = sources();
  add_user_counts(snap.stats);
  // The user stacks of the events cut are queued (pending() above queued
  // those of the batches' entries) but may not be resolved yet: the
  // snapshot's completion waits for them, on the thread that finishes it,
  // so that the loop goes on counting meanwhile.
  if (const UserStackCollector* u = resolver_.user_stacks())
    out.complete = [mark = u->mark()](Snapshot& s) {
      UserStackCounts c;
      s.user = UserStackCollector::stacks_at(mark, &c);
      // The table's stacks are queued as it publishes them (drain()): those
      // whose events the cut holds are the snapshot's.
      std::unordered_set<uint32_t> named;
      for (const StackRecord& r : s.stacks)
        for (const KeyCount& k : r.by)
          if (!k.other) named.insert(k.key.ustack);
      std::erase_if(s.user.stacks,
                    [&](const auto& id_stack) { return !named.count(id_stack.first); });
      put_user_counts(s.stats, c);
    };
  return out;
}

void BpfSession::add_user_counts(TableStats& s) const {
  const UserStackCollector* u = resolver_.user_stacks();
  if (!u) return;
  s.user_stacks = true;
  s.user_entries = user_table_.entries();
  put_user_counts(s, u->counts());
}

void BpfSession::close_open_blocks() {
  const int fd = object_.offcpu_start_fd();
  if (fd < 0 || attachments_.attached()) return;
  const uint64_t now_ns = monotonic_ns();
  std::vector<smt_event_record> blocks;
  std::vector<bool> inserted;
  uint32_t tid = 0;
  for (const uint32_t* prev = nullptr; bpf_map_get_next_key(fd, prev, &tid) == 0; prev = &tid) {
    smt_offcpu_start s;
    // A block begun before a reset names a stack of the cleared table.
    if (bpf_map_lookup_elem(fd, &tid, &s) != 0 || s.epoch != epoch() || s.ts_ns > now_ns ||
        now_ns - s.ts_ns < min_block_ns_)
      continue;
    blocks.push_back({.kind = SMT_RECORD_NONE,
                      .stack_id = s.stack_id,
                      .epoch = s.epoch,
                      .tgid = s.tgid,
                      .tid = tid,
                      .user_stack_id = s.user_stack_id,
                      .cgroup_id = s.cgroup_id,
                      .weight = now_ns - s.ts_ns,
                      .name = s.name,
                      .source = s.source,
                      .cpu = s.cpu});
    inserted.push_back(s.inserted != 0);
  }
  consumer_.close_blocks(blocks, inserted);
}

}  // namespace stackmapd

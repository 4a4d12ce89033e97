// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/error.h"
#include "daemon/pinning.h"
#include "stackmapd.skel.h"

namespace stackmapd {

namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

uint32_t random_seed() {
  uint32_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
    throw Error(std::string("cannot read a random hash seed: ") + std::strerror(errno));
  return seed;
}

void* map_memory(int fd, size_t len, int prot, off_t offset, const std::string& what) {
  void* p = mmap(nullptr, len, prot, MAP_SHARED, fd, offset);
  if (p == MAP_FAILED)
    throw Error("cannot mmap " + what + ": " + std::strerror(errno) +
                ": the kernel must support mmapable BPF arrays and ring buffers (5.8+)");
  return p;
}

void configure_rodata(stackmapd_bpf* skel, const SessionConfig& c) {
  skel->rodata->table_bits = c.bits;
  skel->rodata->wakeup_bytes = c.ringbuf_bytes / 4;
  skel->rodata->verify_every = c.verify_every;
  skel->rodata->trace_records = c.trace;
  skel->rodata->filter_tgid = c.filter_pid;
  skel->rodata->filter_cpu = c.filter_cpu;
}

int perf_event_open(perf_event_attr* attr, pid_t pid, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

void* map_array(bpf_map* map, size_t* len, int prot) {
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = static_cast<size_t>(bpf_map__value_size(map)) * bpf_map__max_entries(map);
  *len = (bytes + page - 1) / page * page;
  return map_memory(bpf_map__fd(map), *len, prot, 0, std::string("BPF map ") + bpf_map__name(map));
}

}  // namespace

Tracepoint Tracepoint::parse(std::string_view spec) {
  auto colon = spec.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == spec.size() ||
      spec.find(':', colon + 1) != std::string_view::npos || spec.find('/') != std::string_view::npos)
    throw Error("bad event '" + std::string(spec) +
                "': use CATEGORY:NAME, e.g. kmem:kmem_cache_alloc (see /sys/kernel/tracing/available_events)");
  return Tracepoint{std::string(spec.substr(0, colon)), std::string(spec.substr(colon + 1))};
}

BpfSession::BpfSession(const SessionConfig& config)
    : bits_(config.bits), pin_dir_(config.pin_dir), store_(1u << (config.bits + 1)) {
  skel_ = stackmapd_bpf__open();
  if (!skel_) throw Error("cannot open the BPF object: " + errno_text(errno));

  if (config.trace && config.verify_every)
    throw Error("--trace and --verify cannot be combined: a verify sample replaces the event's "
                "trace record; use one at a time");
  configure_rodata(skel_, config);
  bpf_program__set_autoload(skel_->progs.stackmapd_profile, config.profile_hz > 0);
  bpf_program__set_autoload(skel_->progs.stackmapd_fentry, false);
  bpf_map__set_max_entries(skel_->maps.slots, table_size());
  bpf_map__set_max_entries(skel_->maps.pool, pool_size());
  bpf_map__set_max_entries(skel_->maps.ids, config.ringbuf_bytes);

  bool take_over = false;
  if (!pin_dir_.empty()) {
    try {
      prepare_pin_dir(pin_dir_);
      const std::vector<PinnedMap> maps = {{"slots", skel_->maps.slots},
                                           {"pool", skel_->maps.pool},
                                           {"counters", skel_->maps.counters},
                                           {"ids", skel_->maps.ids},
                                           {"state", skel_->maps.bss}};
      std::string why = pin_mismatch(pin_dir_, maps);
      take_over = why.empty();
      if (!take_over && any_pins(pin_dir_, pin_names())) {
        spdlog::warn("not taking over the table pinned in {}: {}; starting clean", pin_dir_, why);
        remove_pins(pin_dir_, pin_names());
        prepare_pin_dir(pin_dir_);
      }
      for (const auto& m : maps) bpf_map__set_pin_path(m.map, (pin_dir_ + "/" + m.name).c_str());
    } catch (...) {
      stackmapd_bpf__destroy(skel_);
      skel_ = nullptr;
      throw;
    }
  }

  if (int err = stackmapd_bpf__load(skel_)) {
    stackmapd_bpf__destroy(skel_);
    skel_ = nullptr;
    throw Error("the kernel refused the BPF program or its maps (" + errno_text(err) +
                "): run with -v to see libbpf's log and the verifier's");
  }

  try {
    slots_ = static_cast<smt_slot*>(map_array(skel_->maps.slots, &slots_len_, PROT_READ | PROT_WRITE));
    pool_ = static_cast<const smt_elt*>(map_array(skel_->maps.pool, &pool_len_, PROT_READ));
    long page = sysconf(_SC_PAGESIZE);
    int ring = ring_fd();
    ring_consumer_ = map_memory(ring, page, PROT_READ, 0, "the ring buffer's consumer page");
    ring_producer_ = map_memory(ring, page, PROT_READ, page, "the ring buffer's producer page");
    ring_ = ring_buffer__new(ring, on_record, this, nullptr);
    if (!ring_) throw Error("cannot set up the ring-buffer consumer: " + errno_text(errno));
    if (take_over)
      resume_from_pins();
    else
      start_fresh();
    reattach(config.events);
    attach_functions(config);
    if (config.profile_hz) attach_profile(config.profile_hz, config.filter_cpu);
  } catch (...) {
    teardown();
    throw;
  }
}

const std::vector<std::string>& BpfSession::pin_names() {
  static const std::vector<std::string> names = {"slots", "pool", "counters", "ids", "state"};
  return names;
}

smt_daemon_state& BpfSession::book() const { return skel_->bss->daemon_state; }

void BpfSession::start_fresh() {
  hash_seed_ = random_seed();
  skel_->bss->shared.hash_seed = hash_seed_;
  book() = smt_daemon_state{};
  book().layout_version = SMT_LAYOUT_VERSION;
  book().bits = bits_;
}

// Called before anything is attached: nothing writes the maps meanwhile.
void BpfSession::resume_from_pins() {
  smt_shared& shared = skel_->bss->shared;
  if (book().layout_version != SMT_LAYOUT_VERSION || book().bits != bits_) {
    spdlog::warn("the table pinned in {} is of layout {} (want {}): starting clean", pin_dir_,
                 book().layout_version, SMT_LAYOUT_VERSION);
    clear_table();
    start_fresh();
    return;
  }
  hash_seed_ = shared.hash_seed;
  epoch_ = SMT_STATE_EPOCH(shared.state);
  if (shared.state & SMT_STATE_RESETTING) {
    // A daemon died in the middle of a reset: finish it.
    spdlog::warn("the previous daemon died while resetting the table: finishing the reset");
    clear_table();
    ++epoch_;
    ++book().resets;
    shared.state = epoch_ << 1;
  }
  // Records the previous daemon left unread are already in the ref_counts.
  discard_records_ = true;
  drain(0);
  discard_records_ = false;
  for (StackRecord& r : table_stacks()) store_.insert(r.stack_id, std::move(r.ips), r.ref_count);
  resumed_ = true;
  spdlog::info("continuing the table pinned in {}: {} stacks, {} events, epoch {}", pin_dir_,
               store_.size(), store_.total_events(), epoch_);
}

void BpfSession::reattach(const std::vector<Tracepoint>& events) {
  for (bpf_link* link : tracepoint_links_) bpf_link__destroy(link);
  tracepoint_links_.clear();
  sources_.clear();
  for (const auto& tp : events) {
    // The cookie tells the shared program which tracepoint fired.
    LIBBPF_OPTS(bpf_tracepoint_opts, opts, .bpf_cookie = sources_.size());
    bpf_link* link = bpf_program__attach_tracepoint_opts(
        skel_->progs.stackmapd_tracepoint, tp.category.c_str(), tp.name.c_str(), &opts);
    if (!link)
      throw Error("cannot attach to tracepoint " + tp.str() + ": " + errno_text(errno) +
                  ": check that it is listed in /sys/kernel/tracing/available_events");
    tracepoint_links_.push_back(link);
    sources_.push_back(tp.str());
  }
}

// fentry has no multi-attach on this kernel: each function gets its own copy
// of the object, sharing every map of the main one.
void BpfSession::attach_functions(const SessionConfig& config) {
  if (config.functions.empty()) return;
  if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACING, nullptr) != 1)
    throw Error("-f needs BPF tracing programs (fentry), which this kernel refuses to load "
                "(bpftool feature probe: program_type tracing is NOT available): use -e "
                "tracepoints or --profile here");
  size_t skipped = 0;
  std::string first_error;
  for (const auto& fn : config.functions) {
    stackmapd_bpf* obj = stackmapd_bpf__open();
    if (!obj) throw Error("cannot open the BPF object: " + errno_text(errno));
    configure_rodata(obj, config);
    obj->rodata->fentry_source = static_cast<uint32_t>(sources_.size());
    bpf_program__set_autoload(obj->progs.stackmapd_tracepoint, false);
    bpf_program__set_autoload(obj->progs.stackmapd_profile, false);
    bpf_program__set_attach_target(obj->progs.stackmapd_fentry, 0, fn.name.c_str());
    const std::pair<bpf_map*, bpf_map*> shared_maps[] = {
        {obj->maps.slots, skel_->maps.slots},       {obj->maps.pool, skel_->maps.pool},
        {obj->maps.counters, skel_->maps.counters}, {obj->maps.scratch, skel_->maps.scratch},
        {obj->maps.nesting, skel_->maps.nesting},   {obj->maps.ids, skel_->maps.ids},
        {obj->maps.bss, skel_->maps.bss}};
    int err = 0;
    for (const auto& [mine, main] : shared_maps)
      if (!err) err = bpf_map__reuse_fd(mine, bpf_map__fd(main));
    bpf_link* link = nullptr;
    if (!err) err = stackmapd_bpf__load(obj);
    if (!err) {
      link = bpf_program__attach_trace(obj->progs.stackmapd_fentry);
      if (!link) err = -errno;
    }
    if (err) {
      stackmapd_bpf__destroy(obj);
      std::string why = "cannot trace function " + fn.name + " with fentry (" + errno_text(err) +
                        "): it must be in the kernel's BTF and not marked notrace";
      if (fn.required) throw Error(why);
      if (skipped++ == 0) first_error = why;
      continue;
    }
    fentry_objs_.push_back(obj);
    links_.push_back(link);
    sources_.push_back(fn.name);
  }
  if (skipped)
    spdlog::warn("skipped {} of {} functions matched by -f globs, e.g.: {}", skipped,
                 config.functions.size(), first_error);
}

void BpfSession::attach_profile(uint32_t hz, uint32_t filter_cpu) {
  perf_event_attr attr = {};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = hz;
  const uint64_t source = sources_.size();
  for (int cpu : online_cpus()) {
    if (filter_cpu != SMT_ANY_CPU && static_cast<uint32_t>(cpu) != filter_cpu) continue;
    int fd = perf_event_open(&attr, -1, cpu);
    if (fd < 0)
      throw Error("cannot sample CPU " + std::to_string(cpu) + " at " + std::to_string(hz) +
                  " Hz: " + errno_text(errno) +
                  (errno == EINVAL ? ": above kernel.perf_event_max_sample_rate?" : ""));
    LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = source);
    bpf_link* link = bpf_program__attach_perf_event_opts(skel_->progs.stackmapd_profile, fd, &opts);
    if (!link) {
      int err = errno;
      close(fd);
      throw Error("cannot attach the sampling program to CPU " + std::to_string(cpu) + ": " +
                  errno_text(err));
    }
    links_.push_back(link);
  }
  sources_.push_back("profile");
}

void BpfSession::unpin() {
  if (!pin_dir_.empty()) remove_pins(pin_dir_, pin_names());
}

BpfSession::~BpfSession() { teardown(); }

void BpfSession::detach() {
  for (bpf_link* link : tracepoint_links_) bpf_link__destroy(link);
  for (bpf_link* link : links_) bpf_link__destroy(link);
  tracepoint_links_.clear();
  links_.clear();
}

void BpfSession::teardown() {
  // Detach first so nothing writes while the consumer and mappings go away.
  detach();
  if (ring_) ring_buffer__free(ring_);
  ring_ = nullptr;
  long page = sysconf(_SC_PAGESIZE);
  if (ring_consumer_) munmap(const_cast<void*>(ring_consumer_), page);
  if (ring_producer_) munmap(const_cast<void*>(ring_producer_), page);
  if (slots_) munmap(slots_, slots_len_);
  if (pool_) munmap(const_cast<smt_elt*>(pool_), pool_len_);
  ring_consumer_ = ring_producer_ = nullptr;
  slots_ = nullptr;
  pool_ = nullptr;
  for (stackmapd_bpf* obj : fentry_objs_) stackmapd_bpf__destroy(obj);
  fentry_objs_.clear();
  if (skel_) stackmapd_bpf__destroy(skel_);
  skel_ = nullptr;
}

int BpfSession::ring_fd() const { return bpf_map__fd(skel_->maps.ids); }

int BpfSession::wakeup_fd() const { return ring_buffer__epoll_fd(ring_); }

const smt_elt* BpfSession::published_elt(uint32_t id) const {
  if (id >= table_size()) return nullptr;
  // Acquire pairs with the BPF side's xchg that published the element.
  uint32_t elt = __atomic_load_n(&slots_[id].elt, __ATOMIC_ACQUIRE);
  if (elt == SMT_ELT_NONE || elt == SMT_ELT_DEAD || elt > pool_size()) return nullptr;
  return &pool_[elt - 1];
}

// The consumer's hot path: one array increment for a known id.
void BpfSession::count_id(uint32_t id, uint32_t epoch) {
  if (epoch != epoch_) {
    ++stale_records_;
    return;
  }
  if (store_.count(id)) return;
  // First sight of this id: the table published it before the id was
  // submitted, so its frames are there to copy, once.
  const smt_elt* e = published_elt(id);
  if (!e || e->nr == 0 || e->nr > SMT_MAX_DEPTH) {
    ++bad_records_;
    return;
  }
  store_.insert(id, std::vector<uint64_t>(e->ips, e->ips + e->nr));
}

void BpfSession::check_sample(const smt_verify_record& v) {
  const StackRecord* stored = store_.find(v.stack_id);
  bool same = stored && v.nr <= SMT_MAX_DEPTH && stored->ips.size() == v.nr &&
              std::equal(stored->ips.begin(), stored->ips.end(), v.ips);
  if (same) {
    ++verify_ok_;
    return;
  }
  if (++verify_mismatch_ <= 10)
    spdlog::warn("verify: stack_id {} holds a different stack than the event captured", v.stack_id);
}

int BpfSession::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<BpfSession*>(ctx);
  if (self->discard_records_) return 0;
  if (size == sizeof(smt_id_record)) {
    smt_id_record r;
    std::memcpy(&r, data, sizeof(r));
    self->count_id(r.stack_id, r.epoch);
  } else if (size == sizeof(smt_trace_record)) {
    smt_trace_record t;
    std::memcpy(&t, data, sizeof(t));
    self->count_id(t.stack_id, t.epoch);
    if (t.epoch == self->epoch_ && self->trace_sink_) self->trace_sink_(t);
  } else if (size == sizeof(smt_verify_record)) {
    smt_verify_record v;
    std::memcpy(&v, data, sizeof(v));
    self->count_id(v.stack_id, v.epoch);
    if (v.epoch == self->epoch_) self->check_sample(v);
  } else {
    ++self->bad_records_;
  }
  return 0;
}

size_t BpfSession::drain(int timeout_ms) {
  uint64_t before = consumed_;
  // poll() consumes only after a wakeup; the BPF side rarely sends one (it
  // submits without waking), so consume() after every timeout as well.
  int n = ring_buffer__poll(ring_, timeout_ms);
  if (n < 0 && n != -EINTR) throw Error("ring buffer poll failed: " + errno_text(n));
  if (n > 0) consumed_ += n;
  n = ring_buffer__consume(ring_);
  if (n < 0 && n != -EINTR) throw Error("ring buffer consume failed: " + errno_text(n));
  if (n > 0) consumed_ += n;
  return consumed_ - before;
}

// Every CPU's counters at every nesting level.
std::vector<smt_cpu_counters> BpfSession::read_counters() const {
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) throw Error("cannot count possible CPUs: " + errno_text(ncpus));
  std::vector<smt_cpu_counters> all;
  std::vector<smt_cpu_counters> percpu(ncpus);
  for (uint32_t level = 0; level < SMT_MAX_NEST; ++level) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &level, percpu.data()))
      throw Error("cannot read the BPF counters: " + errno_text(errno));
    all.insert(all.end(), percpu.begin(), percpu.end());
  }
  return all;
}

std::array<uint64_t, SMC_NR> BpfSession::sum_counters(uint32_t parity) const {
  std::array<uint64_t, SMC_NR> sum{};
  for (const auto& c : read_counters())
    for (int i = 0; i < SMC_NR; ++i) sum[i] += c.epoch[parity][i];
  return sum;
}

TableStats BpfSession::stats_of(uint32_t parity) const {
  TableStats s;
  std::vector<smt_cpu_counters> percpu = read_counters();
  for (const auto& c : percpu) {
    s.events_total += c.events;
    for (int i = 0; i < SMC_NR; ++i) s.counters[i] += c.epoch[parity][i];
  }
  for (int i = 0; i < SMC_NR; ++i) s.counters[i] -= book().baseline[parity][i];
  uint32_t handed_out = __atomic_load_n(&skel_->bss->shared.next_elt, __ATOMIC_RELAXED);
  s.pool_size = pool_size();
  s.table_size = table_size();
  s.entries = handed_out < s.pool_size ? handed_out : s.pool_size;
  s.resets = book().resets;
  s.past_events = book().past_events;
  s.verify_ok = verify_ok_;
  s.verify_mismatch = verify_mismatch_;
  s.stale_records = stale_records_;
  s.bad_records = bad_records_;
  return s;
}

TableStats BpfSession::stats() const { return stats_of(epoch_ & 1); }

Snapshot BpfSession::snapshot() const {
  Snapshot snap;
  snap.bits = bits_;
  snap.hash_seed = hash_seed_;
  snap.stats = stats();
  snap.stacks = store_.snapshot();
  return snap;
}

StackRecord BpfSession::table_stack(uint32_t id) const {
  StackRecord r;
  r.stack_id = id;
  const smt_elt* e = published_elt(id);
  if (!e || e->nr > SMT_MAX_DEPTH) return r;
  r.ref_count = __atomic_load_n(&e->ref_count, __ATOMIC_RELAXED);
  r.ips.assign(e->ips, e->ips + e->nr);
  return r;
}

std::vector<StackRecord> BpfSession::table_stacks() const {
  std::vector<StackRecord> out;
  for (uint32_t id = 0; id < table_size(); ++id) {
    StackRecord r = table_stack(id);
    if (!r.ips.empty()) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace stackmapd

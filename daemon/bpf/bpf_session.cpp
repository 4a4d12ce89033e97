// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "daemon/sys/error.h"
#include "daemon/bpf/pinning.h"
#include "daemon/bpf/preflight.h"
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

smt_config settings_for(const SessionConfig& c, uint32_t bits, uint32_t ring_bytes) {
  smt_config s = {};
  s.table_bits = bits;
  s.wakeup_bytes = ring_bytes / 4;
  s.verify_every = c.verify_every;
  s.trace_records = c.trace;
  s.filter_tgid = c.filter_pid;
  s.filter_cpu = c.filter_cpu;
  return s;
}

void configure_rodata(stackmapd_bpf* skel, const SessionConfig& c) {
  skel->rodata->settings = settings_for(c, c.bits, c.ringbuf_bytes);
}

int perf_event_open(perf_event_attr* attr, pid_t pid, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// Maps a whole BPF array into memory (BPF_F_MMAPABLE).
void* map_array(int fd, size_t* len, int prot, const std::string& what) {
  bpf_map_info info = {};
  uint32_t info_len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &info_len) != 0)
    throw Error("cannot inspect BPF map " + what + ": " + errno_text(errno));
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = static_cast<size_t>(info.value_size) * info.max_entries;
  *len = (bytes + page - 1) / page * page;
  return map_memory(fd, *len, prot, 0, "BPF map " + what);
}

uint64_t tracepoint_id(const Tracepoint& tp) {
  const std::string path = find_tracefs_events() + "/" + tp.category + "/" + tp.name + "/id";
  std::ifstream in(path);
  uint64_t id = 0;
  if (!(in >> id))
    throw Error("cannot attach to tracepoint " + tp.str() + ": no " + path +
                ": check that it is listed in /sys/kernel/tracing/available_events");
  return id;
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
    : pins_(config.pinned_dir.empty() ? nullptr : std::make_unique<LoaderPins>(config.pinned_dir)),
      bits_(pins_ ? pins_->bits : config.bits),
      pin_dir_(pins_ ? "" : config.pin_dir),
      store_(2u << bits_) {
  if (config.trace && config.verify_every)
    throw Error("--trace and --verify cannot be combined: a verify sample replaces the event's "
                "trace record; use one at a time");
  // Pins of a previous session (ours) or a loader's: continue their table.
  bool pinned_table = true;
  if (pins_)
    use_pins(config);
  else
    pinned_table = load_own(config);
  try {
    map_table();
    if (pinned_table && book().layout_version != 0)
      resume(pins_ ? config.pinned_dir : pin_dir_);
    else
      start_fresh();  // our fresh .bss, or maps as a loader created them: zeroed
    reattach(config.events);
    attach_functions(config);
    if (config.profile_hz) attach_profile(config.profile_hz, config.filter_cpu);
  } catch (...) {
    teardown();
    throw;
  }
}

// Returns whether the table was taken over from our own pins.
bool BpfSession::load_own(const SessionConfig& config) {
  skel_ = stackmapd_bpf__open();
  if (!skel_) throw Error("cannot open the BPF object: " + errno_text(errno));
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
  slots_fd_ = bpf_map__fd(skel_->maps.slots);
  pool_fd_ = bpf_map__fd(skel_->maps.pool);
  counters_fd_ = bpf_map__fd(skel_->maps.counters);
  ids_fd_ = bpf_map__fd(skel_->maps.ids);
  tracepoint_prog_ = bpf_program__fd(skel_->progs.stackmapd_tracepoint);
  profile_prog_ = config.profile_hz ? bpf_program__fd(skel_->progs.stackmapd_profile) : -1;
  globals_ = &skel_->bss->globals;
  return take_over;
}

// Nothing is loaded or created: the loader did that, we write the settings.
void BpfSession::use_pins(const SessionConfig& config) {
  if (!config.functions.empty())
    throw Error("-f needs stackmapd's own BPF object (one fentry program per function); with "
                "--pinned use -e tracepoints or --profile");
  if (config.profile_hz && pins_->profile_prog < 0)
    throw Error("--profile: " + config.pinned_dir + "/" +
                LoaderPins::prog_pin("perf_event/stackmapd") +
                " is missing: the loader must load stackmapd.o's perf_event section too");
  if (config.bits != SMT_DEFAULT_BITS && config.bits != bits_)
    spdlog::warn("--bits {} ignored: the pinned table holds 2^{} stacks, fixed when stackmapd.o "
                 "was built (SMT_BPFLOADER_BITS)", config.bits, bits_);
  slots_fd_ = pins_->slots;
  pool_fd_ = pins_->pool;
  counters_fd_ = pins_->counters;
  ids_fd_ = pins_->ids;
  tracepoint_prog_ = pins_->tracepoint_prog;
  profile_prog_ = pins_->profile_prog;
  const uint32_t zero = 0;
  const smt_config settings = settings_for(config, bits_, pins_->ring_bytes);
  if (bpf_map_update_elem(pins_->settings, &zero, &settings, BPF_ANY) != 0)
    throw Error("--pinned: cannot write " + LoaderPins::map_pin("settings") + ": " +
                errno_text(errno) + ": the daemon needs write access to the pinned maps");
  globals_ = static_cast<smt_globals*>(
      map_array(pins_->globals, &globals_len_, PROT_READ | PROT_WRITE, "globals"));
}

// The table's arrays and the ring, mapped once.
void BpfSession::map_table() {
  slots_ = static_cast<smt_slot*>(map_array(slots_fd_, &slots_len_, PROT_READ | PROT_WRITE, "slots"));
  pool_ = static_cast<const smt_elt*>(map_array(pool_fd_, &pool_len_, PROT_READ, "pool"));
  long page = sysconf(_SC_PAGESIZE);
  ring_consumer_ = map_memory(ids_fd_, page, PROT_READ, 0, "the ring buffer's consumer page");
  ring_producer_ = map_memory(ids_fd_, page, PROT_READ, page, "the ring buffer's producer page");
  ring_ = ring_buffer__new(ids_fd_, on_record, this, nullptr);
  if (!ring_) throw Error("cannot set up the ring-buffer consumer: " + errno_text(errno));
}

const std::vector<std::string>& BpfSession::pin_names() {
  static const std::vector<std::string> names = {"slots", "pool", "counters", "ids", "state"};
  return names;
}

void BpfSession::start_fresh() {
  hash_seed_ = random_seed();
  globals_->shared = smt_shared{};
  globals_->shared.hash_seed = hash_seed_;
  book() = smt_daemon_state{};
  book().layout_version = SMT_LAYOUT_VERSION;
  book().bits = bits_;
}

// Called before anything is attached: nothing writes the maps meanwhile.
void BpfSession::resume(const std::string& where) {
  smt_shared& shared = globals_->shared;
  if (book().layout_version != SMT_LAYOUT_VERSION || book().bits != bits_) {
    spdlog::warn("the table pinned in {} is of layout {} (want {}): starting clean", where,
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
  spdlog::info("continuing the table pinned in {}: {} stacks, {} events, epoch {}", where,
               store_.size(), store_.total_events(), epoch_);
}

// The link first: the program stops running before its event goes away.
void BpfSession::close_links(std::vector<PerfLink>& links) {
  for (const PerfLink& l : links) {
    close(l.link_fd);
    close(l.perf_fd);
  }
  links.clear();
}

BpfSession::PerfLink BpfSession::attach_perf(int prog_fd, int perf_fd, uint64_t cookie,
                                             const std::string& what) {
  // The cookie tells the shared program which source fired.
  LIBBPF_OPTS(bpf_link_create_opts, opts, .perf_event = {.bpf_cookie = cookie});
  int link = bpf_link_create(prog_fd, perf_fd, BPF_PERF_EVENT, &opts);
  if (link < 0 || ioctl(perf_fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    int err = errno;
    if (link >= 0) close(link);
    close(perf_fd);
    throw Error("cannot attach to " + what + ": " + errno_text(err) +
                (err == EINVAL ? ": the kernel needs BPF links on perf events (5.15+)" : ""));
  }
  return {perf_fd, link};
}

void BpfSession::reattach(const std::vector<Tracepoint>& events) {
  close_links(tracepoint_links_);
  sources_.clear();
  for (const auto& tp : events) {
    perf_event_attr attr = {};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = tracepoint_id(tp);
    attr.sample_period = 1;
    // One event on CPU 0 is enough: the program runs wherever the tracepoint fires.
    int fd = perf_event_open(&attr, -1, 0);
    if (fd < 0)
      throw Error("cannot open tracepoint " + tp.str() + ": " + errno_text(errno) +
                  ": needs CAP_PERFMON (or root)");
    tracepoint_links_.push_back(attach_perf(tracepoint_prog_, fd, sources_.size(),
                                            "tracepoint " + tp.str()));
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
    obj->rodata->settings.fentry_source = static_cast<uint32_t>(sources_.size());
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
    fentry_links_.push_back(link);
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
    profile_links_.push_back(attach_perf(profile_prog_, fd, source,
                                         "CPU " + std::to_string(cpu) + " sampling"));
  }
  sources_.push_back("profile");
}

void BpfSession::unpin() {
  if (!pin_dir_.empty()) remove_pins(pin_dir_, pin_names());
}

BpfSession::~BpfSession() { teardown(); }

void BpfSession::detach() {
  close_links(tracepoint_links_);
  close_links(profile_links_);
  for (bpf_link* link : fentry_links_) bpf_link__destroy(link);
  fentry_links_.clear();
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
  if (globals_len_) munmap(globals_, globals_len_);
  ring_consumer_ = ring_producer_ = nullptr;
  slots_ = nullptr;
  pool_ = nullptr;
  globals_ = nullptr;
  globals_len_ = 0;
  for (stackmapd_bpf* obj : fentry_objs_) stackmapd_bpf__destroy(obj);
  fentry_objs_.clear();
  if (skel_) stackmapd_bpf__destroy(skel_);
  skel_ = nullptr;
  pins_.reset();
}

int BpfSession::ring_fd() const { return ids_fd_; }

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
    if (bpf_map_lookup_elem(counters_fd_, &level, percpu.data()))
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
  uint32_t handed_out = __atomic_load_n(&globals_->shared.next_elt, __ATOMIC_RELAXED);
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

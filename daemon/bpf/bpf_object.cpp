// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/bpf_object.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "daemon/bpf/pinning.h"
#include "daemon/sys/error.h"
#include "daemon/sys/preflight.h"
#include "stackmapd.skel.h"

namespace stackmapd {

void destroy_skeleton(stackmapd_bpf* skel) { stackmapd_bpf__destroy(skel); }

namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

uint32_t possible_cpus() {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) throw Error("cannot count possible CPUs: " + errno_text(cpus));
  if (static_cast<uint32_t>(cpus) > SMT_MAX_CPUS)
    throw Error("this machine has " + std::to_string(cpus) + " possible CPUs; stackmapd counts " +
                "per CPU for at most " + std::to_string(SMT_MAX_CPUS));
  return static_cast<uint32_t>(cpus);
}

smt_config settings_for(const SessionConfig& c, uint32_t bits, uint32_t ring_bytes) {
  smt_config s = {};
  s.table_bits = bits;
  s.wakeup_bytes = ring_bytes / 4;
  s.verify_every = c.verify_every;
  s.trace_records = c.trace;
  if (c.filter_pids.size() > SMT_MAX_PIDS)
    throw Error("--pid: " + std::to_string(c.filter_pids.size()) + " processes, at most " +
                std::to_string(SMT_MAX_PIDS) + " can be traced at once");
  // BPF programs see the host's pids: in another PID namespace, a pid from
  // /proc or a fork() names another process, or none.
  const char* by_pid = c.user_stacks            ? "--user-stacks (and -u)"
                       : !c.filter_pids.empty() ? "--pid"
                       : c.follow_command       ? "-- CMD"
                                                : nullptr;
  if (by_pid && !in_host_pid_namespace())
    throw Error(std::string(by_pid) + " needs the host's PID namespace, and stackmapd runs in " +
                "another: the pids the kernel's programs see are not this /proc's; run it in " +
                "the host's (docker run --pid=host, Kubernetes hostPID: true)");
  s.filter_tgid_nr = static_cast<uint32_t>(c.filter_pids.size());
  std::copy(c.filter_pids.begin(), c.filter_pids.end(), s.filter_tgid);
  s.filter_cpu = c.filter_cpu;
  if (c.filter_comms.size() > SMT_MAX_COMMS || c.filter_cgroups.size() > SMT_MAX_CGROUPS)
    throw Error("--comm/--cgroup: at most " + std::to_string(SMT_MAX_COMMS) + " names and " +
                std::to_string(SMT_MAX_CGROUPS) + " cgroups can be traced at once");
  s.filter_comm_nr = static_cast<uint32_t>(c.filter_comms.size());
  for (size_t i = 0; i < c.filter_comms.size(); ++i) {
    char name[16] = {};  // zero-padded, as the kernel pads task->comm
    std::memcpy(name, c.filter_comms[i].data(), std::min<size_t>(c.filter_comms[i].size(), 15));
    std::memcpy(s.filter_comm[i], name, sizeof(name));
  }
  s.filter_cgroup_nr = static_cast<uint32_t>(c.filter_cgroups.size());
  for (size_t i = 0; i < c.filter_cgroups.size(); ++i)
    s.filter_cgroup[i] = {c.filter_cgroups[i].id, c.filter_cgroups[i].level, 0};
  s.min_block_ns = c.offcpu ? c.offcpu->min_block_ns : 0;
  s.next_pid_offset = c.offcpu ? c.offcpu->next_pid_offset : 0;
  s.prev_state_offset = c.offcpu ? c.offcpu->prev_state_offset : 0;
  s.cgroup_ids = c.keys.has(KeyField::cgroup) || c.keys.has(KeyField::unit);
  s.strip_nr = static_cast<uint32_t>(std::min<size_t>(c.machinery.size(), SMT_MAX_STRIP));
  std::copy_n(c.machinery.begin(), s.strip_nr, s.strip);
  s.user_stacks = c.user_stacks;
  s.user_unwind = c.user_unwind;
  s.follow_command = c.follow_command;
  s.hist = c.keys.has(KeyField::bucket);
  s.filter = c.filter_program.prog;
  return s;
}

// A loader's names map outlives the daemon that knew its ids: start it empty.
void clear_names(int names_fd) {
  smt_comm key;
  while (bpf_map_get_next_key(names_fd, nullptr, &key) == 0)
    if (bpf_map_delete_elem(names_fd, &key) != 0)
      throw Error("--pinned: cannot clear " + LoaderPins::map_pin("names") + ": " +
                  errno_text(errno) + ": the daemon needs write access to the pinned maps");
}

StackmapdSkeleton open_skeleton(const SessionConfig& c) {
  StackmapdSkeleton skel(stackmapd_bpf__open());
  if (!skel) throw Error("cannot open the BPF object: " + errno_text(errno));
  skel->rodata->settings = settings_for(c, c.bits, c.ringbuf_bytes);
  return skel;
}

// The kernel table's maps pinned under pin_dir, by pin name (BpfObject::pin_names()).
std::vector<PinnedMap> pinned_maps(stackmapd_bpf* skel) {
  return {{"slots", skel->maps.slots},
          {"pool", skel->maps.pool},
          {"batches", skel->maps.batches},
          {"ids", skel->maps.ids},
          {"state", skel->maps.bss}};
}

// The user table's (--user-stacks; one entry each without it). Its
// smt_shared is in "state": taken over only with the kernel table.
std::vector<PinnedMap> user_pinned_maps(stackmapd_bpf* skel) {
  return {{"uslots", skel->maps.uslots}, {"upool", skel->maps.upool}};
}

// Makes `maps` use the maps pinned under `dir` (before load).
void reuse_pins(const std::string& dir, const std::vector<PinnedMap>& maps) {
  for (const auto& m : maps) {
    UniqueFd fd(bpf_obj_get((dir + "/" + m.name).c_str()));
    if (!fd || bpf_map__reuse_fd(m.map, fd.get()) != 0)
      throw Error("cannot reuse the table pinned in " + dir + "/" + m.name + ": " +
                  errno_text(errno) + ": remove the pins (stackmapd unpin) to start clean");
  }
}

}  // namespace

BpfObject::BpfObject(const SessionConfig& config)
    : config_(config),
      pins_(config.pinned_dir.empty() ? nullptr : std::make_unique<LoaderPins>(config.pinned_dir)),
      bits_(pins_ ? pins_->bits : config.bits),
      batch_count_(possible_cpus() * SMT_MAX_NEST),
      pin_dir_(pins_ ? "" : config.pin_dir) {
  if (config.trace && config.verify_every)
    throw Error(
        "--trace and --verify cannot be combined: a verify sample replaces the event's "
        "trace record; use one at a time");
  if (pins_) {
    use_pins(config);
    pinned_where_ = config.pinned_dir;
  } else if (load_own(config)) {
    pinned_where_ = pin_dir_;
  }
}

const std::vector<std::string>& BpfObject::pin_names() {
  static const std::vector<std::string> names = {"slots", "pool",   "batches", "ids",
                                                 "state", "uslots", "upool"};
  return names;
}

// Returns whether the maps are those of a table pinned under pin_dir.
bool BpfObject::load_own(const SessionConfig& config) {
  skel_ = open_skeleton(config);
  // Only the programs the session attaches: the verifier walks each one
  // loaded whole (with --user-stacks, most of the start-up's time).
  bpf_program__set_autoload(skel_->progs.stackmapd_tracepoint, !config.events.empty());
  bpf_program__set_autoload(skel_->progs.stackmapd_profile, config.profile_hz > 0);
  bpf_program__set_autoload(skel_->progs.stackmapd_fentry, false);
  const bool kprobes =
      config.kprobe_fallback || std::any_of(config.functions.begin(), config.functions.end(),
                                            [](const FunctionTarget& f) { return f.kprobe(); });
  bpf_program__set_autoload(skel_->progs.stackmapd_kprobe, kprobes);
  bpf_program__set_autoload(skel_->progs.stackmapd_offcpu, config.offcpu.has_value());
  bpf_program__set_autoload(skel_->progs.stackmapd_follow_fork, config.follow_command);
  bpf_program__set_autoload(skel_->progs.stackmapd_follow_exit, config.follow_command);
  bpf_program__set_autoload(skel_->progs.stackmapd_uprobe, !config.uprobes.empty());
  if (config.follow_command) bpf_map__set_max_entries(skel_->maps.tracked, SMT_MAX_TRACKED);
  bpf_map__set_max_entries(skel_->maps.slots, 2u << bits_);
  bpf_map__set_max_entries(skel_->maps.pool, 1u << bits_);
  bpf_map__set_max_entries(skel_->maps.ids, config.ringbuf_bytes);
  bpf_map__set_max_entries(skel_->maps.batches, batch_count_);
  // Preallocated: without --offcpu its 16384 threads' room would be kernel memory for nothing.
  if (!config.offcpu) bpf_map__set_max_entries(skel_->maps.offcpu_start, 1);
  // The user stack table: as large as the kernel's, one entry each when off.
  bpf_map__set_max_entries(skel_->maps.uslots, config.user_stacks ? 2u << bits_ : 1);
  bpf_map__set_max_entries(skel_->maps.upool, config.user_stacks ? 1u << bits_ : 1);
  const bool unwind = config.user_unwind;
  bpf_map__set_max_entries(skel_->maps.unwind_rows, unwind ? config.unwind_rows : 1);
  bpf_map__set_max_entries(skel_->maps.unwind_files, unwind ? kUnwindFiles : 1);
  bpf_map__set_max_entries(skel_->maps.unwind_asked, unwind ? kUnwindFiles : 1);
  bpf_map__set_max_entries(skel_->maps.unwind_procs, unwind ? kUnwindProcesses : 1);
  for (bpf_program* p :
       {skel_->progs.stackmapd_unwind_exec, skel_->progs.stackmapd_unwind_fork,
        skel_->progs.stackmapd_unwind_mmap, skel_->progs.stackmapd_unwind_mprotect})
    bpf_program__set_autoload(p, unwind);

  bool take_over = false;
  if (!pin_dir_.empty()) {
    prepare_pin_dir(pin_dir_);
    const std::vector<PinnedMap> maps = pinned_maps(skel_.get());
    std::string why = pin_mismatch(pin_dir_, maps);
    take_over = why.empty();
    if (take_over) {
      // The pinned maps themselves (no pin_path: libbpf would pin at load).
      reuse_pins(pin_dir_, maps);
      // A user table of another size (--user-stacks toggled) or none (pins
      // of an older daemon): this session's starts clean, the kernel's goes on.
      const std::vector<PinnedMap> user = user_pinned_maps(skel_.get());
      const std::string user_why = pin_mismatch(pin_dir_, user);
      user_pinned_ = user_why.empty();
      if (user_pinned_) reuse_pins(pin_dir_, user);
      else if (config.user_stacks)
        spdlog::info("not taking over the user stack table pinned in {}: {}; starting it clean",
                     pin_dir_, user_why);
    } else if (any_pins(pin_dir_, pin_names())) {
      spdlog::warn("not taking over the table pinned in {}: {}; starting clean", pin_dir_, why);
    }
  }

  if (int err = stackmapd_bpf__load(skel_.get()))
    throw Error("the kernel refused the BPF program or its maps (" + errno_text(err) +
                "): run with -v to see libbpf's log and the verifier's");
  pinned_ = take_over;
  slots_fd_ = bpf_map__fd(skel_->maps.slots);
  pool_fd_ = bpf_map__fd(skel_->maps.pool);
  uslots_fd_ = bpf_map__fd(skel_->maps.uslots);
  upool_fd_ = bpf_map__fd(skel_->maps.upool);
  unwind_fds_ = {bpf_map__fd(skel_->maps.unwind_rows), bpf_map__fd(skel_->maps.unwind_files),
                 bpf_map__fd(skel_->maps.unwind_procs), bpf_map__fd(skel_->maps.unwind_asked),
                 bpf_map__fd(skel_->maps.unwind_wanted)};
  batches_fd_ = bpf_map__fd(skel_->maps.batches);
  ids_fd_ = bpf_map__fd(skel_->maps.ids);
  offcpu_start_fd_ = bpf_map__fd(skel_->maps.offcpu_start);
  tracepoint_prog_ =
      config.events.empty() ? -1 : bpf_program__fd(skel_->progs.stackmapd_tracepoint);
  profile_prog_ = config.profile_hz ? bpf_program__fd(skel_->progs.stackmapd_profile) : -1;
  offcpu_prog_ = config.offcpu ? bpf_program__fd(skel_->progs.stackmapd_offcpu) : -1;
  kprobe_program_ = kprobes ? skel_->progs.stackmapd_kprobe : nullptr;
  globals_ = &skel_->bss->globals;
  if (unwind) {
    // Before any process is read: no exec or mapping goes unseen in between.
    unwind_exec_.reset(bpf_program__attach(skel_->progs.stackmapd_unwind_exec));
    if (unwind_exec_) unwind_fork_.reset(bpf_program__attach(skel_->progs.stackmapd_unwind_fork));
    if (unwind_fork_) unwind_mmap_.reset(bpf_program__attach(skel_->progs.stackmapd_unwind_mmap));
    if (unwind_mmap_)
      unwind_mprotect_.reset(bpf_program__attach(skel_->progs.stackmapd_unwind_mprotect));
    if (!unwind_mprotect_)
      throw Error(
          "--user-unwind tables: cannot follow execs, forks and code mappings "
          "(sched_process_exec, sched_process_fork, syscalls:sys_exit_mmap, "
          "sys_enter_mprotect): " +
          errno_text(errno) + ": use --user-unwind fp");
  }
  if (config.follow_command) {
    // Before the command runs, so that none of its forks goes unseen.
    follow_fork_.reset(bpf_program__attach_trace(skel_->progs.stackmapd_follow_fork));
    if (follow_fork_)
      follow_exit_.reset(bpf_program__attach_trace(skel_->progs.stackmapd_follow_exit));
    if (!follow_exit_)
      throw Error("-- CMD: cannot follow forks and exits (tp_btf/sched_process_fork, exit): " +
                  errno_text(errno) + ": this kernel needs BPF tracing programs for it");
  }
  return take_over;
}

void BpfObject::track(uint32_t pid) const {
  const uint32_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.tracked), &pid, &one, BPF_ANY) != 0)
    throw Error("-- CMD: cannot follow process " + std::to_string(pid) + ": " + errno_text(errno));
}

uint64_t BpfObject::tracked_lost() const {
  const uint32_t zero = 0;
  uint64_t lost = 0;
  if (skel_) bpf_map_lookup_elem(bpf_map__fd(skel_->maps.tracked_lost), &zero, &lost);
  return lost;
}

// Nothing is loaded or created: the loader did that; write_settings() and
// the session's attach do the rest.
void BpfObject::use_pins(const SessionConfig& config) {
  if (config.follow_command)
    throw Error(
        "-- CMD needs stackmapd's own BPF object (its fork and exit programs); drop --pinned "
        "or run the command first and give --pid");
  if (!config.uprobes.empty())
    throw Error("-u needs stackmapd's own BPF object (its uprobe program); drop --pinned or -u");
  if (config.user_stacks)
    throw Error(
        "--user-stacks needs stackmapd's own BPF object (the pinned one has no user stack "
        "table); drop --pinned or --user-stacks");
  if (config.offcpu)
    throw Error(
        "--offcpu needs stackmapd's own BPF object (its sched_switch program); drop --pinned "
        "or --offcpu");
  if (config.profile_hz && pins_->profile_prog < 0)
    throw Error("--profile: " + config.pinned_dir + "/" +
                LoaderPins::prog_pin("perf_event/stackmapd") +
                " is missing: the loader must load stackmapd.o's perf_event section too (Android "
                "13 and later do; 11 and 12 ignore perf_event/ sections)");
  std::set<std::string> events;
  for (const auto& tp : config.events) events.insert(tp.str());
  if (events.size() > pins_->tracepoint_progs.size())
    throw Error("--pinned attaches at most " + std::to_string(pins_->tracepoint_progs.size()) +
                " tracepoints at once (one pinned copy of the tracepoint program each, " +
                LoaderPins::prog_pin(LoaderPins::tracepoint_section(0)) + "..), not " +
                std::to_string(events.size()) + ": trace fewer, or use stackmapd's own object");
  if (config.bits != SMT_DEFAULT_BITS && config.bits != bits_)
    spdlog::warn(
        "--bits {} ignored: the pinned table holds 2^{} stacks, fixed when stackmapd.o "
        "was built (SMT_BPFLOADER_BITS)",
        config.bits, bits_);
  slots_fd_ = pins_->slots;
  pool_fd_ = pins_->pool;
  batches_fd_ = pins_->batches;
  batch_count_ = pins_->batch_count;
  ids_fd_ = pins_->ids;
  tracepoint_prog_ = pins_->tracepoint_progs.front();
  profile_prog_ = pins_->profile_prog;
  clear_names(pins_->names);
  long page = sysconf(_SC_PAGESIZE);
  pinned_globals_ = Mapping(pins_->globals, (sizeof(smt_globals) + page - 1) / page * page,
                            PROT_READ | PROT_WRITE, 0, "the pinned globals map");
  globals_ = pinned_globals_.as<smt_globals>();
}

void BpfObject::write_settings() const {
  if (!pins_) return;  // in our own object's .rodata, fixed at load
  const uint32_t zero = 0;
  const smt_config settings = settings_for(config_, bits_, pins_->ring_bytes);
  if (bpf_map_update_elem(pins_->settings, &zero, &settings, BPF_ANY) != 0)
    throw Error("--pinned: cannot write " + LoaderPins::map_pin("settings") + ": " +
                errno_text(errno) + ": the daemon needs write access to the pinned maps");
}

void BpfObject::pin() {
  if (pin_dir_.empty() || (pinned_ && user_pinned_)) return;
  prepare_pin_dir(pin_dir_);
  std::vector<PinnedMap> maps = pinned_maps(skel_.get());
  for (const PinnedMap& m : user_pinned_maps(skel_.get())) maps.push_back(m);
  // Every pin under a new name first: a failure leaves the old pins as they were.
  std::vector<std::string> staged;
  auto unstage = [&] {
    for (const auto& path : staged) unlink(path.c_str());
  };
  for (const auto& m : maps) {
    const std::string path = pin_dir_ + "/new-" + m.name;  // bpffs names take no '.'
    unlink(path.c_str());                                  // left by a daemon that died here
    if (bpf_obj_pin(bpf_map__fd(m.map), path.c_str()) != 0) {
      int err = errno;
      unstage();
      throw Error("cannot pin the table's map " + m.name + " in " + pin_dir_ + ": " +
                  errno_text(err) + ": check that it is on a bpf filesystem, or set pin-dir \"\"");
    }
    staged.push_back(path);
  }
  for (size_t i = 0; i < maps.size(); ++i)
    if (rename(staged[i].c_str(), (pin_dir_ + "/" + maps[i].name).c_str()) != 0) {
      int err = errno;
      unstage();
      throw Error("cannot pin the table in " + pin_dir_ + ": rename: " + errno_text(err));
    }
  pinned_ = user_pinned_ = true;
}

void BpfObject::unpin() const {
  if (!pin_dir_.empty()) remove_pins(pin_dir_, pin_names());
}

StackmapdSkeleton BpfObject::load_function(const std::string& function, uint32_t source) const {
  StackmapdSkeleton obj = open_skeleton(config_);
  obj->rodata->settings.fentry_source = source;
  bpf_program__set_autoload(obj->progs.stackmapd_tracepoint, false);
  bpf_program__set_autoload(obj->progs.stackmapd_profile, false);
  bpf_program__set_autoload(obj->progs.stackmapd_offcpu, false);
  bpf_program__set_autoload(obj->progs.stackmapd_kprobe, false);
  bpf_program__set_autoload(obj->progs.stackmapd_follow_fork, false);
  bpf_program__set_autoload(obj->progs.stackmapd_follow_exit, false);
  bpf_program__set_autoload(obj->progs.stackmapd_uprobe, false);
  bpf_program__set_attach_target(obj->progs.stackmapd_fentry, 0, function.c_str());
  const std::pair<bpf_map*, bpf_map*> shared_maps[] = {
      {obj->maps.slots, skel_->maps.slots},     {obj->maps.pool, skel_->maps.pool},
      {obj->maps.uslots, skel_->maps.uslots},   {obj->maps.upool, skel_->maps.upool},
      {obj->maps.batches, skel_->maps.batches}, {obj->maps.scratch, skel_->maps.scratch},
      {obj->maps.nesting, skel_->maps.nesting}, {obj->maps.ids, skel_->maps.ids},
      {obj->maps.names, skel_->maps.names},     {obj->maps.offcpu_start, skel_->maps.offcpu_start},
      {obj->maps.tracked, skel_->maps.tracked}, {obj->maps.tracked_lost, skel_->maps.tracked_lost},
      {obj->maps.bss, skel_->maps.bss}};
  int err = 0;
  for (const auto& [mine, main] : shared_maps)
    if (!err) err = bpf_map__reuse_fd(mine, bpf_map__fd(main));
  if (!err) err = stackmapd_bpf__load(obj.get());
  if (err)
    throw Error("cannot trace function " + function + " with fentry (" + errno_text(err) +
                "): it must be in the kernel's BTF and not marked notrace");
  return obj;
}

bpf_program* BpfObject::uprobe_prog() const {
  return skel_ && !config_.uprobes.empty() ? skel_->progs.stackmapd_uprobe : nullptr;
}

}  // namespace stackmapd

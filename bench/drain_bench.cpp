// SPDX-License-Identifier: GPL-2.0
/*
 * Daemon-side benchmarks driven by a synthetic BPF producer
 * (bench/synth_producer.bpf.c) that writes into the daemon's own ring buffer
 * and table (bpf_map__reuse_fd on the maps of a real stackmapd::BpfSession).
 *
 *   drain_bench drain [--cpu N] [--rounds R] [--file PATH]
 *     A real event burst (open/read/close on kmem:kmem_cache_alloc) fills the
 *     table; the producer then replays those ids (weighted by their counts)
 *     until the ring is 3/4 full, and the daemon's drain() consumes them on
 *     one pinned core. Reports ids/s of consumer CPU time, CPU s per million
 *     ids, and the ring-buffer bytes per record (producer position delta).
 *
 *   drain_bench rss --stacks N [--bits B] [--depth D] [--cpu N]
 *     Only syscalls:sys_enter_reboot attached (it does not fire): the
 *     producer inserts N distinct synthetic stacks into the real table (same
 *     find-or-insert code as the BPF event path) and submits their ids; the
 *     daemon drains them (copying each new stack from the mmapped pool into
 *     its StackStore). Reports VmRSS and its
 *     parts, and the kernel memory the maps lock (fdinfo memlock).
 *
 * Output: one JSON object on stdout. Figures only; nothing here fails on time.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/bpf/bpf_session.h"
#include "daemon/sys/error.h"
#include "stackmapd/abi.h"
#include "synth_producer.skel.h"

namespace {

using stackmapd::BpfSession;
using stackmapd::Error;

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

double wall_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set))
    throw Error("cannot pin to CPU " + std::to_string(cpu));
}

// VmRSS, RssAnon, RssFile, RssShmem in kB.
std::map<std::string, long> rss_kb() {
  std::map<std::string, long> out;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    for (const char* key : {"VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"}) {
      std::string k = std::string(key) + ":";
      if (line.rfind(k, 0) == 0) out[key] = std::stol(line.substr(k.size()));
    }
  }
  return out;
}

long memlock_of(int fd) {
  std::ifstream f("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("memlock:", 0) == 0) return std::stol(line.substr(8));
  return -1;
}

// The daemon's maps, found through the session's program (its fds are ours).
struct DaemonMaps {
  int ids = -1, slots = -1, pool = -1, bss = -1;
  uint32_t shared_off = 0;
};

DaemonMaps find_daemon_maps(int ring_fd) {
  bpf_map_info ring_info = {};
  uint32_t len = sizeof(ring_info);
  if (bpf_obj_get_info_by_fd(ring_fd, &ring_info, &len)) throw Error("cannot read the ring map");
  DaemonMaps m;
  m.ids = ring_fd;
  DIR* d = opendir("/proc/self/fd");
  if (!d) throw Error("cannot list /proc/self/fd");
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    if (fd <= 2) continue;
    bpf_prog_info pi = {};
    uint32_t pl = sizeof(pi);
    uint32_t map_ids[16];
    pi.nr_map_ids = 16;
    pi.map_ids = reinterpret_cast<uint64_t>(map_ids);
    if (bpf_obj_get_info_by_fd(fd, &pi, &pl)) continue;
    if (pl < offsetof(bpf_prog_info, nr_map_ids) || pi.type != BPF_PROG_TYPE_TRACEPOINT) continue;
    bool ours = false;
    for (uint32_t i = 0; i < pi.nr_map_ids && i < 16; ++i) ours |= map_ids[i] == ring_info.id;
    if (!ours) continue;
    for (uint32_t i = 0; i < pi.nr_map_ids && i < 16; ++i) {
      int mfd = bpf_map_get_fd_by_id(map_ids[i]);
      if (mfd < 0) continue;
      bpf_map_info mi = {};
      uint32_t ml = sizeof(mi);
      if (bpf_obj_get_info_by_fd(mfd, &mi, &ml)) continue;
      std::string name = mi.name;
      if (name == "slots") m.slots = mfd;
      else if (name == "pool") m.pool = mfd;
      else if (name.size() > 4 && name.substr(name.size() - 4) == ".bss") {
        m.bss = mfd;
        // Where the table's struct smt_shared sits in .bss, from the map's BTF
        // (DATASEC): inside `globals` (struct smt_globals, abi.h), or a bare
        // `shared` variable in objects from before smt_globals.
        btf* b = btf__load_from_kernel_by_id(mi.btf_id);
        if (!b) throw Error("cannot load the .bss map's BTF");
        const btf_type* t = btf__type_by_id(b, mi.btf_value_type_id);
        bool found = false;
        std::string vars;
        if (t && btf_is_datasec(t)) {
          const btf_var_secinfo* v = btf_var_secinfos(t);
          for (int k = 0; k < btf_vlen(t); ++k, ++v) {
            const btf_type* var = btf__type_by_id(b, v->type);
            if (!var) continue;
            std::string name = btf__name_by_offset(b, var->name_off);
            vars += (vars.empty() ? "" : ", ") + name;
            if (name == "globals" && v->size == sizeof(smt_globals)) {
              m.shared_off = v->offset + offsetof(smt_globals, shared);
              found = true;
            } else if (name == "shared" && v->size == sizeof(smt_shared)) {
              m.shared_off = v->offset;
              found = true;
            }
          }
        }
        btf__free(b);
        if (!found)
          throw Error(
              "no `globals` (struct smt_globals) or `shared` variable in the daemon's .bss (it "
              "has: " +
              vars + ")");
      } else {
        close(mfd);
      }
    }
    break;
  }
  closedir(d);
  if (m.slots < 0 || m.pool < 0 || m.bss < 0)
    throw Error("cannot find the daemon's slots/pool/.bss maps through its program");
  return m;
}

synth_producer* load_producer(const BpfSession& s, const DaemonMaps& m, uint32_t depth) {
  synth_producer* p = synth_producer__open();
  if (!p) throw Error("cannot open the synthetic producer");
  p->rodata->table_bits = s.bits();
  p->rodata->shared_off = m.shared_off;
  p->rodata->synth_depth = depth;
  if (bpf_map__reuse_fd(p->maps.ids, m.ids) || bpf_map__reuse_fd(p->maps.slots, m.slots) ||
      bpf_map__reuse_fd(p->maps.pool, m.pool) || bpf_map__reuse_fd(p->maps.daemon_bss, m.bss))
    throw Error("cannot reuse the daemon's maps in the producer");
  if (int err = synth_producer__load(p))
    throw Error("cannot load the synthetic producer: " + std::string(strerror(-err)));
  return p;
}

int run_prog(bpf_program* prog) {
  LIBBPF_OPTS(bpf_test_run_opts, opts);
  if (int err = bpf_prog_test_run_opts(bpf_program__fd(prog), &opts))
    throw Error("test run failed: " + std::string(strerror(-err)));
  return static_cast<int>(opts.retval);
}

template <typename T>
std::string json_list(const std::vector<T>& v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "]";
  return o.str();
}

int cmd_drain(int cpu, int rounds, const std::string& file) {
  pin(cpu);
  stackmapd::SessionConfig cfg;
  cfg.events.push_back({"kmem", "kmem_cache_alloc"});
  BpfSession s(cfg);
  // A real burst: the table now holds this machine's stacks for the workload.
  double end = wall_s() + 0.3;
  char buf[256];
  while (wall_s() < end) {
    for (int k = 0; k < 1000; ++k) {
      int fd = open(file.c_str(), O_RDONLY);
      if (fd >= 0) {
        if (read(fd, buf, sizeof(buf)) < 0) {
        }
        close(fd);
      }
    }
    s.drain(0);
  }
  s.detach();
  s.drain(0);
  auto stacks = s.store().snapshot(s.sources());
  if (stacks.empty()) throw Error("the burst recorded no stacks");
  uint64_t total = 0;
  for (const auto& r : stacks) total += r.ref_count;
  // Replay ids in proportion to their real counts (every id at least once).
  std::vector<uint32_t> seq;
  for (const auto& r : stacks) {
    size_t n = std::max<size_t>(1, static_cast<size_t>(4000.0 * r.ref_count / total));
    for (size_t i = 0; i < n && seq.size() < 4096; ++i) seq.push_back(r.stack_id);
  }
  std::shuffle(seq.begin(), seq.end(), std::mt19937(42));

  DaemonMaps m = find_daemon_maps(s.ring_fd());
  synth_producer* p = load_producer(s, m, 8);
  std::copy(seq.begin(), seq.end(), p->bss->replay_ids);
  p->bss->replay_nr = static_cast<uint32_t>(seq.size());
  bpf_map_info ri = {};
  uint32_t rl = sizeof(ri);
  bpf_obj_get_info_by_fd(m.ids, &ri, &rl);
  // A record takes its size and the ring's 8-byte header.
  uint32_t per_round = ri.max_entries / (sizeof(smt_count_record) + 8) * 3 / 4;

  uint64_t events_before = s.store().total_events();
  uint64_t submitted_total = 0, drained_total = 0;
  std::vector<double> rate, cpu_per_m, wall_rate, bytes_per_rec, prod_ns;
  for (int r = 0; r < rounds; ++r) {
    uint64_t sub0 = p->bss->submitted;
    p->bss->replay_count = per_round;
    double w0 = wall_s();
    run_prog(p->progs.replay);
    double w1 = wall_s();
    uint64_t sub = p->bss->submitted - sub0;
    submitted_total += sub;
    bytes_per_rec.push_back(double(p->bss->prod_pos_after - p->bss->prod_pos_before) / sub);
    prod_ns.push_back((w1 - w0) * 1e9 / sub);
    double c0 = thread_cpu_s(), t0 = wall_s();
    size_t n = s.drain(0);
    double c1 = thread_cpu_s(), t1 = wall_s();
    drained_total += n;
    rate.push_back(n / (c1 - c0));
    wall_rate.push_back(n / (t1 - t0));
    cpu_per_m.push_back((c1 - c0) / n * 1e6);
  }
  uint64_t counted = s.store().total_events() - events_before;
  auto st = s.stats();
  std::printf(
      "{\"unique_stacks_in_table\": %zu, \"replay_ids\": %zu, \"ids_per_round\": %u, "
      "\"submitted\": %llu, \"failed\": %llu, \"drained\": %llu, \"counted_by_store\": %llu, "
      "\"bad_records\": %llu, \"stale_records\": %llu, \"drain_ids_per_cpu_s\": %s, "
      "\"drain_ids_per_wall_s\": %s, "
      "\"cpu_s_per_million\": %s, \"ring_bytes_per_record\": %s, \"producer_ns_per_record\": %s}\n",
      stacks.size(), seq.size(), per_round, (unsigned long long)submitted_total,
      (unsigned long long)p->bss->failed, (unsigned long long)drained_total,
      (unsigned long long)counted, (unsigned long long)st.bad_records,
      (unsigned long long)st.stale_records, json_list(rate).c_str(), json_list(wall_rate).c_str(),
      json_list(cpu_per_m).c_str(), json_list(bytes_per_rec).c_str(), json_list(prod_ns).c_str());
  synth_producer__destroy(p);
  return 0;
}

int cmd_rss(int cpu, uint32_t stacks, uint32_t bits, uint32_t depth) {
  pin(cpu);
  auto rss0 = rss_kb();
  stackmapd::SessionConfig cfg;
  // A tracepoint that does not fire while this runs: the session loads its
  // tracepoint program (through which the maps are found), and only
  // synthetic stacks arrive.
  cfg.events.push_back({"syscalls", "sys_enter_reboot"});
  cfg.bits = bits;
  BpfSession s(cfg);
  DaemonMaps m = find_daemon_maps(s.ring_fd());
  synth_producer* p = load_producer(s, m, depth);
  auto rss1 = rss_kb();
  std::map<int, uint32_t> status;
  double drain_cpu = 0;
  for (uint32_t i = 0; i < stacks; ++i) {
    int ret = run_prog(p->progs.insert_synthetic);
    ++status[ret == 0 ? 0 : 100 + (int)p->bss->synth_status];
    if ((i & 0xffff) == 0xffff) {
      double c0 = thread_cpu_s();
      s.drain(0);
      drain_cpu += thread_cpu_s() - c0;
    }
  }
  double c0 = thread_cpu_s();
  s.drain(0);
  drain_cpu += thread_cpu_s() - c0;
  auto rss2 = rss_kb();
  auto st = s.stats();
  std::ostringstream statuses;
  for (auto& [k, v] : status)
    statuses << (statuses.tellp() ? ", " : "") << "\"" << k << "\": " << v;
  std::printf(
      "{\"stacks_requested\": %u, \"bits\": %u, \"depth\": %u, \"store_stacks\": %zu, "
      "\"table_entries\": %u, \"bad_records\": %llu, \"insert_results\": {%s}, "
      "\"rss_kb_start\": %ld, \"rss_kb_session\": %ld, \"rss_kb\": %ld, \"rss_anon_kb\": %ld, "
      "\"rss_file_kb\": %ld, \"rss_shmem_kb\": %ld, \"hwm_kb\": %ld, "
      "\"memlock_slots\": %ld, \"memlock_pool\": %ld, \"memlock_ring\": %ld, "
      "\"drain_cpu_ns_per_new_stack\": %.1f}\n",
      stacks, bits, depth, s.store().size(), st.entries, (unsigned long long)st.bad_records,
      statuses.str().c_str(), rss0["VmRSS"], rss1["VmRSS"], rss2["VmRSS"], rss2["RssAnon"],
      rss2["RssFile"], rss2["RssShmem"], rss2["VmHWM"], memlock_of(m.slots), memlock_of(m.pool),
      memlock_of(m.ids), drain_cpu * 1e9 / std::max<size_t>(1, s.store().size()));
  synth_producer__destroy(p);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: drain_bench drain [--cpu N] [--rounds R] [--file PATH]\n"
                 "       drain_bench rss --stacks N [--bits B] [--depth D] [--cpu N]\n");
    return 2;
  }
  std::string mode = argv[1];
  int cpu = 0, rounds = 5;
  uint32_t stacks = 1024, bits = 14, depth = 8;
  std::string file = "/dev/shm/stackmapd-bench";
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--cpu") cpu = atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = atoi(argv[i + 1]);
    else if (a == "--file") file = argv[i + 1];
    else if (a == "--stacks") stacks = static_cast<uint32_t>(atol(argv[i + 1]));
    else if (a == "--bits") bits = static_cast<uint32_t>(atol(argv[i + 1]));
    else if (a == "--depth") depth = static_cast<uint32_t>(atol(argv[i + 1]));
    else {
      std::fprintf(stderr, "drain_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    if (mode == "drain") return cmd_drain(cpu, rounds, file);
    if (mode == "rss") return cmd_rss(cpu, stacks, bits, depth);
    std::fprintf(stderr, "drain_bench: unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "drain_bench: %s\n", e.what());
    return 1;
  }
}

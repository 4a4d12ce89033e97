// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/unwind_maps.h"

#include <bpf/bpf.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include <numeric>

namespace stackmapd {

bool UnwindMaps::write_rows(uint32_t first, const std::vector<smt_unwind_row>& rows) {
  // One batch, not one syscall a row: libc's 28 k rows, libLLVM's 837 k.
  std::vector<uint32_t> keys(rows.size());
  std::iota(keys.begin(), keys.end(), first);
  auto count = static_cast<uint32_t>(rows.size());
  return rows.empty() ||
         bpf_map_update_batch(fds_.rows, keys.data(), rows.data(), &count, nullptr) == 0;
}

bool UnwindMaps::write_file(const smt_unwind_file_key& key, const smt_unwind_file& f) {
  return bpf_map_update_elem(fds_.files, &key, &f, BPF_ANY) == 0;
}

uint64_t UnwindMaps::file_used(const smt_unwind_file_key& key) const {
  smt_unwind_file f{};
  return bpf_map_lookup_elem(fds_.files, &key, &f) == 0 ? f.used : 0;
}

void UnwindMaps::forget_file(const smt_unwind_file_key& key) {
  bpf_map_delete_elem(fds_.files, &key);
  bpf_map_delete_elem(fds_.asked, &key);
}

void UnwindMaps::wait_for_walks() {
  // BPF programs run inside RCU read-side sections; this is synchronize_rcu().
  // Where it is refused (nohz_full CPUs), a walk takes microseconds: wait longer.
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) usleep(20000);
}

std::optional<smt_unwind_process> UnwindMaps::read_process(uint32_t pid) const {
  smt_unwind_process p{};
  if (bpf_map_lookup_elem(fds_.procs, &pid, &p) != 0) return std::nullopt;
  return p;
}

bool UnwindMaps::write_process(uint32_t pid, const smt_unwind_process& p) {
  return bpf_map_update_elem(fds_.procs, &pid, &p, BPF_ANY) == 0;
}

uint64_t unwind_clock_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // bpf_ktime_get_ns()'s
  return (static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec)) >> 30;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/cpu_batches.h"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

size_t mapped_bytes(uint32_t count) {
  const long page = sysconf(_SC_PAGESIZE);
  const size_t bytes = sizeof(smt_batch) * count;
  return (bytes + page - 1) / page * page;
}

// The seqlock's reader side (the writer: bpf/stackmapd.bpf.c,
// batch_write_begin/end). The copy races with the writer by design and is
// kept only when seq did not move around it.
bool try_copy(const smt_batch* src, smt_batch& out) {
  const uint32_t before = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
  if (before & 1) return false;
  std::memcpy(&out, src, sizeof(out));
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&src->seq, __ATOMIC_RELAXED) == before;
}

}  // namespace

CpuBatches::CpuBatches(int fd, uint32_t count)
    : map_(fd, mapped_bytes(count), PROT_READ | PROT_WRITE, 0,
           "BPF map batches (the kernel must support mmapable BPF arrays, 5.5+)"),
      count_(count) {}

smt_batch* CpuBatches::at(uint32_t i) const { return map_.as<smt_batch>() + i; }

std::vector<smt_batch> CpuBatches::read() const {
  std::vector<smt_batch> out(count_);
  for (uint32_t i = 0; i < count_; ++i) {
    // A window lasts ~100 ns: seconds mean the map is not what we think.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!try_copy(at(i), out[i]))
      if (std::chrono::steady_clock::now() > deadline)
        throw Error("batch " + std::to_string(i) +
                    " stayed mid-write for 2 s: the pinned maps are of another build; reload "
                    "stackmapd.o");
  }
  return out;
}

std::vector<smt_cpu_counters> CpuBatches::counters() const {
  std::vector<smt_cpu_counters> out;
  out.reserve(count_);
  for (const smt_batch& b : read()) out.push_back(b.counters);
  return out;
}

void CpuBatches::clear() { std::memset(map_.get(), 0, sizeof(smt_batch) * count_); }

void CpuBatches::forget_names() {
  for (uint32_t i = 0; i < count_; ++i) __atomic_store_n(&at(i)->last_name, 0, __ATOMIC_RELAXED);
}

}  // namespace stackmapd

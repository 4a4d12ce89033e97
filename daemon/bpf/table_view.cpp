// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/table_view.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

#define SMT_TABLE_READER_ONLY
#include "stackmapd/stack_table.h"

namespace stackmapd {

namespace {

// A whole BPF array (BPF_F_MMAPABLE) mapped into memory.
Mapping map_array(int fd, int prot, const std::string& what) {
  bpf_map_info info = {};
  uint32_t info_len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &info_len) != 0)
    throw Error("cannot inspect BPF map " + what + ": " + std::strerror(errno));
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = static_cast<size_t>(info.value_size) * info.max_entries;
  return Mapping(fd, (bytes + page - 1) / page * page, prot, 0,
                 "BPF map " + what + " (the kernel must support mmapable BPF arrays, 5.5+)");
}

}  // namespace

TableView::TableView(const BpfObject& object)
    : bits_(object.bits()),
      globals_(object.globals()),
      slots_(map_array(object.slots_fd(), PROT_READ | PROT_WRITE, "slots")),
      pool_(object.pool_fd(), 1u << bits_, PROT_READ | PROT_WRITE, "pool") {}

// SMT_NO_KERNEL_STACK's stack: always there, empty.
constexpr smt_elt kNoKernelFrames = {};

const smt_elt* TableView::published_elt(uint32_t id) const {
  if (id == SMT_NO_KERNEL_STACK) return &kNoKernelFrames;
  return pool_.published_elt(slots_.as<const smt_slot>(), bits_, shared().next_elt, id);
}

uint32_t TableView::find(const std::vector<uint64_t>& ips) const {
  if (ips.empty() || ips.size() > SMT_MAX_DEPTH) return SMT_NO_STACK_ID;
  pool_.reveal_handed_out(shared().next_elt);
  return smt_find_published(slots_.as<const smt_slot>(), pool_.base(), bits_, pool_.visible(),
                            shared().hash_seed, reinterpret_cast<const __u64*>(ips.data()),
                            static_cast<__u32>(ips.size()));
}

void TableView::add_ref(uint32_t id, uint64_t n) const {
  if (id == SMT_NO_KERNEL_STACK) {
    book().no_kernel_refs += n;
    return;
  }
  // No BPF program writes a published element: a relaxed add is ours alone.
  if (const smt_elt* e = published_elt(id))
    __atomic_fetch_add(&const_cast<smt_elt*>(e)->ref_count, n, __ATOMIC_RELAXED);
}

StackRecord TableView::stack(uint32_t id) const {
  StackRecord r;
  r.stack_id = id;
  const smt_elt* e = published_elt(id);
  if (!e) return r;
  r.ref_count = id == SMT_NO_KERNEL_STACK ? book().no_kernel_refs
                                          : __atomic_load_n(&e->ref_count, __ATOMIC_RELAXED);
  r.ips.assign(e->ips, e->ips + e->nr);
  return r;
}

std::vector<StackRecord> TableView::stacks() const {
  std::vector<StackRecord> out;
  for (uint32_t id = 0; id < table_size(); ++id) {
    StackRecord r = stack(id);
    if (!r.ips.empty()) out.push_back(std::move(r));
  }
  if (book().no_kernel_refs) out.push_back(stack(SMT_NO_KERNEL_STACK));
  return out;
}

std::array<uint64_t, SMC_NR> TableView::sum_counters(const std::vector<smt_cpu_counters>& counters,
                                                     uint32_t parity) {
  std::array<uint64_t, SMC_NR> sum{};
  for (const auto& c : counters)
    for (int i = 0; i < SMC_NR; ++i) sum[i] += c.epoch[parity][i];
  return sum;
}

TableStats TableView::stats_of(const std::vector<smt_cpu_counters>& counters,
                               uint32_t parity) const {
  TableStats s;
  for (const auto& c : counters) {
    s.events_total += c.events;
    s.ring_bytes += c.ring_bytes;
    for (int i = 0; i < SMC_NR; ++i) s.counters[i] += c.epoch[parity][i];
  }
  for (int i = 0; i < SMC_NR; ++i) s.counters[i] -= book().baseline[parity][i];
  uint32_t handed_out = __atomic_load_n(&shared().next_elt, __ATOMIC_RELAXED);
  s.pool_size = pool_size();
  s.table_size = table_size();
  s.entries = handed_out < s.pool_size ? handed_out : s.pool_size;
  s.resets = book().resets;
  s.past_events = book().past_events;
  return s;
}

void TableView::clear() {
  std::memset(slots_.get(), 0, static_cast<size_t>(table_size()) * sizeof(smt_slot));
  book().no_kernel_refs = 0;
  __atomic_store_n(&shared().next_elt, 0, __ATOMIC_SEQ_CST);
}

}  // namespace stackmapd

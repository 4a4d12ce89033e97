// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/user_table.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

#define SMT_TABLE_READER_ONLY
#include "stackmapd/stack_table.h"

namespace stackmapd {

namespace {

Mapping map_whole(int fd, size_t bytes, int prot, const char* what) {
  const long page = sysconf(_SC_PAGESIZE);
  return Mapping(fd, (bytes + page - 1) / page * page, prot, 0,
                 std::string("BPF map ") + what + " (the user stack table)");
}

}  // namespace

UserTable::UserTable(const BpfObject& object)
    : enabled_(object.user_stacks()),
      bits_(object.bits()),
      shared_(&object.globals()->user_shared) {
  if (!enabled_) return;
  slots_ = map_whole(object.uslots_fd(), sizeof(smt_slot) * table_size(), PROT_READ | PROT_WRITE,
                     "uslots");
  pool_ = PoolWindow(object.upool_fd(), 1u << bits_, PROT_READ, "upool (the user stack table)");
}

std::optional<UserStackIps> UserTable::stack(uint32_t id) const {
  if (!enabled_) return std::nullopt;
  const smt_elt* e = pool_.published_elt(slots_.as<const smt_slot>(), bits_, shared_->next_elt, id);
  // Every stored user stack ends in its marker (abi.h).
  if (!e || !SMT_IS_USER_MARKER(e->ips[e->nr - 1])) return std::nullopt;
  UserStackIps s;
  s.pid = SMT_USER_MARKER_TGID(e->ips[e->nr - 1]);
  s.exec_id = SMT_USER_MARKER_EXEC(e->ips[e->nr - 1]);
  s.ips.assign(e->ips, e->ips + e->nr - 1);
  return s;
}

void UserTable::clear(uint32_t seed) const {
  if (!enabled_) return;
  std::memset(slots_.get(), 0, sizeof(smt_slot) * table_size());
  *shared_ = smt_shared{};
  __atomic_store_n(&shared_->hash_seed, seed, __ATOMIC_SEQ_CST);
}

// The writers' probe order from the element's hash (stack_table.h).
uint32_t UserTable::slot_of(uint32_t elt) const {
  pool_.reveal_handed_out(shared_->next_elt);
  if (elt >= pool_.visible()) return SMT_NO_STACK_ID;
  const uint32_t key = __atomic_load_n(&pool_.base()[elt].hash, __ATOMIC_RELAXED);
  const auto* slots = slots_.as<const smt_slot>();
  const uint32_t home = key >> (32 - (bits_ + 1));
  for (uint32_t i = 0; i < SMT_MAX_PROBES; ++i) {
    const uint32_t id = (home + i) & (table_size() - 1);
    if (__atomic_load_n(&slots[id].elt, __ATOMIC_ACQUIRE) == elt + 1)
      return pool_.published_elt(slots, bits_, shared_->next_elt, id) ? id : SMT_NO_STACK_ID;
  }
  return SMT_NO_STACK_ID;
}

uint32_t UserTable::entries() const {
  const uint32_t n = __atomic_load_n(&shared_->next_elt, __ATOMIC_RELAXED);
  return n < (1u << bits_) ? n : 1u << bits_;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// A stack pool (the BPF array of smt_elt) mapped only as far as it has been
// handed out. An mmapable BPF array maps every page of the range it is asked
// for at once (remap_vmalloc_range), so mapping the whole pool made all of it
// resident in the daemon: 8.4 MB at --bits 14 for a table holding a few
// hundred stacks. The window reserves the pool's address range and maps the
// array into it in chunks as elements are handed out, so element addresses
// never move and readers keep plain pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/sys/mapping.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class PoolWindow {
 public:
  PoolWindow() = default;
  // Reserves room for `elements` elements of the array `fd`; maps nothing yet.
  PoolWindow(int fd, uint32_t elements, int prot, std::string what);  // throws Error

  const smt_elt* base() const { return static_cast<const smt_elt*>(reserved_.get()); }
  smt_elt* base_mut() const { return static_cast<smt_elt*>(reserved_.get()); }
  // Elements [0, visible()) are mapped and readable.
  uint32_t visible() const { return visible_; }
  // Maps at least the first `elements` (clamped to the pool); throws Error.
  void reveal(uint32_t elements);
  // Maps every element handed out so far (`next_elt`: the table's smt_shared).
  void reveal_handed_out(const uint32_t& next_elt) {
    reveal(__atomic_load_n(&next_elt, __ATOMIC_ACQUIRE));
  }
  // stack_table.h's smt_published_elt over this window, mapping the elements
  // handed out since the window last grew when slot `id` publishes one of them.
  const smt_elt* published_elt(const smt_slot* slots, uint32_t bits, const uint32_t& next_elt,
                               uint32_t id);

 private:
  int fd_ = -1;
  uint32_t elements_ = 0;
  int prot_ = 0;
  std::string what_;
  Mapping reserved_;   // the whole range: the array's pages up to mapped_, PROT_NONE after
  size_t mapped_ = 0;  // bytes, a multiple of the page size
  uint32_t visible_ = 0;
};

}  // namespace stackmapd

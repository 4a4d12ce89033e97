// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/pool_window.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

#define SMT_TABLE_READER_ONLY
#include "stackmapd/stack_table.h"

namespace stackmapd {

namespace {

// Mapped 64 KiB at a time: ~124 stacks per mmap call, and at most that much
// more resident than the table uses.
constexpr size_t kChunk = size_t{64} << 10;

size_t page_round(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

PoolWindow::PoolWindow(int fd, uint32_t elements, int prot, std::string what)
    : fd_(fd),
      elements_(elements),
      prot_(prot),
      what_(std::move(what)),
      reserved_(Mapping::reserve(page_round(sizeof(smt_elt) * elements), what_)) {}

void PoolWindow::reveal(uint32_t elements) {
  elements = std::min(elements, elements_);
  if (elements <= visible_) return;
  const size_t want =
      std::min(reserved_.size(), (sizeof(smt_elt) * elements + kChunk - 1) / kChunk * kChunk);
  // Over the reservation: the array's next pages, at their own offset in it.
  void* at = static_cast<char*>(reserved_.get()) + mapped_;
  if (mmap(at, want - mapped_, prot_, MAP_SHARED | MAP_FIXED, fd_, static_cast<off_t>(mapped_)) ==
      MAP_FAILED)
    throw Error("cannot mmap BPF map " + what_ +
                " (the kernel must support mmapable BPF arrays, 5.5+): " + std::strerror(errno));
  mapped_ = want;
  visible_ = static_cast<uint32_t>(std::min<size_t>(elements_, want / sizeof(smt_elt)));
}

const smt_elt* PoolWindow::published_elt(const smt_slot* slots, uint32_t bits,
                                         const uint32_t& next_elt, uint32_t id) {
  const smt_elt* e = smt_published_elt(slots, base(), bits, visible_, id);
  if (e || visible_ == elements_) return e;
  // A slot publishes an element only after taking it from next_elt, so this
  // maps any element the slot can hold.
  reveal_handed_out(next_elt);
  return smt_published_elt(slots, base(), bits, visible_, id);
}

}  // namespace stackmapd

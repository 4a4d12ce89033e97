// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/ring_consumer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

long page_size() { return sysconf(_SC_PAGESIZE); }

uint64_t load_pos(const Mapping& page) {
  return __atomic_load_n(page.as<const unsigned long>(), __ATOMIC_SEQ_CST);
}

}  // namespace

RingConsumer::RingConsumer(int ring_fd, const TableView& table, StackStore& store)
    : table_(table),
      store_(store),
      consumer_page_(ring_fd, page_size(), PROT_READ, 0,
                     "the BPF ring buffer's consumer page (the kernel must be 5.8+)"),
      producer_page_(ring_fd, page_size(), PROT_READ, page_size(),
                     "the BPF ring buffer's producer page (the kernel must be 5.8+)"),
      ring_(ring_buffer__new(ring_fd, on_record, this, nullptr)) {
  if (!ring_)
    throw Error("cannot set up the ring-buffer consumer: " + std::string(std::strerror(errno)));
}

uint64_t RingConsumer::consumer_pos() const { return load_pos(consumer_page_); }
uint64_t RingConsumer::producer_pos() const { return load_pos(producer_page_); }
int RingConsumer::wakeup_fd() const { return ring_buffer__epoll_fd(ring_.get()); }

// The consumer's hot path: one array increment for a known id.
void RingConsumer::count_id(uint32_t id, uint32_t epoch) {
  if (epoch != epoch_) {
    ++stale_records_;
    return;
  }
  if (store_.count(id, EventKey{}, 1)) return;
  // First sight of this id: the table published it before the id was
  // submitted, so its frames are there to copy, once.
  const smt_elt* e = table_.published_elt(id);
  if (!e) {
    ++bad_records_;
    return;
  }
  store_.insert(id, std::vector<uint64_t>(e->ips, e->ips + e->nr), EventKey{}, 1);
}

void RingConsumer::check_sample(const smt_verify_record& v) {
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

int RingConsumer::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingConsumer*>(ctx);
  if (self->discarding_) return 0;
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

size_t RingConsumer::drain(int timeout_ms) {
  uint64_t before = consumed_;
  // poll() consumes only after a wakeup; the BPF side rarely sends one (it
  // submits without waking), so consume() after every timeout as well.
  int n = ring_buffer__poll(ring_.get(), timeout_ms);
  if (n < 0 && n != -EINTR)
    throw Error("ring buffer poll failed: " + std::string(std::strerror(-n)));
  if (n > 0) consumed_ += n;
  n = ring_buffer__consume(ring_.get());
  if (n < 0 && n != -EINTR)
    throw Error("ring buffer consume failed: " + std::string(std::strerror(-n)));
  if (n > 0) consumed_ += n;
  return consumed_ - before;
}

void RingConsumer::discard_pending() {
  discarding_ = true;
  try {
    drain(0);
  } catch (...) {
    discarding_ = false;
    throw;
  }
  discarding_ = false;
}

void RingConsumer::add_counts(TableStats& s) const {
  s.verify_ok += verify_ok_;
  s.verify_mismatch += verify_mismatch_;
  s.stale_records += stale_records_;
  s.bad_records += bad_records_;
}

}  // namespace stackmapd

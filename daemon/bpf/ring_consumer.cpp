// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/ring_consumer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

long page_size() { return sysconf(_SC_PAGESIZE); }

uint64_t load_pos(const Mapping& page) {
  return __atomic_load_n(page.as<const unsigned long>(), __ATOMIC_SEQ_CST);
}

template <typename T>
T record_at(const void* data) {
  T r;
  std::memcpy(&r, data, sizeof(r));
  return r;
}

}  // namespace

size_t RingConsumer::FramesHash::operator()(const std::vector<uint64_t>& f) const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t ip : f) h = (h ^ ip) * 0x100000001b3ull;
  return h;
}

RingConsumer::RingConsumer(int ring_fd, const TableView& table, StackStore& store,
                           Resolver& resolver, uint32_t batch_count, bool trace_records)
    : table_(table),
      store_(store),
      resolver_(resolver),
      consumer_page_(ring_fd, page_size(), PROT_READ, 0,
                     "the BPF ring buffer's consumer page (the kernel must be 5.8+)"),
      producer_page_(ring_fd, page_size(), PROT_READ, page_size(),
                     "the BPF ring buffer's producer page (the kernel must be 5.8+)"),
      ring_(ring_buffer__new(ring_fd, on_record, this, nullptr)),
      trace_records_(trace_records),
      seen_(batch_count, 0),
      cursors_(trace_records ? batch_count : 0) {
  if (!ring_)
    throw Error("cannot set up the ring-buffer consumer: " + std::string(std::strerror(errno)));
}

uint64_t RingConsumer::consumer_pos() const { return load_pos(consumer_page_); }
uint64_t RingConsumer::producer_pos() const { return load_pos(producer_page_); }
int RingConsumer::wakeup_fd() const { return ring_buffer__epoll_fd(ring_.get()); }

// The consumer's hot path: one array access and a pair lookup for a known id.
bool RingConsumer::count_event(const smt_event_record& e, uint64_t n) {
  if (e.epoch != epoch_) {
    ++stale_records_;
    return false;
  }
  const EventKey key = resolver_.key_of(e, n);
  if (!store_.count(e.stack_id, key, e.weight, n)) {
    // First sight of this id: the table published it before the id was
    // submitted, so its frames are there to copy, once.
    const smt_elt* elt = table_.published_elt(e.stack_id);
    if (!elt) {
      ++bad_records_;
      return false;
    }
    store_.insert(e.stack_id, std::vector<uint64_t>(elt->ips, elt->ips + elt->nr), key, e.weight,
                  n);
  }
  table_.add_ref(e.stack_id, n);
  return true;
}

// A batch's records arrive in its order: once its limit is seen, the rest
// come after the copy the snapshot holds.
bool RingConsumer::held(const void* data, size_t size, uint32_t seq) {
  const uint32_t batch = SMT_SEQ_BATCH(seq);
  if (batch >= seen_.size()) return false;
  if (!limit_.empty() && seen_[batch] == limit_[batch]) {
    const char* bytes = static_cast<const char*>(data);
    held_.emplace_back(bytes, bytes + size);
    return true;
  }
  seen_[batch] = seq & kSeqMask;
  return false;
}

void RingConsumer::check_sample(const smt_stack_record& v) {
  const uint32_t id = v.counts.event.stack_id;
  const smt_elt* stored = table_.published_elt(id);
  const bool same = stored && v.nr == stored->nr && std::equal(v.ips, v.ips + v.nr, stored->ips);
  if (same) {
    ++verify_ok_;
    return;
  }
  if (++verify_mismatch_ <= 10)
    spdlog::warn("verify: stack_id {} holds a different stack than the event captured", id);
}

void RingConsumer::on_count(const smt_count_record& c) { count_event(c.event, c.count); }

void RingConsumer::on_stack(const smt_stack_record& r) {
  if (r.counts.event.epoch != epoch_) {
    ++stale_records_;
    return;
  }
  if (r.counts.count == 0) {
    check_sample(r);
    return;
  }
  const uint32_t id = count_whole(r);
  // --trace: the event's trace entry comes after, naming this record.
  if (trace_records_)
    whole_ids_[uint64_t{SMT_SEQ_BATCH(r.counts.seq)} << 32 | (r.counts.seq & kSeqMask)] = id;
}

uint32_t RingConsumer::count_whole(const smt_stack_record& r) {
  std::vector<uint64_t> frames(r.ips, r.ips + std::min<uint32_t>(r.nr, SMT_MAX_DEPTH));
  // A stack whose slot was still being written is in the table by now: one
  // stack keeps one id.
  smt_event_record e = r.counts.event;
  e.stack_id = table_.find(frames);
  if (e.stack_id != SMT_NO_STACK_ID)
    return count_event(e, r.counts.count) ? e.stack_id : SMT_NO_STACK_ID;
  const EventKey key = resolver_.key_of(r.counts.event, r.counts.count);
  auto it = overflow_ids_.find(frames);
  if (it == overflow_ids_.end()) {
    if (overflow_ids_.size() >= kOverflowStacks) {
      overflow_lost_ += r.counts.count;
      return SMT_NO_STACK_ID;
    }
    const uint32_t id = table_.table_size() + static_cast<uint32_t>(overflow_ids_.size());
    overflow_ids_.emplace(frames, id);
    store_.insert(id, std::move(frames), key, r.counts.event.weight, r.counts.count);
    return id;
  }
  store_.count(it->second, key, r.counts.event.weight, r.counts.count);
  return it->second;
}

int RingConsumer::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingConsumer*>(ctx);
  const uint32_t kind = smt_record_kind(data, size);
  if (kind == SMT_RECORD_COUNT && !self->trace_records_) {
    const auto c = record_at<smt_count_record>(data);
    if (!self->held(data, size, c.seq)) self->on_count(c);
  } else if (kind == SMT_RECORD_NAME) {
    const auto n = record_at<smt_name_record>(data);
    self->resolver_.name(n.name, std::string_view(n.comm, strnlen(n.comm, sizeof(n.comm))));
  } else if (kind == SMT_RECORD_STACK) {
    const auto r = record_at<smt_stack_record>(data);
    if (r.counts.count == 0 || !self->held(data, size, r.counts.seq)) self->on_stack(r);
  } else if (kind == SMT_RECORD_TRACE && self->trace_records_) {
    self->on_trace_buf(data, size);
  } else if (kind == SMT_RECORD_EVENT && self->trace_records_) {
    self->count_event(record_at<smt_event_record>(data), 1);  // an --offcpu block
  } else {
    ++self->bad_records_;
  }
  return 0;
}

void RingConsumer::hold_after(const std::vector<smt_batch>& batches) {
  limit_.assign(seen_.size(), 0);
  for (size_t i = 0; i < batches.size() && i < limit_.size(); ++i)
    limit_[i] = (trace_records_ ? batches[i].trace.seq : batches[i].sent) & kSeqMask;
}

void RingConsumer::release() {
  limit_.clear();
  std::vector<std::vector<char>> held;
  held.swap(held_);
  for (auto& r : held) on_record(this, r.data(), r.size());
}

bool RingConsumer::caught_up(const std::vector<smt_batch>& batches) const {
  if (trace_records_) {  // the names: read_in_place()
    for (size_t i = 0; i < batches.size() && i < cursors_.size(); ++i)
      if ((batches[i].trace.seq & kSeqMask) != cursors_[i].n) return false;
    return true;
  }
  for (size_t i = 0; i < batches.size() && i < seen_.size(); ++i) {
    if ((batches[i].sent & kSeqMask) != seen_[i]) return false;
    for (const smt_batch_entry& e : batches[i].entries)
      if (e.count && e.event.epoch == epoch_ && e.event.name && !resolver_.knows_name(e.event.name))
        return false;
  }
  return true;
}

std::vector<PendingCount> RingConsumer::pending(const std::vector<smt_batch>& batches) {
  std::vector<PendingCount> out;
  if (trace_records_) return out;  // read in place, counted in the store
  for (const smt_batch& b : batches)
    for (const smt_batch_entry& e : b.entries)
      if (e.count && e.event.epoch == epoch_)
        out.push_back(
            {e.event.stack_id, resolver_.key_of(e.event, e.count), e.event.weight, e.count});
  return out;
}

void RingConsumer::absorb(const std::vector<smt_batch>& batches) {
  if (trace_records_) {
    read_in_place(batches, 0);
    flush_traces(true);
    cursors_.assign(cursors_.size(), TraceCursor{});  // the caller empties the buffers
    return;
  }
  for (const smt_batch& b : batches)
    for (const smt_batch_entry& e : b.entries)
      if (e.count && e.event.epoch == epoch_) count_event(e.event, e.count);
}

void RingConsumer::sync(const std::vector<smt_batch>& batches) {
  for (size_t i = 0; i < batches.size() && i < seen_.size(); ++i)
    seen_[i] = batches[i].sent & kSeqMask;
  // Its open buffers are read from their start: empty after a clean stop
  // (detach() absorbs them); after a crash, what the daemon before read of
  // them in place counts again.
  for (size_t i = 0; i < batches.size() && i < cursors_.size(); ++i)
    cursors_[i] = TraceCursor{batches[i].trace.seq & kSeqMask};
}

void RingConsumer::close_blocks(const std::vector<smt_event_record>& blocks,
                                const std::vector<bool>& inserted) {
  for (size_t i = 0; i < blocks.size(); ++i)
    if (count_event(blocks[i], 1)) {
      ++open_blocks_;
      if (inserted[i]) ++open_inserts_;
    }
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

void RingConsumer::add_counts(TableStats& s) const {
  s.verify_ok += verify_ok_;
  s.verify_mismatch += verify_mismatch_;
  s.stale_records += stale_records_;
  s.bad_records += bad_records_;
  // Blocks closed here count as the BPF side counts the ones it closes.
  s.counters[SMC_HITS] += open_blocks_;
  s.counters[SMC_INSERTS] += open_inserts_;
  s.offcpu_open += open_blocks_;
  s.events_total += open_blocks_;
  s.overflow_stacks += overflow_ids_.size();
  s.overflow_lost += overflow_lost_;
}

}  // namespace stackmapd

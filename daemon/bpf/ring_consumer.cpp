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

constexpr uint32_t kSeqMask = (1u << SMT_SEQ_BITS) - 1;

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
                           uint32_t batch_count, bool trace_records,
                           UserStackCollector* user_stacks)
    : table_(table),
      store_(store),
      user_(user_stacks),
      consumer_page_(ring_fd, page_size(), PROT_READ, 0,
                     "the BPF ring buffer's consumer page (the kernel must be 5.8+)"),
      producer_page_(ring_fd, page_size(), PROT_READ, page_size(),
                     "the BPF ring buffer's producer page (the kernel must be 5.8+)"),
      ring_(ring_buffer__new(ring_fd, on_record, this, nullptr)),
      trace_records_(trace_records),
      unnamed_(store.strings().intern("[unnamed]")),
      needs_comm_(store.keys().has(KeyField::comm)),
      needs_cgroup_(store.keys().has(KeyField::cgroup)),
      needs_unit_(store.keys().has(KeyField::unit)),
      seen_(batch_count, 0),
      cursors_(trace_records ? batch_count : 0) {
  if (needs_cgroup_ || needs_unit_) cgroups_.emplace();
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
  const EventKey key = key_of(e);
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

EventKey RingConsumer::key_of(const smt_event_record& e) {
  EventKey k;
  k.pid = e.tgid;
  k.tid = e.tid;
  k.source = e.source;
  k.cpu = e.cpu;
  if (user_) {
    k.ustack = e.user_stack_id;
    user_->see(e.user_stack_id);
  }
  if (needs_comm_) {
    // Runs of one thread's events are the common case: no lookup for them.
    if (e.name != last_name_.first || !last_name_.second) {
      auto it = names_.find(e.name);
      last_name_ = {e.name, it == names_.end() ? unnamed_ : it->second};
    }
    k.comm = last_name_.second;
  }
  if (needs_cgroup_) k.cgroup = cgroup_string(e.cgroup_id, false);
  if (needs_unit_) k.unit = cgroup_string(e.cgroup_id, true);
  return k;
}

// Cgroups are named when first seen: by the end of the session one that
// was removed meanwhile could no longer be.
uint32_t RingConsumer::cgroup_string(uint64_t id, bool unit) {
  if (id == last_cgroup_.first && last_cgroup_.second)
    return unit ? last_cgroup_.second->second : last_cgroup_.second->first;
  auto it = cgroup_strings_.find(id);
  if (it != cgroup_strings_.end()) {
    last_cgroup_ = {id, &it->second};  // node-based: stays valid as the map grows
    return unit ? it->second.second : it->second.first;
  }
  const std::string path = cgroups_->path(id);
  StringTable& strings = store_.strings();
  const std::pair<uint32_t, uint32_t> ids(strings.intern(path),
                                          strings.intern(unit_of_cgroup(path)));
  // A cgroup made since the last walk is named for good by a later one.
  if (!cgroups_->provisional(id)) cgroup_strings_.emplace(id, ids);
  return unit ? ids.second : ids.first;
}

const std::string& RingConsumer::comm_of(uint32_t name) const {
  auto it = names_.find(name);
  return store_.strings().str(it == names_.end() ? unnamed_ : it->second);
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
  std::vector<uint64_t> frames(r.ips, r.ips + std::min<uint32_t>(r.nr, SMT_MAX_DEPTH));
  // A stack whose slot was still being written is in the table by now: one
  // stack keeps one id.
  smt_event_record e = r.counts.event;
  e.stack_id = table_.find(frames);
  if (e.stack_id != SMT_NO_STACK_ID) {
    count_event(e, r.counts.count);
    return;
  }
  auto it = overflow_ids_.find(frames);
  if (it == overflow_ids_.end()) {
    if (overflow_ids_.size() >= kOverflowStacks) {
      overflow_lost_ += r.counts.count;
      return;
    }
    const uint32_t id = table_.table_size() + static_cast<uint32_t>(overflow_ids_.size());
    it = overflow_ids_.emplace(frames, id).first;
    store_.insert(id, std::move(frames), key_of(r.counts.event), r.counts.event.weight,
                  r.counts.count);
    return;
  }
  store_.count(it->second, key_of(r.counts.event), r.counts.event.weight, r.counts.count);
}

int RingConsumer::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingConsumer*>(ctx);
  const uint32_t kind = smt_record_kind(data, size);
  if (kind == SMT_RECORD_COUNT && !self->trace_records_) {
    const auto c = record_at<smt_count_record>(data);
    if (!self->held(data, size, c.seq)) self->on_count(c);
  } else if (kind == SMT_RECORD_NAME) {
    const auto n = record_at<smt_name_record>(data);
    const std::string_view comm(n.comm, strnlen(n.comm, sizeof(n.comm)));
    self->names_[n.name] = self->store_.strings().intern(comm);
    self->last_name_ = {};
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

void RingConsumer::take_trace(const smt_trace_record& r) {
  if (!count_event(r.event, 1) || !trace_sink_) return;
  traced_.push_back({r.event, r.ts_ns, static_cast<uint32_t>(trace_raw_.size()), r.raw_len});
  trace_raw_.insert(trace_raw_.end(), r.raw, r.raw + r.raw_len);
}

// A buffer sent whole: the rest of what was read of it in place.
void RingConsumer::on_trace_buf(const void* data, size_t size) {
  struct {
    uint32_t kind, seq, bytes, events;
  } head;  // smt_trace_buf's first fields; data[] is read where it is
  static_assert(sizeof(head) == SMT_TRACE_HEADER && offsetof(smt_trace_buf, data) == sizeof(head));
  std::memcpy(&head, data, sizeof(head));
  const uint32_t batch = SMT_SEQ_BATCH(head.seq), n = head.seq & kSeqMask;
  if (batch >= cursors_.size() || head.bytes > SMT_TRACE_BYTES ||
      size != SMT_TRACE_RECORD_SIZE(head.bytes)) {
    ++bad_records_;
    return;
  }
  // Sent after the copy a snapshot holds (hold_after): read with the rest.
  if (!limit_.empty() && n == limit_[batch]) {
    const char* bytes = static_cast<const char*>(data);
    held_.emplace_back(bytes, bytes + size);
    return;
  }
  TraceCursor& c = cursors_[batch];
  if (c.n != n) c = TraceCursor{n};  // a table taken over: its buffers from here on
  const char* entries = static_cast<const char*>(data) + SMT_TRACE_HEADER;
  const auto cpu = static_cast<uint16_t>(batch / SMT_MAX_NEST);
  // The ring holds each name's announcement before its events.
  const TraceRead read =
      read_trace(c, entries, head.bytes, cpu, scratch_trace_, [this](const smt_trace_record& r) {
        take_trace(r);
        return true;
      });
  if (read == TraceRead::kBad) ++bad_records_;
  // The next buffer starts with its own time; until it is read, the batch's
  // unread events are no older than this one's last.
  c = TraceCursor{(n + 1) & kSeqMask, 0, {}, c.ts};
}

bool RingConsumer::read_in_place(const std::vector<smt_batch>& batches, uint64_t read_ns) {
  bool all = true;
  // An event the copies miss began after them, so at read_ns or later,
  // unless its batch is behind: then after that batch's last event read.
  uint64_t before = read_ns;
  for (size_t i = 0; i < batches.size() && i < cursors_.size(); ++i) {
    const smt_trace_buf& t = batches[i].trace;
    TraceCursor& c = cursors_[i];
    if ((t.seq & kSeqMask) != c.n) {  // a buffer it sent is still on its way
      all = false;
      before = std::min(before, c.ts);
      continue;
    }
    if (t.bytes > SMT_TRACE_BYTES || c.offset > t.bytes) {
      ++bad_records_;
      c.offset = std::min(t.bytes, SMT_TRACE_BYTES);
      continue;
    }
    const auto cpu = static_cast<uint16_t>(i / SMT_MAX_NEST);
    const TraceRead read =
        read_trace(c, t.data, t.bytes, cpu, scratch_trace_, [this](const smt_trace_record& r) {
          // Its name's announcement may still wait in the ring. Names come
          // in runs: one lookup per run.
          if (r.event.name != known_name_) {
            if (r.event.name && !names_.count(r.event.name)) return false;
            known_name_ = r.event.name;
          }
          take_trace(r);
          return true;
        });
    if (read == TraceRead::kBad) {
      ++bad_records_;
      c.offset = t.bytes;
    }
    if (read == TraceRead::kStopped) {
      all = false;
      before = std::min(before, c.ts);
    }
  }
  if (trace_records_) emit_before_ = std::max(emit_before_, before);
  return all;
}

void RingConsumer::flush_traces(bool all) {
  if (traced_.empty()) return;
  // Each batch's events are in order already; the CPUs' are merged.
  std::stable_sort(traced_.begin(), traced_.end(),
                   [](const TracedEvent& a, const TracedEvent& b) { return a.ts_ns < b.ts_ns; });
  smt_trace_record& r = scratch_trace_;
  size_t done = 0;
  for (; done < traced_.size() && (all || traced_[done].ts_ns < emit_before_); ++done) {
    const TracedEvent& t = traced_[done];
    r.event = t.event;
    r.ts_ns = t.ts_ns;
    r.raw_len = t.raw_len;
    std::memcpy(r.raw, trace_raw_.data() + t.raw_at, t.raw_len);
    trace_sink_(r, comm_of(t.event.name));
  }
  if (done == traced_.size()) {
    traced_.clear();
    trace_raw_.clear();
    return;
  }
  // The rest wait for what may come before them, their raw bytes moved up.
  std::vector<char> raw;
  std::vector<TracedEvent> rest(traced_.begin() + done, traced_.end());
  for (TracedEvent& t : rest) {
    const uint32_t at = static_cast<uint32_t>(raw.size());
    raw.insert(raw.end(), trace_raw_.begin() + t.raw_at, trace_raw_.begin() + t.raw_at + t.raw_len);
    t.raw_at = at;
  }
  traced_.swap(rest);
  trace_raw_.swap(raw);
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
      if (e.count && e.event.epoch == epoch_ && e.event.name && !names_.count(e.event.name))
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
        out.push_back({e.event.stack_id, key_of(e.event), e.event.weight, e.count});
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

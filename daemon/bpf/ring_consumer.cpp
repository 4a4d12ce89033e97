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
      seen_(batch_count, 0) {
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
  if (size == sizeof(smt_count_record) && !self->trace_records_) {
    const auto c = record_at<smt_count_record>(data);
    if (!self->held(data, size, c.seq)) self->on_count(c);
  } else if (size == sizeof(smt_name_record)) {
    const auto n = record_at<smt_name_record>(data);
    const std::string_view comm(n.comm, strnlen(n.comm, sizeof(n.comm)));
    self->names_[n.name] = self->store_.strings().intern(comm);
    self->last_name_ = {};
  } else if (size == sizeof(smt_stack_record)) {
    const auto r = record_at<smt_stack_record>(data);
    if (r.counts.count == 0 || !self->held(data, size, r.counts.seq)) self->on_stack(r);
  } else if (self->trace_records_ && size >= SMT_TRACE_HEADER && size <= sizeof(smt_trace_record)) {
    smt_trace_record t = {};  // sent with its raw bytes only (abi.h)
    std::memcpy(&t, data, size);
    if (t.raw_len > size - SMT_TRACE_HEADER) ++self->bad_records_;
    else if (self->count_event(t.event, 1) && self->trace_sink_)
      self->trace_sink_(t, self->comm_of(t.event.name));
  } else if (size == sizeof(smt_event_record) && self->trace_records_) {
    self->count_event(record_at<smt_event_record>(data), 1);  // an --offcpu block
  } else {
    ++self->bad_records_;
  }
  return 0;
}

void RingConsumer::hold_after(const std::vector<smt_batch>& batches) {
  limit_.assign(seen_.size(), 0);
  for (size_t i = 0; i < batches.size() && i < limit_.size(); ++i)
    limit_[i] = batches[i].sent & kSeqMask;
}

void RingConsumer::release() {
  limit_.clear();
  std::vector<std::vector<char>> held;
  held.swap(held_);
  for (auto& r : held) on_record(this, r.data(), r.size());
}

bool RingConsumer::caught_up(const std::vector<smt_batch>& batches) const {
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
  for (const smt_batch& b : batches)
    for (const smt_batch_entry& e : b.entries)
      if (e.count && e.event.epoch == epoch_)
        out.push_back({e.event.stack_id, key_of(e.event), e.event.weight, e.count});
  return out;
}

void RingConsumer::absorb(const std::vector<smt_batch>& batches) {
  for (const smt_batch& b : batches)
    for (const smt_batch_entry& e : b.entries)
      if (e.count && e.event.epoch == epoch_) count_event(e.event, e.count);
}

void RingConsumer::sync(const std::vector<smt_batch>& batches) {
  for (size_t i = 0; i < batches.size() && i < seen_.size(); ++i)
    seen_[i] = batches[i].sent & kSeqMask;
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

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
      ring_(ring_buffer__new(ring_fd, on_record, this, nullptr)),
      unnamed_(store.strings().intern("[unnamed]")),
      needs_comm_(store.keys().has(KeyField::comm)),
      needs_cgroup_(store.keys().has(KeyField::cgroup)),
      needs_unit_(store.keys().has(KeyField::unit)) {
  if (needs_cgroup_ || needs_unit_) cgroups_.emplace();
  if (!ring_)
    throw Error("cannot set up the ring-buffer consumer: " + std::string(std::strerror(errno)));
}

uint64_t RingConsumer::consumer_pos() const { return load_pos(consumer_page_); }
uint64_t RingConsumer::producer_pos() const { return load_pos(producer_page_); }
int RingConsumer::wakeup_fd() const { return ring_buffer__epoll_fd(ring_.get()); }

// The consumer's hot path: one array access and a pair lookup for a known id.
bool RingConsumer::count_event(const smt_event_record& e) {
  if (e.epoch != epoch_) {
    ++stale_records_;
    return false;
  }
  const EventKey key = key_of(e);
  if (store_.count(e.stack_id, key, e.weight)) return true;
  // First sight of this id: the table published it before the id was
  // submitted, so its frames are there to copy, once.
  const smt_elt* elt = table_.published_elt(e.stack_id);
  if (!elt) {
    ++bad_records_;
    return false;
  }
  store_.insert(e.stack_id, std::vector<uint64_t>(elt->ips, elt->ips + elt->nr), key, e.weight);
  return true;
}

EventKey RingConsumer::key_of(const smt_event_record& e) {
  EventKey k;
  k.pid = e.tgid;
  k.tid = e.tid;
  k.source = e.source;
  k.cpu = e.cpu;
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

void RingConsumer::check_sample(const smt_verify_record& v) {
  const uint32_t id = v.event.stack_id;
  const StackRecord* stored = store_.find(id);
  bool same = stored && v.nr <= SMT_MAX_DEPTH && stored->ips.size() == v.nr &&
              std::equal(stored->ips.begin(), stored->ips.end(), v.ips);
  if (same) {
    ++verify_ok_;
    return;
  }
  if (++verify_mismatch_ <= 10)
    spdlog::warn("verify: stack_id {} holds a different stack than the event captured", id);
}

int RingConsumer::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingConsumer*>(ctx);
  if (self->discarding_) return 0;
  if (size == sizeof(smt_event_record)) {
    smt_event_record e;
    std::memcpy(&e, data, sizeof(e));
    self->count_event(e);
  } else if (size == sizeof(smt_name_record)) {
    smt_name_record n;
    std::memcpy(&n, data, sizeof(n));
    const std::string_view comm(n.comm, strnlen(n.comm, sizeof(n.comm)));
    self->names_[n.name] = self->store_.strings().intern(comm);
    self->last_name_ = {};
  } else if (size == sizeof(smt_trace_record)) {
    smt_trace_record t;
    std::memcpy(&t, data, sizeof(t));
    if (self->count_event(t.event) && self->trace_sink_)
      self->trace_sink_(t, self->comm_of(t.event.name));
  } else if (size == sizeof(smt_verify_record)) {
    smt_verify_record v;
    std::memcpy(&v, data, sizeof(v));
    if (self->count_event(v.event)) self->check_sample(v);
  } else {
    ++self->bad_records_;
  }
  return 0;
}

void RingConsumer::close_blocks(const std::vector<smt_event_record>& blocks,
                                const std::vector<bool>& inserted) {
  for (size_t i = 0; i < blocks.size(); ++i)
    if (count_event(blocks[i])) {
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
  // Blocks closed here count as the BPF side counts the ones it closes.
  s.counters[SMC_HITS] += open_blocks_;
  s.counters[SMC_INSERTS] += open_inserts_;
  s.offcpu_open += open_blocks_;
  s.events_total += open_blocks_;
}

}  // namespace stackmapd

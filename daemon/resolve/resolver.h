// SPDX-License-Identifier: GPL-2.0
// The resolver stage, between a source (daemon/bpf/) and the model: it
// attributes an event to who caused it. Its key's thread name, cgroup path
// and systemd unit become the store's interned strings (looked up in caches
// the hot path reads inline: runs of one thread or cgroup cost no lookup),
// and its user stack, the first time an id is seen, goes to the user stack
// worker (user_stacks.h) while its process most likely still runs. A source
// only decodes and transports; everything it asks of /proc and cgroupfs is
// asked here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "daemon/model/attribution.h"
#include "daemon/resolve/user_stacks.h"
#include "daemon/symbols/cgroups.h"
#include "stackmapd/abi.h"
#include "stackmapd/hist.h"

namespace stackmapd {

class Resolver {
 public:
  // Interns into `strings` what `keys` need; `user_stacks`: --user-stacks'
  // collector, else null.
  Resolver(StringTable& strings, const KeySpec& keys,
           std::unique_ptr<UserStackCollector> user_stacks = nullptr);

  // The consumer's hot path: the key of n events counted together (their
  // weight is the sum of theirs).
  EventKey key_of(const smt_event_record& e, uint64_t n = 1) {
    EventKey k;
    k.pid = e.tgid;
    k.tid = e.tid & 0xffffff;
    // --hist: their bucket, that of their mean (stackmapd/hist.h).
    if (hist_ && n) k.bucket = smt_hist_bucket(e.weight / n) & 0xff;
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

  // A name record: thread name id `name` is `comm` from now on.
  void name(uint32_t name, std::string_view comm);
  bool knows_name(uint32_t name) const { return names_.count(name) != 0; }
  const std::string& comm_of(uint32_t name) const;

  // --user-stacks' collector; null without it.
  UserStackCollector* user_stacks() { return user_.get(); }
  const UserStackCollector* user_stacks() const { return user_.get(); }

 private:
  uint32_t cgroup_string(uint64_t id, bool unit) {
    if (id == last_cgroup_.first && last_cgroup_.second)
      return unit ? last_cgroup_.second->second : last_cgroup_.second->first;
    return new_cgroup(id, unit);
  }
  uint32_t new_cgroup(uint64_t id, bool unit);

  StringTable& strings_;
  std::unique_ptr<UserStackCollector> user_;
  // BPF name id -> the store's string id; the id of "[unnamed]" for 0.
  std::unordered_map<uint32_t, uint32_t> names_;
  uint32_t unnamed_;
  std::pair<uint32_t, uint32_t> last_name_;  // the last lookup; string id 0: none yet
  // What the store's keys need resolved, asked once: the hot path tests a bool.
  bool needs_comm_, needs_cgroup_, needs_unit_;
  bool hist_;                           // --hist: keys carry the bucket
  std::optional<CgroupNames> cgroups_;  // only with --by cgroup or unit: it walks cgroupfs
  // cgroup id -> string ids of its path and its systemd unit.
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> cgroup_strings_;
  std::pair<uint64_t, const std::pair<uint32_t, uint32_t>*> last_cgroup_ = {0, nullptr};
};

}  // namespace stackmapd

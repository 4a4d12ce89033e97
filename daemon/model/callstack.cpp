// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/callstack.h"

#include <map>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "daemon/model/snapshot.h"

namespace stackmapd {

namespace {

class Interner {
 public:
  explicit Interner(Snapshot& snap) : snap_(snap) {}

  uint32_t kernel(uint64_t ip) {
    auto [it, added] = kernel_.try_emplace(ip, size());
    if (added) snap_.frames.push_back(Frame{false, ip});
    return it->second;
  }

  // The frames of user stack `u`, innermost first; none when it is not stored.
  const std::vector<uint32_t>& user(uint32_t u) {
    auto [it, added] = user_stacks_.try_emplace(u);
    auto stored = snap_.user.stacks.find(u);
    if (!added || stored == snap_.user.stacks.end()) return it->second;
    const std::vector<UserFrame>& frames = stored->second.frames;
    for (uint32_t i = 0; i < frames.size(); ++i) {
      const UserFrame& f = frames[i];
      // A frame in a file is the same frame in every process that maps it.
      const std::pair<int32_t, uint64_t> key{f.binary, f.binary >= 0 ? f.file_offset : f.addr};
      auto [id, new_frame] = user_.try_emplace(key, size());
      if (new_frame) snap_.frames.push_back(Frame{true, f.addr, f.binary, f.file_offset, u, i});
      it->second.push_back(id->second);
    }
    return it->second;
  }

 private:
  uint32_t size() const { return static_cast<uint32_t>(snap_.frames.size()); }

  Snapshot& snap_;
  std::unordered_map<uint64_t, uint32_t> kernel_;
  std::map<std::pair<int32_t, uint64_t>, uint32_t> user_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> user_stacks_;
};

}  // namespace

void intern_callstacks(Snapshot& snap) {
  snap.frames.clear();
  snap.callstacks.clear();
  Interner frames(snap);
  std::vector<uint32_t> kernel;
  for (uint32_t i = 0; i < snap.stacks.size(); ++i) {
    const StackRecord& s = snap.stacks[i];
    kernel.clear();
    for (uint64_t ip : s.ips) kernel.push_back(frames.kernel(ip));
    const size_t first = snap.callstacks.size();
    // This stack's callstack of user stack u (kNoUserStack: none), made at first sight.
    const auto of = [&](uint32_t u) -> Callstack& {
      for (size_t c = first; c < snap.callstacks.size(); ++c)
        if (snap.callstacks[c].ustack == u) return snap.callstacks[c];
      Callstack& c = snap.callstacks.emplace_back();
      c.stack = i;
      c.stack_id = s.stack_id;
      c.ustack = u;
      c.kernel_depth = static_cast<uint32_t>(kernel.size());
      c.frames = kernel;
      if (u != kNoUserStack) {
        const std::vector<uint32_t>& user = frames.user(u);
        c.frames.insert(c.frames.end(), user.begin(), user.end());
      }
      return c;
    };
    if (s.by.empty()) {
      Callstack& c = of(kNoUserStack);
      c.count = s.ref_count;
      c.weight = s.weight;
      continue;
    }
    for (uint32_t k = 0; k < s.by.size(); ++k) {
      const KeyCount& key = s.by[k];
      Callstack& c = of(snap.user.enabled && !key.other ? key.key.ustack : kNoUserStack);
      c.count += key.count;
      c.weight += key.weight;
      c.keys.push_back(k);
    }
  }
}

const std::vector<Callstack>& callstacks(const Snapshot& snap) {
  if (snap.callstacks.empty() && !snap.stacks.empty())
    throw std::logic_error("a snapshot's callstacks were not interned (intern_callstacks)");
  return snap.callstacks;
}

}  // namespace stackmapd

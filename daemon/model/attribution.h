// SPDX-License-Identifier: GPL-2.0
// Who an event is attributed to (--by KEYS): the key fields a user
// can split a stack's count by, and an event's key as the ring consumer
// decodes it, its strings interned in the StackStore's StringTable.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stackmapd {

enum class KeyField : uint8_t { pid, tid, comm, cgroup, unit, source, cpu };
const char* key_name(KeyField f);  // "pid", ...

struct KeySpec {
  std::vector<KeyField> fields;  // in the order the user gave, no duplicates

  // "pid,comm" -> {pid, comm}. Throws Error naming an unknown key, an empty
  // item or a duplicate, and the keys there are.
  static KeySpec parse(std::string_view list);
  bool has(KeyField f) const;
  bool empty() const { return fields.empty(); }
  std::string str() const;  // "pid,comm"
  bool operator==(const KeySpec&) const = default;
};

// Interned strings (thread names, cgroup paths, unit names): id 0 is "".
// References from str() stay valid as the table grows.
class StringTable {
 public:
  StringTable();
  uint32_t intern(std::string_view s);
  const std::string& str(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // a deque: elements never move, so the views below hold
  std::unordered_map<std::string_view, uint32_t> ids_;
};

// One event's attribution as the consumer decodes it, strings already
// interned in the store's StringTable.
struct EventKey {
  uint32_t pid = 0, tid = 0, comm = 0, cgroup = 0, unit = 0;
  uint16_t source = 0, cpu = 0;
  // --user-stacks: the event's user stack id (abi.h), always part of the key
  // then: a stack's keys split it by the user code that reached it.
  uint32_t ustack = 0;
  bool operator==(const EventKey&) const = default;
};

}  // namespace stackmapd

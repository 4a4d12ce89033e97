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

#include "daemon/model/stack_record.h"

namespace stackmapd {

struct EventKey;

// bucket: --hist's log2 bucket (stackmapd/hist.h) of the event's weight, a
// key only --hist adds (never a --by word).
enum class KeyField : uint8_t { pid, tid, comm, cgroup, unit, source, cpu, bucket };

// Everything the daemon knows about one key field, in one place: every
// reader and writer of keys (the store, the exports, decode) goes through
// this table, so a new field is one entry here and one member in EventKey
// and KeyValues.
struct KeyFieldInfo {
  // What EventKey holds for the field: the value itself, a StringTable id,
  // or an index into the snapshot's sources.
  enum class Event : uint8_t { number, string_id, source_index };

  KeyField field;
  const char* name;  // --by's word, the JSON key, the pprof label's key
  Event event;
  uint32_t (*read)(const EventKey& k);
  void (*write)(EventKey& k, uint32_t value);  // truncated to the member's width
  // KeyValues' member: exactly one of them is set.
  uint32_t KeyValues::*number;
  std::string KeyValues::*text;
  // A number as a flame graph frame reads it ("pid 812"); a string stands as it is.
  const char* frame_prefix;
  const char* empty_frame;  // the frame of an empty string; null: the empty string

  bool numeric() const { return number != nullptr; }
  // pprof's num_unit of a numeric label: Go's decoder drops a numeric 0
  // that has none. The field's name, as "pid" for pids.
  const char* label_unit() const { return numeric() ? name : nullptr; }
  // The field of `k` as one flame graph frame ("pid 812", "[no unit]").
  std::string frame(const KeyValues& k) const;
  // Negative, zero or positive as a's value orders before, with or after b's.
  int compare(const KeyValues& a, const KeyValues& b) const;
};

const KeyFieldInfo& key_field(KeyField f);
inline const char* key_name(KeyField f) { return key_field(f).name; }  // "pid", ...

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
  uint32_t pid = 0;
  // A tid is below the kernel's PID_MAX_LIMIT (2^22): 24 bits hold it, the
  // other 8 --hist's bucket, so a key stays 28 bytes and a pair's slot 48.
  uint32_t tid : 24 = 0;
  uint32_t bucket : 8 = 0;
  uint32_t comm = 0, cgroup = 0, unit = 0;
  uint16_t source = 0, cpu = 0;
  // --user-stacks: the event's user stack id (abi.h), always part of the key
  // then: a stack's keys split it by the user code that reached it.
  uint32_t ustack = 0;
  bool operator==(const EventKey&) const = default;
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// Who an event is attributed to (--by KEYS): the key fields a user
// can split a stack's count by, and an event's key as the ring consumer
// decodes it, its strings interned in the StackStore's StringTable.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
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
// and KeyValues; no export names a field.
struct KeyFieldInfo {
  // What EventKey holds for the field: the value itself, a StringTable id,
  // or an index into the snapshot's sources.
  enum class Event : uint8_t { number, string_id, source_index };
  // What a numeric field's pprof label counts in (its num_unit, without
  // which Go's decoder drops a numeric 0): the field's name, as "pid" for
  // pids, or the weight's unit (--hist's bucket, a value of the weight).
  enum class Unit : uint8_t { none, name, weight };

  KeyField field;
  const char* name;  // --by's word, the JSON key, the pprof label's key
  // Null: a --by word; else why --by refuses it (another option adds it).
  const char* not_by;
  Event event;
  uint32_t (*read)(const EventKey& k);
  void (*write)(EventKey& k, uint32_t value);  // truncated to the member's width
  // KeyValues' member: exactly one of them is set.
  uint32_t KeyValues::*number;
  std::string KeyValues::*text;
  // The field of `k` as one flame graph frame, --top's label and the web
  // page's filter value: "pid 812", "nginx", "[no unit]", "[1K, 2K)".
  std::string (*frame)(const KeyValues& k);
  // A number as the JSON export and pprof's label write it, and back from
  // the JSON: the value, or a bucket's lowest value. Null for a string.
  uint64_t (*exported)(uint32_t value);
  uint32_t (*imported)(uint64_t exported);
  Unit unit;
  // Its OTLP sample attribute: OpenTelemetry's semantic conventions where
  // they name the thing, ours under "stackmapd." otherwise.
  const char* otlp_attribute;
  bool per_process;  // a value per process or thread: fleet profiles leave it out
  // Its values are --hist's log2 buckets (stackmapd/hist.h): --top draws
  // them as a histogram per key of the other fields.
  bool hist_buckets;

  bool numeric() const { return number != nullptr; }
  // pprof's num_unit of its label, `weight_unit` that of a weight; "": none.
  std::string label_unit(const std::string& weight_unit) const;
  // Negative, zero or positive as a's value orders before, with or after b's.
  int compare(const KeyValues& a, const KeyValues& b) const;
};

const KeyFieldInfo& key_field(KeyField f);
std::span<const KeyFieldInfo> key_fields();  // every field, in KeyField's order
inline const char* key_name(KeyField f) { return key_field(f).name; }  // "pid", ...

struct KeySpec {
  std::vector<KeyField> fields;  // in the order the user gave, no duplicates

  // "pid,comm" -> {pid, comm}. Throws Error naming an unknown key, an empty
  // item or a duplicate, and the keys there are.
  static KeySpec parse(std::string_view list);
  // As parse(), the fields that are no --by word too: an export's list of
  // its keys ("pid,bucket").
  static KeySpec parse_exported(std::string_view list);
  bool has(KeyField f) const;
  bool empty() const { return fields.empty(); }
  // The field whose value names a key's process, whose exit folds the key
  // (StackStore::fold_exited): pid, else tid; none when no field is per process.
  std::optional<KeyField> process_field() const;
  // A folded key's per-process fields (pid, tid) read 0 and the others stay;
  // when no other field is left to tell it apart (no user stack either), its
  // events join their stack's `other` entry: true then.
  bool folds_to_other(bool user_stacks) const;
  // `k` folded, its per-process fields zeroed (KeyCount's `other` not set here).
  KeyValues folded(KeyValues k) const;
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

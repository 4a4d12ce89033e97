// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/attribution.h"

#include <algorithm>
#include <array>

#include "daemon/model/histogram.h"
#include "daemon/sys/error.h"
#include "stackmapd/hist.h"

namespace stackmapd {

namespace {

using Ev = KeyFieldInfo::Event;
using Unit = KeyFieldInfo::Unit;

uint64_t as_is(uint32_t v) { return v; }
uint32_t as_is_back(uint64_t v) { return static_cast<uint32_t>(v); }

// In KeyField's order.
constexpr std::array<KeyFieldInfo, 8> kFields = {{
    {.field = KeyField::pid,
     .name = "pid",
     .not_by = nullptr,
     .event = Ev::number,
     .read = [](const EventKey& k) { return k.pid; },
     .write = [](EventKey& k, uint32_t v) { k.pid = v; },
     .number = &KeyValues::pid,
     .text = nullptr,
     .frame = [](const KeyValues& k) { return "pid " + std::to_string(k.pid); },
     .exported = as_is,
     .imported = as_is_back,
     .unit = Unit::name,
     .otlp_attribute = "process.pid",
     .per_process = true,
     .hist_buckets = false},
    {.field = KeyField::tid,
     .name = "tid",
     .not_by = nullptr,
     .event = Ev::number,
     .read = [](const EventKey& k) { return k.tid; },
     .write = [](EventKey& k, uint32_t v) { k.tid = v; },
     .number = &KeyValues::tid,
     .text = nullptr,
     .frame = [](const KeyValues& k) { return "tid " + std::to_string(k.tid); },
     .exported = as_is,
     .imported = as_is_back,
     .unit = Unit::name,
     .otlp_attribute = "thread.id",
     .per_process = true,
     .hist_buckets = false},
    {.field = KeyField::comm,
     .name = "comm",
     .not_by = nullptr,
     .event = Ev::string_id,
     .read = [](const EventKey& k) { return k.comm; },
     .write = [](EventKey& k, uint32_t v) { k.comm = v; },
     .number = nullptr,
     .text = &KeyValues::comm,
     .frame = [](const KeyValues& k) { return k.comm; },
     .exported = nullptr,
     .imported = nullptr,
     .unit = Unit::none,
     .otlp_attribute = "thread.name",
     .per_process = false,
     .hist_buckets = false},
    {.field = KeyField::cgroup,
     .name = "cgroup",
     .not_by = nullptr,
     .event = Ev::string_id,
     .read = [](const EventKey& k) { return k.cgroup; },
     .write = [](EventKey& k, uint32_t v) { k.cgroup = v; },
     .number = nullptr,
     .text = &KeyValues::cgroup,
     .frame = [](const KeyValues& k) { return k.cgroup; },
     .exported = nullptr,
     .imported = nullptr,
     .unit = Unit::none,
     .otlp_attribute = "stackmapd.cgroup",
     .per_process = false,
     .hist_buckets = false},
    {.field = KeyField::unit,
     .name = "unit",
     .not_by = nullptr,
     .event = Ev::string_id,
     .read = [](const EventKey& k) { return k.unit; },
     .write = [](EventKey& k, uint32_t v) { k.unit = v; },
     .number = nullptr,
     .text = &KeyValues::unit,
     .frame = [](const KeyValues& k) { return k.unit.empty() ? std::string("[no unit]") : k.unit; },
     .exported = nullptr,
     .imported = nullptr,
     .unit = Unit::none,
     .otlp_attribute = "stackmapd.systemd_unit",
     .per_process = false,
     .hist_buckets = false},
    {.field = KeyField::source,
     .name = "source",
     .not_by = nullptr,
     .event = Ev::source_index,
     .read = [](const EventKey& k) { return uint32_t{k.source}; },
     .write = [](EventKey& k, uint32_t v) { k.source = static_cast<uint16_t>(v); },
     .number = nullptr,
     .text = &KeyValues::source,
     .frame = [](const KeyValues& k) { return k.source; },
     .exported = nullptr,
     .imported = nullptr,
     .unit = Unit::none,
     .otlp_attribute = "stackmapd.source",
     .per_process = false,
     .hist_buckets = false},
    {.field = KeyField::cpu,
     .name = "cpu",
     .not_by = nullptr,
     .event = Ev::number,
     .read = [](const EventKey& k) { return uint32_t{k.cpu}; },
     .write = [](EventKey& k, uint32_t v) { k.cpu = static_cast<uint16_t>(v); },
     .number = &KeyValues::cpu,
     .text = nullptr,
     .frame = [](const KeyValues& k) { return "cpu " + std::to_string(k.cpu); },
     .exported = as_is,
     .imported = as_is_back,
     .unit = Unit::name,
     .otlp_attribute = "cpu.logical_number",
     .per_process = false,
     .hist_buckets = false},
    // Written as its lowest value, in the weight's unit; OTLP's attribute
    // holds the bucket itself.
    {.field = KeyField::bucket,
     .name = "bucket",
     .not_by = "the buckets come with --hist [FIELD]; drop bucket from --by",
     .event = Ev::number,
     .read = [](const EventKey& k) { return uint32_t{k.bucket}; },
     .write = [](EventKey& k, uint32_t v) { k.bucket = v & 0xff; },
     .number = &KeyValues::bucket,
     .text = nullptr,
     .frame = [](const KeyValues& k) { return hist_range(k.bucket); },
     .exported = [](uint32_t b) { return uint64_t{smt_hist_lower(b)}; },
     .imported = [](uint64_t v) { return uint32_t{smt_hist_bucket(v)}; },
     .unit = Unit::weight,
     .otlp_attribute = "stackmapd.hist_bucket",
     .per_process = false,
     .hist_buckets = true},
}};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kFields.size(); ++i)
    if (static_cast<size_t>(kFields[i].field) != i) return false;
  return true;
}
static_assert(in_enum_order());

// A folded key reads 0 in its per-process fields (KeySpec::folded): numbers.
constexpr bool per_process_numeric() {
  for (const KeyFieldInfo& f : kFields)
    if (f.per_process && f.event != Ev::number) return false;
  return true;
}
static_assert(per_process_numeric());

[[noreturn]] void bad_list(const std::string& problem) {
  std::string names;
  for (const KeyFieldInfo& f : kFields)
    if (!f.not_by) names += (names.empty() ? "" : ", ") + std::string(f.name);
  throw Error(problem + ": use a comma list of " + names);
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(' ');
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// parse() and parse_exported(): `exported` takes the fields that are no --by word.
KeySpec parse_list(std::string_view list, bool exported) {
  KeySpec spec;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string_view item = trim(list.substr(start, comma - start));
    if (item.empty()) bad_list("empty --by key in '" + std::string(list) + "'");
    auto it = std::find_if(kFields.begin(), kFields.end(),
                           [&](const KeyFieldInfo& f) { return f.name == item; });
    if (it != kFields.end() && it->not_by && !exported)
      throw Error("--by " + std::string(item) + ": " + it->not_by);
    if (it == kFields.end()) bad_list("unknown --by key '" + std::string(item) + "'");
    const KeyField field = it->field;
    if (spec.has(field)) bad_list("--by key '" + std::string(item) + "' given twice");
    spec.fields.push_back(field);
    if (comma == std::string_view::npos) return spec;
    start = comma + 1;
  }
}

}  // namespace

const KeyFieldInfo& key_field(KeyField f) { return kFields[static_cast<size_t>(f)]; }

std::span<const KeyFieldInfo> key_fields() { return kFields; }

std::string KeyFieldInfo::label_unit(const std::string& weight_unit) const {
  switch (unit) {
    case Unit::none: break;
    case Unit::name: return name;
    case Unit::weight: return weight_unit;
  }
  return {};
}

int KeyFieldInfo::compare(const KeyValues& a, const KeyValues& b) const {
  auto cmp = [](const auto& x, const auto& y) { return x < y ? -1 : y < x ? 1 : 0; };
  return numeric() ? cmp(a.*number, b.*number) : cmp(a.*text, b.*text);
}

KeySpec KeySpec::parse(std::string_view list) { return parse_list(list, false); }

KeySpec KeySpec::parse_exported(std::string_view list) { return parse_list(list, true); }

bool KeySpec::has(KeyField f) const {
  return std::find(fields.begin(), fields.end(), f) != fields.end();
}

std::optional<KeyField> KeySpec::process_field() const {
  // pid before tid: the table's order.
  for (const KeyFieldInfo& info : kFields)
    if (info.per_process && has(info.field)) return info.field;
  return std::nullopt;
}

bool KeySpec::folds_to_other(bool user_stacks) const {
  return !user_stacks && std::all_of(fields.begin(), fields.end(),
                                     [](KeyField f) { return key_field(f).per_process; });
}

KeyValues KeySpec::folded(KeyValues k) const {
  for (KeyField f : fields)
    if (const KeyFieldInfo& info = key_field(f); info.per_process) k.*info.number = 0;
  return k;
}

std::string KeySpec::str() const {
  std::string out;
  for (KeyField f : fields) {
    if (!out.empty()) out += ',';
    out += key_name(f);
  }
  return out;
}

StringTable::StringTable() { intern(""); }

uint32_t StringTable::intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  auto id = static_cast<uint32_t>(strings_.size());
  const std::string& kept = strings_.emplace_back(s);
  ids_.emplace(kept, id);
  return id;
}

}  // namespace stackmapd

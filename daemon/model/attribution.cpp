// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/attribution.h"

#include <algorithm>
#include <array>

#include "daemon/model/histogram.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

using Ev = KeyFieldInfo::Event;

// In KeyField's order.
constexpr std::array<KeyFieldInfo, 8> kFields = {{
    {KeyField::pid, "pid", Ev::number, [](const EventKey& k) { return k.pid; },
     [](EventKey& k, uint32_t v) { k.pid = v; }, &KeyValues::pid, nullptr, "pid ", nullptr},
    {KeyField::tid, "tid", Ev::number, [](const EventKey& k) { return k.tid; },
     [](EventKey& k, uint32_t v) { k.tid = v; }, &KeyValues::tid, nullptr, "tid ", nullptr},
    {KeyField::comm, "comm", Ev::string_id, [](const EventKey& k) { return k.comm; },
     [](EventKey& k, uint32_t v) { k.comm = v; }, nullptr, &KeyValues::comm, nullptr, nullptr},
    {KeyField::cgroup, "cgroup", Ev::string_id, [](const EventKey& k) { return k.cgroup; },
     [](EventKey& k, uint32_t v) { k.cgroup = v; }, nullptr, &KeyValues::cgroup, nullptr, nullptr},
    {KeyField::unit, "unit", Ev::string_id, [](const EventKey& k) { return k.unit; },
     [](EventKey& k, uint32_t v) { k.unit = v; }, nullptr, &KeyValues::unit, nullptr, "[no unit]"},
    {KeyField::source, "source", Ev::source_index,
     [](const EventKey& k) { return uint32_t{k.source}; },
     [](EventKey& k, uint32_t v) { k.source = static_cast<uint16_t>(v); }, nullptr,
     &KeyValues::source, nullptr, nullptr},
    {KeyField::cpu, "cpu", Ev::number, [](const EventKey& k) { return uint32_t{k.cpu}; },
     [](EventKey& k, uint32_t v) { k.cpu = static_cast<uint16_t>(v); }, &KeyValues::cpu, nullptr,
     "cpu ", nullptr},
    {KeyField::bucket, "bucket", Ev::number, [](const EventKey& k) { return uint32_t{k.bucket}; },
     [](EventKey& k, uint32_t v) { k.bucket = v & 0xff; }, &KeyValues::bucket, nullptr, "",
     nullptr},
}};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kFields.size(); ++i)
    if (static_cast<size_t>(kFields[i].field) != i) return false;
  return true;
}
static_assert(in_enum_order());

[[noreturn]] void bad_list(const std::string& problem) {
  std::string names;
  for (const KeyFieldInfo& f : kFields)
    if (f.field != KeyField::bucket) names += (names.empty() ? "" : ", ") + std::string(f.name);
  throw Error(problem + ": use a comma list of " + names);
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(' ');
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

}  // namespace

const KeyFieldInfo& key_field(KeyField f) { return kFields[static_cast<size_t>(f)]; }

std::string KeyFieldInfo::frame(const KeyValues& k) const {
  if (field == KeyField::bucket) return hist_range(k.bucket);
  if (numeric()) return frame_prefix + std::to_string(k.*number);
  const std::string& value = k.*text;
  return value.empty() && empty_frame ? empty_frame : value;
}

int KeyFieldInfo::compare(const KeyValues& a, const KeyValues& b) const {
  auto cmp = [](const auto& x, const auto& y) { return x < y ? -1 : y < x ? 1 : 0; };
  return numeric() ? cmp(a.*number, b.*number) : cmp(a.*text, b.*text);
}

KeySpec KeySpec::parse(std::string_view list) {
  KeySpec spec;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string_view item = trim(list.substr(start, comma - start));
    if (item.empty()) bad_list("empty --by key in '" + std::string(list) + "'");
    auto it = std::find_if(kFields.begin(), kFields.end(),
                           [&](const KeyFieldInfo& f) { return f.name == item; });
    if (it != kFields.end() && it->field == KeyField::bucket)
      throw Error("--by bucket: the buckets come with --hist [FIELD]; drop bucket from --by");
    if (it == kFields.end()) bad_list("unknown --by key '" + std::string(item) + "'");
    const KeyField field = it->field;
    if (spec.has(field)) bad_list("--by key '" + std::string(item) + "' given twice");
    spec.fields.push_back(field);
    if (comma == std::string_view::npos) return spec;
    start = comma + 1;
  }
}

bool KeySpec::has(KeyField f) const {
  return std::find(fields.begin(), fields.end(), f) != fields.end();
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

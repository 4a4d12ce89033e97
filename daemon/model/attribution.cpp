// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/attribution.h"

#include <algorithm>
#include <array>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

constexpr std::array<const char*, 7> kNames = {"pid",  "tid",    "comm", "cgroup",
                                               "unit", "source", "cpu"};

[[noreturn]] void bad_list(const std::string& problem) {
  throw Error(problem + ": use a comma list of pid, tid, comm, cgroup, unit, source, cpu");
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(' ');
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

}  // namespace

const char* key_name(KeyField f) { return kNames[static_cast<size_t>(f)]; }

KeySpec KeySpec::parse(std::string_view list) {
  KeySpec spec;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string_view item = trim(list.substr(start, comma - start));
    if (item.empty()) bad_list("empty --by key in '" + std::string(list) + "'");
    auto it = std::find(kNames.begin(), kNames.end(), item);
    if (it == kNames.end()) bad_list("unknown --by key '" + std::string(item) + "'");
    auto field = static_cast<KeyField>(it - kNames.begin());
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

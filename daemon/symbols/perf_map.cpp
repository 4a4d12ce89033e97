// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/perf_map.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace stackmapd {

namespace {

// The pid `pid` has in its own namespace (the last NSpid field), which is
// the one a JIT puts in its map's name.
uint32_t namespace_pid(uint32_t pid, const std::string& dir) {
  std::ifstream status(dir + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    const size_t last = line.find_last_of(" \t");
    if (last != std::string::npos) return static_cast<uint32_t>(std::stoul(line.substr(last + 1)));
  }
  return pid;
}

}  // namespace

PerfMap PerfMap::parse(const std::string& text) {
  PerfMap m;
  std::istringstream in(text);
  std::string line;
  size_t order = 0;
  std::vector<std::pair<Function, size_t>> all;
  while (std::getline(in, line)) {
    uint64_t start = 0, size = 0;
    int name_at = -1;
    if (sscanf(line.c_str(), "%" SCNx64 " %" SCNx64 " %n", &start, &size, &name_at) < 2 ||
        name_at < 0 || static_cast<size_t>(name_at) >= line.size() || size == 0)
      continue;
    all.push_back({Function{start, start + size, line.substr(name_at)}, order++});
  }
  // By start; of equal starts the latest line first, which the search finds.
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first.start != b.first.start ? a.first.start < b.first.start : a.second > b.second;
  });
  for (auto& [f, _] : all)
    if (m.functions_.empty() || m.functions_.back().start != f.start)
      m.functions_.push_back(std::move(f));
  return m;
}

std::optional<PerfMap> PerfMap::read(uint32_t pid, const std::string& proc) {
  const std::string dir = proc + "/" + std::to_string(pid);
  std::ifstream f(dir + "/root/tmp/perf-" + std::to_string(namespace_pid(pid, dir)) + ".map");
  if (!f) return std::nullopt;
  std::stringstream text;
  text << f.rdbuf();
  return parse(text.str());
}

std::optional<std::string> PerfMap::find(uint64_t addr, bool is_return) const {
  const uint64_t at = is_return && addr > 0 ? addr - 1 : addr;
  auto it = std::upper_bound(functions_.begin(), functions_.end(), at,
                             [](uint64_t a, const Function& f) { return a < f.start; });
  if (it == functions_.begin() || at >= (--it)->end) return std::nullopt;
  char off[24];
  snprintf(off, sizeof(off), "+0x%" PRIx64, addr - it->start);
  return it->name + off;
}

}  // namespace stackmapd

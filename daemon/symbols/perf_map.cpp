// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/perf_map.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "daemon/sys/untrusted_file.h"

namespace stackmapd {

namespace {

// Of /proc/PID/status: the pid `pid` has in its own namespace (the last
// NSpid field, the one a JIT puts in its map's name) and its real and
// effective uid (whose maps are the process's own).
struct ProcessIds {
  uint32_t ns_pid = 0;
  uint32_t ruid = 0, euid = 0;
  bool uid_known = false;
};

ProcessIds process_ids(uint32_t pid, const std::string& dir) {
  ProcessIds ids{pid};
  std::ifstream status(dir + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("NSpid:", 0) == 0) {
      const size_t last = line.find_last_of(" \t");
      if (last != std::string::npos)
        ids.ns_pid = static_cast<uint32_t>(std::strtoul(line.c_str() + last + 1, nullptr, 10));
    } else if (line.rfind("Uid:", 0) == 0) {
      unsigned r, e;
      if (sscanf(line.c_str() + 4, "%u %u", &r, &e) == 2) ids.ruid = r, ids.euid = e;
      ids.uid_known = true;
    }
  }
  return ids;
}

// One hex field and the blanks after it; false when there is none.
bool hex_field(std::string_view& s, uint64_t& v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(end - s.data()));
  const size_t blanks = s.find_first_not_of(" \t");
  if (blanks == 0 || blanks == std::string_view::npos) return false;
  s.remove_prefix(blanks);
  return true;
}

}  // namespace

void PerfMap::add_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  uint64_t start = 0, size = 0;
  if (!hex_field(line, start) || !hex_field(line, size) || size == 0 || line.empty() ||
      start + size < start || functions_.size() >= kMaxFunctions)
    return;
  line = line.substr(0, kMaxName);
  functions_.push_back(Function{start, start + size, static_cast<uint32_t>(names_.size()),
                                static_cast<uint32_t>(line.size())});
  names_.append(line);
}

void PerfMap::finish() {
  // By start, in line order within a start; of equal starts the last line
  // is kept: the code was replaced.
  std::stable_sort(functions_.begin(), functions_.end(),
                   [](const Function& a, const Function& b) { return a.start < b.start; });
  std::vector<Function> kept;
  kept.reserve(functions_.size());
  for (const Function& f : functions_) {
    if (!kept.empty() && kept.back().start == f.start) kept.back() = f;
    else kept.push_back(f);
  }
  functions_ = std::move(kept);
}

PerfMap PerfMap::parse(std::string_view text) {
  PerfMap m;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    m.add_line(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  m.finish();
  return m;
}

std::optional<PerfMap> PerfMap::read(uint32_t pid, const std::string& proc, std::string* refused) {
  const std::string dir = proc + "/" + std::to_string(pid);
  const ProcessIds ids = process_ids(pid, dir);
  const std::string name = "tmp/perf-" + std::to_string(ids.ns_pid) + ".map";
  auto refuse = [&](const std::string& why) -> std::optional<PerfMap> {
    if (refused) *refused = dir + "/root/" + name + ": " + why;
    return std::nullopt;
  };
  // The process's root is the kernel's link; below it nothing is followed.
  const UniqueFd root(open((dir + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return std::nullopt;  // gone
  std::string why;
  errno = 0;
  std::optional<OpenedFile> f = open_regular_beneath(root.get(), name, &why);
  if (!f) return errno == ENOENT ? std::nullopt : refuse(why);
  const uid_t owner = f->st.st_uid;
  if (!ids.uid_known || (owner != 0 && owner != ids.ruid && owner != ids.euid))
    return refuse("owned by uid " + std::to_string(owner) +
                  ", neither the process's user nor root (as perf, not read)");
  if (static_cast<uint64_t>(f->st.st_size) > kMaxBytes)
    return refuse(std::to_string(f->st.st_size >> 20) + " MiB, over the " +
                  std::to_string(kMaxBytes >> 20) + " MiB a perf map may have");
  // Streamed: a line at a time from a 64 KiB buffer, a line past kMaxName
  // (and its fields) cut there, the file read no further than kMaxBytes
  // even if it grows meanwhile.
  PerfMap m;
  constexpr size_t kLine = kMaxName + 64;
  std::string buf;
  bool cut = false;  // the line in buf was cut: skip to its end
  uint64_t total = 0;
  char chunk[65536];
  for (ssize_t n; total < kMaxBytes && (n = ::read(f->fd.get(), chunk, sizeof(chunk))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return refuse(std::string("read failed: ") + std::strerror(errno));
    }
    total += static_cast<uint64_t>(n);
    std::string_view in(chunk, static_cast<size_t>(n));
    while (!in.empty()) {
      const size_t nl = in.find('\n');
      const std::string_view part = in.substr(0, nl);
      if (!cut) buf.append(part.substr(0, kLine - std::min(kLine, buf.size())));
      if (buf.size() >= kLine) cut = true;
      if (nl == std::string_view::npos) break;
      m.add_line(buf);
      buf.clear();
      cut = false;
      in.remove_prefix(nl + 1);
    }
  }
  if (!buf.empty()) m.add_line(buf);
  m.finish();
  return m;
}

std::optional<std::string> PerfMap::find(uint64_t addr, bool is_return) const {
  const uint64_t at = is_return && addr > 0 ? addr - 1 : addr;
  auto it = std::upper_bound(functions_.begin(), functions_.end(), at,
                             [](uint64_t a, const Function& f) { return a < f.start; });
  if (it == functions_.begin() || at >= (--it)->end) return std::nullopt;
  char off[24];
  snprintf(off, sizeof(off), "+0x%" PRIx64, addr - it->start);
  return names_.substr(it->name_at, it->name_size) + off;
}

}  // namespace stackmapd

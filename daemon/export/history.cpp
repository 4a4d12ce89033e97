// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/history.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <vector>

#include "daemon/export/exports.h"
#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

namespace fs = std::filesystem;

namespace {

// UTC and zero-padded, so that names sort in time order.
std::string stamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

void keep_history(const std::string& export_dir, uint64_t max_bytes, gid_t group) {
  const fs::path dir = fs::path(export_dir) / "history";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create " + dir.string() + ": " + ec.message());
  // Two snapshots within one second share a stamp: the later replaces the earlier.
  const std::string name = stamp();
  for (const char* file : {"stack_map_bin", "stack_map.kernel"}) {
    const fs::path src = fs::path(export_dir) / file;
    if (fs::exists(src, ec))
      write_file_atomic((dir / (name + "." + file)).string(), read_file(src.string()).value_or(""),
                        0640, group);
  }

  struct Entry {
    std::string stamp;
    std::vector<fs::path> files;
    uint64_t bytes = 0;
  };
  std::vector<Entry> snapshots;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    const std::string key = file.substr(0, file.find('.'));
    auto it = std::find_if(snapshots.begin(), snapshots.end(),
                           [&](const Entry& s) { return s.stamp == key; });
    if (it == snapshots.end()) it = snapshots.insert(snapshots.end(), Entry{key, {}, 0});
    it->files.push_back(e.path());
    it->bytes += e.file_size(ec);
  }
  std::sort(snapshots.begin(), snapshots.end(),
            [](const Entry& a, const Entry& b) { return a.stamp < b.stamp; });
  uint64_t total = 0;
  for (const auto& s : snapshots) total += s.bytes;
  for (size_t i = 0; i + 1 < snapshots.size() && total > max_bytes; ++i) {
    for (const auto& f : snapshots[i].files) fs::remove(f, ec);
    total -= snapshots[i].bytes;
  }
}

}  // namespace stackmapd

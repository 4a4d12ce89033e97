// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/stale_temps.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>

namespace stackmapd {

namespace {

namespace fs = std::filesystem;

// mkstemp's suffix: ".tmp-" and six letters or digits.
bool is_temp_of(const std::string& file, const std::string& name) {
  constexpr size_t kSuffix = 5 + 6;
  return file.size() == name.size() + kSuffix && file.compare(0, name.size(), name) == 0 &&
         file.compare(name.size(), 5, ".tmp-") == 0 &&
         std::all_of(file.end() - 6, file.end(), [](unsigned char c) { return std::isalnum(c); });
}

// Regular files only: a link or a directory of that name is nobody's temp file of ours.
size_t remove_matching(const fs::path& dir, const std::function<bool(const std::string&)>& ours) {
  size_t removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    struct stat st;
    const std::string file = e.path().filename().string();
    if (ours(file) && lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        unlink(e.path().c_str()) == 0)
      ++removed;
  }
  return removed;
}

}  // namespace

size_t remove_stale_temps(const std::string& export_dir, const std::string& metrics_textfile) {
  static const char* const kExports[] = {"stack_map", "stack_map_bin", "stack_map_stat",
                                         "stack_map.json", "stack_map.kernel"};
  const fs::path dir(export_dir);
  size_t n = remove_matching(dir, [](const std::string& f) {
    return std::any_of(std::begin(kExports), std::end(kExports),
                       [&](const char* name) { return is_temp_of(f, name); });
  });
  // history/ and binaries/ are stackmapd's own: every temp name there is ours.
  n += remove_matching(dir / "history", [](const std::string& f) {
    return f.size() > 11 && is_temp_of(f, f.substr(0, f.size() - 11));
  });
  n += remove_matching(dir / "binaries", [](const std::string& f) {
    return is_temp_of(f, "index") || (f.size() > 5 && f[0] == '.' && f.ends_with(".tmp"));
  });
  if (!metrics_textfile.empty()) {
    const fs::path m(metrics_textfile);
    n += remove_matching(m.parent_path(), [name = m.filename().string()](const std::string& f) {
      return is_temp_of(f, name);
    });
  }
  return n;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/user_binaries.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "daemon/export/exports.h"
#include "daemon/export/utf8_text.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/symbols/user_symbolizer.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace fs = std::filesystem;

void save_user_binaries(const std::string& dir, const UserStackSet& set, gid_t group) {
  const fs::path bin_dir = fs::path(dir) / "binaries";
  std::error_code ec;
  fs::create_directories(bin_dir, ec);
  if (ec) {
    spdlog::warn("cannot create {}: {}; user frames symbolize only on this machine",
                 bin_dir.string(), ec.message());
    return;
  }
  std::string index;
  for (const UserBinary& b : set.binaries) {
    if (b.build_id.empty()) continue;
    index += b.build_id + " " + utf8_text(b.path) + "\n";
    const fs::path copy = bin_dir / b.build_id;
    if (fs::exists(copy, ec)) continue;
    // The file at the path must still be the one mapped: its build id says.
    if (elf_build_id(b.path) != b.build_id) {
      spdlog::warn("{} changed or is gone since it was mapped: not copied", b.path);
      continue;
    }
    const fs::path tmp = bin_dir / ("." + b.build_id + ".tmp");
    fs::copy_file(b.path, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, copy, ec);
    if (ec) {
      spdlog::warn("cannot copy {} to {}: {}", b.path, copy.string(), ec.message());
      fs::remove(tmp, ec);
    }
  }
  write_file_atomic((bin_dir / "index").string(), index, 0640, group);
}

void resymbolize_user_stacks(UserStackSet& set, const std::string& dir) {
  const fs::path bin_dir = fs::path(dir) / "binaries";
  std::error_code ec;
  if (!fs::is_directory(bin_dir, ec))
    throw Error("--user-symbols-from " + dir + ": no binaries/ directory there; give the " +
                "export directory the daemon wrote with --user-stacks");
  UserSymbolizer symbolizer;
  for (auto& [id, s] : set.stacks)
    for (size_t i = 0; i < s.frames.size(); ++i) {
      UserFrame& f = s.frames[i];
      f.symbols.clear();
      f.srcline.clear();
      f.elf_addr = 0;
      if (f.binary < 0 || static_cast<size_t>(f.binary) >= set.binaries.size()) continue;
      const std::string& build_id = set.binaries[f.binary].build_id;
      if (build_id.empty() || !fs::exists(bin_dir / build_id, ec)) continue;
      UserSymbolizer::Result r =
          symbolizer.resolve(build_id, (bin_dir / build_id).string(), f.file_offset, i > 0);
      f.elf_addr = r.elf_addr;
      f.symbols = std::move(r.symbols);
      f.srcline = std::move(r.srcline);
    }
}

}  // namespace stackmapd

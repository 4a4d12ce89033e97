// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/user_binaries.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "daemon/export/exports.h"
#include "daemon/export/utf8_text.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/symbols/user_symbolizer.h"
#include "daemon/sys/error.h"
#include "daemon/sys/untrusted_file.h"

namespace stackmapd {

namespace fs = std::filesystem;

namespace {

uint64_t directory_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  return total;
}

// Each export tries the binaries again: say once per binary (per daemon) that
// the cap kept it out, not at every export.
void warn_over_cap(const UserBinary& b, uint64_t max_bytes) {
  static std::mutex mu;
  static std::set<std::string> told;
  std::lock_guard lock(mu);
  if (!told.insert(b.build_id).second) return;
  spdlog::warn(
      "{} not copied to binaries/: it would take the directory past its {} MiB cap; "
      "its frames keep the symbols found live (move older export dirs away to make room)",
      utf8_text(b.path), max_bytes >> 20);
}

// Copies `size` bytes of `fd` into a new file at `path` with the binary's
// permissions (a copy shows no one more than the binary does); "" or what failed.
std::string copy_fd_to(int fd, uint64_t size, mode_t mode, const std::string& path) {
  UniqueFd out(
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode & 0755));
  if (!out) return std::strerror(errno);
  off_t at = 0;
  while (static_cast<uint64_t>(at) < size) {
    const ssize_t n = sendfile(out.get(), fd, &at, size - static_cast<uint64_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "the file shrank while it was copied";
  }
  return "";
}

}  // namespace

void save_user_binaries(const std::string& dir, const UserStackSet& set, gid_t group,
                        uint64_t max_bytes) {
  const fs::path bin_dir = fs::path(dir) / "binaries";
  std::error_code ec;
  fs::create_directories(bin_dir, ec);
  if (ec) {
    spdlog::warn("cannot create {}: {}; user frames symbolize only on this machine",
                 bin_dir.string(), ec.message());
    return;
  }
  uint64_t used = directory_bytes(bin_dir);
  std::string index;
  for (const UserBinary& b : set.binaries) {
    if (b.build_id.empty()) continue;
    index += b.build_id + " " + utf8_text(b.path) + "\n";
    const fs::path copy = bin_dir / b.build_id;
    if (fs::exists(copy, ec)) continue;
    // The path is the user's: opened without following a link or waiting on
    // a FIFO, and kept only if it is still the file mapped, same inode and
    // build id (a user can forge a build id, not an inode).
    std::string why;
    std::optional<OpenedFile> f;
    if (!b.identity.known()) why = "its inode was not read while it was mapped";
    else f = open_regular(b.path, Links::refused, &why, b.identity);
    if (f && elf_build_id(*f) != b.build_id) why = "its build id changed", f.reset();
    if (!f) {
      spdlog::warn("{} not copied: {}", utf8_text(b.path), why);
      continue;
    }
    const uint64_t size = static_cast<uint64_t>(f->st.st_size);
    if (used + size > max_bytes) {
      warn_over_cap(b, max_bytes);
      continue;
    }
    const fs::path tmp = bin_dir / ("." + b.build_id + ".tmp");
    if (std::string err = copy_fd_to(f->fd.get(), size, f->st.st_mode, tmp.string());
        !err.empty()) {
      spdlog::warn("cannot copy {} to {}: {}", utf8_text(b.path), copy.string(), err);
      fs::remove(tmp, ec);
      continue;
    }
    fs::rename(tmp, copy, ec);
    if (ec) {
      spdlog::warn("cannot copy {} to {}: {}", utf8_text(b.path), copy.string(), ec.message());
      fs::remove(tmp, ec);
      continue;
    }
    used += size;
  }
  write_file_atomic((bin_dir / "index").string(), index, 0640, group);
}

void resymbolize_user_stacks(UserStackSet& set, const std::string& dir) {
  const fs::path bin_dir = fs::path(dir) / "binaries";
  std::error_code ec;
  if (!fs::is_directory(bin_dir, ec))
    throw Error("--user-symbols-from " + dir + ": no binaries/ directory there; give the " +
                "export directory the daemon wrote with --user-stacks");
  // The binaries the daemon indexed but could not copy (deleted before the
  // export, or over the cap): their frames keep the names found live.
  std::set<std::string> uncopied;
  std::ifstream index(bin_dir / "index");
  for (std::string line; std::getline(index, line);) {
    const std::string build_id = line.substr(0, line.find(' '));
    if (!build_id.empty() && !fs::exists(bin_dir / build_id, ec)) uncopied.insert(build_id);
  }
  UserSymbolizer symbolizer;
  for (auto& [id, s] : set.stacks)
    for (size_t i = 0; i < s.frames.size(); ++i) {
      UserFrame& f = s.frames[i];
      // A frame in no file (JIT code named from its perf map, the vdso) has
      // nothing in DIR: its name is the one found live.
      const bool in_file = f.binary >= 0 && static_cast<size_t>(f.binary) < set.binaries.size();
      if (!in_file) continue;
      const std::string& build_id = set.binaries[f.binary].build_id;
      if (uncopied.count(build_id)) continue;
      f.symbols.clear();
      f.srcline.clear();
      f.elf_addr = 0;
      if (build_id.empty() || !fs::exists(bin_dir / build_id, ec)) continue;
      UserSymbolizer::Result r =
          symbolizer.resolve(build_id, (bin_dir / build_id).string(), f.file_offset, i > 0);
      f.elf_addr = r.elf_addr;
      f.symbols = std::move(r.symbols);
      f.srcline = std::move(r.srcline);
    }
}

}  // namespace stackmapd

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
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

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

// Each export tries the binaries again: say once per binary (per daemon)
// why one was not copied, not at every export.
void warn_once(const UserBinary& b, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> told;
  std::lock_guard lock(mu);
  if (!told.insert(b.build_id).second) return;
  spdlog::warn("{} not copied to binaries/: {}", utf8_text(b.path), why);
}

// The file at `path` if it is a regular one with that build id (and, when
// `expect` is known, that very inode): the path is the user's, opened without
// following a link or waiting on a FIFO (a user can forge a build id, not an
// inode). Otherwise nullopt, and *why says what is there instead.
std::optional<OpenedFile> open_checked(const std::string& path, Links links,
                                       const std::string& build_id, FileIdentity expect,
                                       std::string* why) {
  std::optional<OpenedFile> f = open_regular(path, links, why, expect);
  if (f && elf_build_id(*f) != build_id) {
    if (why) *why = "its build id changed";
    f.reset();
  }
  return f;
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
    if (!b.identity.known()) {
      warn_once(b, "its inode was not read while it was mapped");
      continue;
    }
    // Still at its path: the index names it, offline symbolizing reads it there.
    if (open_checked(b.path, Links::refused, b.build_id, b.identity, nullptr)) continue;
    // Deleted or replaced: copied from the file mapped, while a process maps it.
    std::string why;
    std::optional<OpenedFile> f;
    if (b.open_path.empty()) why = "no process of it was seen";
    else f = open_checked(b.open_path, Links::kernel, b.build_id, b.identity, &why);
    if (!f) {
      warn_once(b,
                "deleted or replaced at its path, and no process maps it any more (" + why + ")");
      continue;
    }
    const uint64_t size = static_cast<uint64_t>(f->st.st_size);
    if (used + size > max_bytes) {
      warn_once(b, "it would take the directory past its " + std::to_string(max_bytes >> 20) +
                       " MiB cap; its frames keep the symbols found live (move older export dirs "
                       "away to make room)");
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
  // The binaries the daemon indexed without a copy: still at their path when
  // exported (read there if they still are, build id checked), or not
  // copied (deleted with their processes, or over the cap). When no file
  // has them, their frames keep the names found live.
  std::set<std::string> uncopied;
  std::ifstream index(bin_dir / "index");
  for (std::string line; std::getline(index, line);) {
    const std::string build_id = line.substr(0, line.find(' '));
    if (!build_id.empty() && !fs::exists(bin_dir / build_id, ec)) uncopied.insert(build_id);
  }
  // By binary: the file read for it ("" none), and the copy or path opened.
  std::map<int32_t, std::string> files;
  std::vector<OpenedFile> at_paths;
  const auto file_of = [&](int32_t binary) -> const std::string& {
    auto [it, added] = files.try_emplace(binary);
    const UserBinary& b = set.binaries[binary];
    if (!added || b.build_id.empty()) return it->second;
    if (fs::exists(bin_dir / b.build_id, ec)) {
      it->second = (bin_dir / b.build_id).string();
    } else if (uncopied.count(b.build_id)) {
      // The very file checked is the one read: through its descriptor.
      if (auto f = open_checked(b.path, Links::refused, b.build_id, {}, nullptr)) {
        it->second = "/proc/self/fd/" + std::to_string(f->fd.get());
        at_paths.push_back(std::move(*f));
      }
    }
    return it->second;
  };
  UserSymbolizer symbolizer;
  for (auto& [id, s] : set.stacks)
    for (size_t i = 0; i < s.frames.size(); ++i) {
      UserFrame& f = s.frames[i];
      // A frame in no file (JIT code named from its perf map, the vdso) has
      // nothing in DIR: its name is the one found live.
      const bool in_file = f.binary >= 0 && static_cast<size_t>(f.binary) < set.binaries.size();
      if (!in_file) continue;
      const std::string& build_id = set.binaries[f.binary].build_id;
      const std::string& file = file_of(f.binary);
      if (file.empty() && uncopied.count(build_id)) continue;
      f.symbols.clear();
      f.srcline.clear();
      f.elf_addr = 0;
      if (file.empty()) continue;
      UserSymbolizer::Result r = symbolizer.resolve(build_id, file, f.file_offset, i > 0);
      f.elf_addr = r.elf_addr;
      f.symbols = std::move(r.symbols);
      f.srcline = std::move(r.srcline);
    }
}

}  // namespace stackmapd

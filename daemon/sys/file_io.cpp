// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "daemon/sys/error.h"
#include "daemon/sys/staged_files.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

void prepare_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error("cannot create output directory " + dir + ": " + ec.message() +
                ": choose a writable --output directory");
  std::string probe = dir + "/.stackmapd-write-test-XXXXXX";
  int fd = mkstemp(probe.data());
  if (fd < 0)
    throw Error("output directory " + dir + " is not writable: " + std::strerror(errno) +
                ": choose a writable --output directory");
  close(fd);
  unlink(probe.c_str());
}

void write_file_atomic(const std::string& path, const std::string& content, mode_t mode,
                       gid_t group) {
  StagedFiles file;
  file.add(path, content, mode, group);
  file.commit();
}

void check_writable_parent(const std::string& path, const char* option) {
  if (path.empty() || path == "-") return;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (access(parent.c_str(), W_OK) != 0)
    throw Error(std::string(option) + " " + path + ": cannot write in " + parent.string() + ": " +
                std::strerror(errno));
}

std::optional<std::string> read_file(const std::string& path, bool* opened) {
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (opened) *opened = static_cast<bool>(fd);
  if (!fd) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    else if (n == 0) return out;
    else if (errno != EINTR) return std::nullopt;  // close() on success keeps errno
  }
}

}  // namespace stackmapd

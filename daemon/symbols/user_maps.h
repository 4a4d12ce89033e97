// SPDX-License-Identifier: GPL-2.0
// --user-stacks: a process's file mappings (/proc/PID/maps) with each file's
// build id, read while the process lives, so that a user address becomes
// (binary, file offset): what symbolizes it after the process is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/sys/untrusted_file.h"

typedef struct Elf Elf;  // libelf's

namespace stackmapd {

// Parses the build id of the file open at a descriptor (in hex, "" when
// none): the daemon's parser sandbox (resolve/sandboxed_parser.h).
using BuildIdParser = std::function<std::string(int fd)>;

struct MappedFile {
  uint64_t start = 0, end = 0, pgoff = 0;
  std::string path;      // as in /proc/PID/maps
  std::string build_id;  // hex, empty if none
  // Where the daemon can open the file while the process lives
  // (/proc/PID/map_files/..., which works for deleted files and other
  // mount namespaces too).
  std::string open_path;
  // The file open_path named when read: what a later open of `path` must find.
  FileIdentity identity;
  // The file as the kernel names it (stackmapd/abi/unwind.h's file key):
  // its superblock's device (major << 20 | minor) and inode number.
  uint32_t dev = 0;
  uint64_t inode = 0;
};

// Code in no file: the vdso, JIT code in anonymous memory.
struct CodeRange {
  uint64_t start = 0, end = 0;
  std::string name;  // "[vdso]", "" for anonymous memory
};

class ProcessMaps {
 public:
  // The executable mappings of `pid`; nullopt when the process is gone or
  // its maps are not ours to read (*error: errno, EACCES without
  // CAP_SYS_PTRACE for another user's process). `proc` is the proc
  // filesystem's root (tests pass another).
  // Build ids are read with `parse_id` (here when none is given). Every
  // file is looked at (a stat of its /proc link, an open when not known)
  // before any is parsed: a parse is slow, and a short-lived process may
  // exit meanwhile. `opened`: files the caller reads next (the process may
  // be gone by then), opened in the same first look.
  struct OpenedFiles {
    std::vector<uint64_t> at;  // the files mapped at these addresses are opened
    std::map<std::string, std::shared_ptr<const UniqueFd>> by_path;  // filled
  };
  static std::optional<ProcessMaps> read(uint32_t pid, const std::string& proc = "/proc",
                                         int* error = nullptr, const BuildIdParser& parse_id = {},
                                         OpenedFiles* opened = nullptr);
  // Parses the text of a maps file (no build ids: open_path is left empty).
  static ProcessMaps parse(const std::string& text);

  const MappedFile* find(uint64_t addr) const;
  const CodeRange* find_other_code(uint64_t addr) const;
  const std::vector<MappedFile>& files() const { return files_; }
  const std::vector<CodeRange>& other_code() const { return other_code_; }

 private:
  std::vector<MappedFile> files_;      // sorted by start
  std::vector<CodeRange> other_code_;  // sorted by start
};

// The GNU build id of the ELF file at `path` (a /proc link or a path of the
// daemon's own: see untrusted_file.h), in hex; empty if it has none, is no
// ELF file or no regular file. *identity: the file read.
std::string elf_build_id(const std::string& path, FileIdentity* identity = nullptr);
// Of a file open already, read once per file (and again when rewritten) by
// `parse`, or here when none is given. ProcessMaps::read looks a mapped file
// up by a stat of its /proc link first: a file known is not even opened.
std::string elf_build_id(const OpenedFile& f, const BuildIdParser& parse = {});
// The same of an ELF file already open.
std::string elf_build_id(Elf* elf);

// The build ids known by file (dev, inode, size, mtime), this process's:
// a lookup found one (hit) or the file was opened and parsed (miss).
struct BuildIdCacheCounts {
  uint64_t hits = 0, misses = 0;
};
BuildIdCacheCounts build_id_cache_counts();

}  // namespace stackmapd

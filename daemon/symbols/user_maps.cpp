// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/user_maps.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "daemon/sys/file_io.h"

namespace stackmapd {

namespace {

// A file's content as last read: the same inode may be rewritten.
struct KnownFile {
  uint64_t dev, ino, size, mtime_ns;
  auto operator<=>(const KnownFile&) const = default;
};
constexpr size_t kMaxKnownFiles = 8192;

KnownFile known_file(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000u +
              static_cast<uint64_t>(st.st_mtim.tv_nsec)};
}

// Every new process maps the same few files: a file's id is read once. A
// file rewritten in place changes its mtime or size, and is read again.
class KnownIds {
 public:
  std::optional<std::string> find(const KnownFile& f) {
    std::lock_guard lock(mu_);
    auto it = ids_.find(f);
    if (it == ids_.end()) {
      ++counts_.misses;
      return std::nullopt;
    }
    ++counts_.hits;
    return it->second;
  }
  void add(const KnownFile& f, const std::string& id) {
    std::lock_guard lock(mu_);
    if (ids_.size() >= kMaxKnownFiles) ids_.clear();
    ids_.emplace(f, id);
  }
  // By the (device, inode) a maps line names, for a process gone before its
  // files could be looked at: the id last read of that file.
  std::string mapped(uint32_t dev, uint64_t inode) {
    std::lock_guard lock(mu_);
    auto it = by_maps_.find({dev, inode});
    return it == by_maps_.end() ? std::string() : it->second;
  }
  void add_mapped(uint32_t dev, uint64_t inode, const std::string& id) {
    std::lock_guard lock(mu_);
    if (by_maps_.size() >= kMaxKnownFiles) by_maps_.clear();
    by_maps_[{dev, inode}] = id;
  }
  BuildIdCacheCounts counts() {
    std::lock_guard lock(mu_);
    return counts_;
  }

 private:
  std::mutex mu_;
  std::map<KnownFile, std::string> ids_;
  std::map<std::pair<uint32_t, uint64_t>, std::string> by_maps_;
  BuildIdCacheCounts counts_;
};

KnownIds& known_ids() {
  static KnownIds ids;
  return ids;
}

std::string to_hex(const unsigned char* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

}  // namespace

BuildIdCacheCounts build_id_cache_counts() { return known_ids().counts(); }

std::string elf_build_id(const std::string& path, FileIdentity* identity) {
  std::optional<OpenedFile> f = open_regular(path, Links::kernel, nullptr);
  if (!f) return "";
  if (identity) *identity = f->identity();
  return elf_build_id(*f);
}

namespace {

// Parses the id of a file the cache does not know, and keeps it.
std::string parse_build_id(const OpenedFile& f, const BuildIdParser& parse) {
  std::string out;
  if (parse) {
    out = parse(f.fd.get());
  } else {
    elf_version(EV_CURRENT);
    // Read, never mapped: a mapping's munmap costs every CPU a TLB flush, and
    // a busy machine starts hundreds of processes a second.
    Elf* elf = elf_begin(f.fd.get(), ELF_C_READ, nullptr);  // owned here, ended below
    if (!elf) return "";
    out = elf_build_id(elf);
    elf_end(elf);
  }
  known_ids().add(known_file(f.st), out);
  return out;
}

}  // namespace

std::string elf_build_id(const OpenedFile& f, const BuildIdParser& parse) {
  if (std::optional<std::string> id = known_ids().find(known_file(f.st))) return *id;
  return parse_build_id(f, parse);
}

std::string elf_build_id(Elf* elf) {
  const void* id = nullptr;
  const ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
  return n > 0 ? to_hex(static_cast<const unsigned char*>(id), n) : "";
}

ProcessMaps ProcessMaps::parse(const std::string& text) {
  ProcessMaps m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    uint64_t start, end, pgoff, inode;
    unsigned major, minor;
    char perms[8] = {};
    int path_at = -1;
    if (sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &start,
               &end, perms, &pgoff, &major, &minor, &inode, &path_at) < 7 ||
        path_at < 0)
      continue;
    // Only code: a return address lies in an executable mapping.
    if (perms[2] != 'x') continue;
    std::string path = line.substr(path_at);
    if (path.empty() || path[0] == '[') m.other_code_.push_back(CodeRange{start, end, path});
    else
      m.files_.push_back(
          MappedFile{start, end, pgoff, path, "", "", {}, major << 20 | minor, inode});
  }
  std::sort(m.files_.begin(), m.files_.end(),
            [](const MappedFile& a, const MappedFile& b) { return a.start < b.start; });
  std::sort(m.other_code_.begin(), m.other_code_.end(),
            [](const CodeRange& a, const CodeRange& b) { return a.start < b.start; });
  return m;
}

namespace {

// A mapped file as a stat through its /proc link named it (dev, inode, size,
// mtime): a file seen before, in any process, is neither opened nor parsed
// again; one not seen is opened at once, parsed later.
struct LookedAt {
  std::string build_id;
  FileIdentity identity;
  std::optional<OpenedFile> opened;
  bool parse = false;  // its id is still to read from `opened`
};

LookedAt look_at(const std::string& open_path, bool open_anyway) {
  LookedAt f;
  struct stat st = {};
  if (stat(open_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return f;
  f.identity = FileIdentity{st.st_dev, st.st_ino};
  std::optional<std::string> id = known_ids().find(known_file(st));
  if (id) f.build_id = std::move(*id);
  // Opened as the file stat named, else (replaced meanwhile) none.
  if (!id || open_anyway) f.opened = open_regular(open_path, Links::kernel, nullptr, f.identity);
  f.parse = !id && f.opened;
  return f;
}

}  // namespace

std::optional<ProcessMaps> ProcessMaps::read(uint32_t pid, const std::string& proc, int* error,
                                             const BuildIdParser& parse_id, OpenedFiles* opened) {
  const std::string dir = proc + "/" + std::to_string(pid);
  // The access check is at open (proc_maps_open): its errno says which.
  const std::optional<std::string> text = read_file(dir + "/maps");
  if (!text) {
    if (error) *error = errno;
    return std::nullopt;
  }
  ProcessMaps m = parse(*text);
  std::set<std::string> wanted;
  if (opened)
    for (uint64_t addr : opened->at)
      if (const MappedFile* f = m.find(addr)) wanted.insert(f->path);
  // One look per file, however many mappings it has; all before any parse.
  std::unordered_map<std::string, LookedAt> files;
  for (MappedFile& file : m.files_) {
    char range[64];
    snprintf(range, sizeof(range), "%" PRIx64 "-%" PRIx64, file.start, file.end);
    file.open_path = dir + "/map_files/" + range;
    if (!files.count(file.path))
      files.emplace(file.path, look_at(file.open_path, wanted.count(file.path) != 0));
  }
  for (auto& [path, f] : files) {
    if (f.parse) f.build_id = parse_build_id(*f.opened, parse_id);
    if (f.opened && wanted.count(path))
      opened->by_path[path] = std::make_shared<const UniqueFd>(std::move(f.opened->fd));
  }
  for (MappedFile& file : m.files_) {
    LookedAt& f = files.at(file.path);
    if (f.identity.known() && f.parse && file.inode)  // a new file: known by its maps line too
      known_ids().add_mapped(file.dev, file.inode, f.build_id), f.parse = false;
    // Gone before its look: the id read before, one binary rather than a second without an id.
    if (!f.identity.known() && f.build_id.empty() && file.inode)
      f.build_id = known_ids().mapped(file.dev, file.inode);
    std::tie(file.build_id, file.identity) = std::tie(f.build_id, f.identity);
  }
  return m;
}

namespace {

// The range of `ranges` (sorted by start) that holds addr, or nullptr.
template <typename Range>
const Range* holding(const std::vector<Range>& ranges, uint64_t addr) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), addr,
                             [](uint64_t a, const Range& r) { return a < r.start; });
  if (it == ranges.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

}  // namespace

const CodeRange* ProcessMaps::find_other_code(uint64_t addr) const {
  return holding(other_code_, addr);
}

const MappedFile* ProcessMaps::find(uint64_t addr) const { return holding(files_, addr); }

}  // namespace stackmapd

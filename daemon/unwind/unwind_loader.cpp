// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/unwind_loader.h"

#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

namespace {

// The vdso as a file: every process of this kernel and ABI maps the same
// image, ours included, so its table is built once from our own copy.
std::shared_ptr<const CfiTable> build_vdso_table() {
  const std::optional<ProcessMaps> self = ProcessMaps::read(static_cast<uint32_t>(getpid()));
  if (!self) return nullptr;
  for (const CodeRange& r : self->other_code()) {
    if (r.name != "[vdso]") continue;
    UniqueFd fd(memfd_create("stackmapd-vdso", MFD_CLOEXEC));
    const size_t len = r.end - r.start;
    if (!fd ||
        write(fd.get(), reinterpret_cast<const void*>(r.start), len) != static_cast<ssize_t>(len))
      return nullptr;
    return std::make_shared<const CfiTable>(
        build_cfi_table("/proc/self/fd/" + std::to_string(fd.get())));
  }
  return nullptr;
}

smt_unwind_file_key file_key(uint64_t ino, uint32_t dev) {
  smt_unwind_file_key k{};
  k.ino = ino;
  k.dev = dev;
  return k;
}

smt_unwind_mapping mapping(uint64_t start, uint64_t end, uint64_t ino, uint32_t dev,
                           uint64_t pgoff) {
  return smt_unwind_mapping{start, end, ino, dev,
                            static_cast<uint32_t>(pgoff >> SMT_UNWIND_PAGE_SHIFT)};
}

}  // namespace

UnwindLoader::UnwindLoader(const UnwindMapFds& fds, uint32_t max_rows, CfiBuilder build,
                           std::string proc, std::function<uint64_t()> clock)
    : maps_(fds),
      wanted_fd_(fds.wanted),
      rows_(max_rows),
      tables_(std::move(build)),
      proc_(std::move(proc)),
      clock_(std::move(clock)) {}

UnwindCounts UnwindLoader::counts() const {
  UnwindCounts c = counts_;
  const RowCounts r = rows_.counts();
  c.tables = r.tables;
  c.rows = r.rows;
  c.max_rows = r.max_rows;
  c.rows_full = r.rows_full;
  c.tables_evicted = r.tables_evicted;
  return c;
}

uint64_t UnwindLoader::last_use(const Table& t) const {
  uint64_t used = 0;
  for (const auto& [key, table] : files_)
    if (table == t) used = std::max(used, maps_.file_used(file_key(key.first, key.second)));
  return used;
}

bool UnwindLoader::place(const Key& key, const Table& t, uint64_t pc_off) {
  const uint64_t now = clock_();
  const std::optional<RowAllocator::Placement> p =
      rows_.place(t, now, [this](const Table& table) { return last_use(table); });
  // The files of evicted tables leave the walks before their rows are written over.
  const std::vector<Table> evicted = rows_.take_evicted();
  for (const Table& gone : evicted)
    for (auto it = files_.begin(); it != files_.end();) {
      if (it->second != gone) {
        ++it;
        continue;
      }
      maps_.forget_file(file_key(it->first.first, it->first.second));
      it = files_.erase(it);
    }
  if (!evicted.empty()) maps_.wait_for_walks();
  if (!p) {
    if (!said_full_)
      spdlog::warn(
          "unwind tables: the {} KiB of rows are full of tables in use; a binary's table that "
          "does not fit gets frame pointers only: raise --unwind-memory",
          rows_.counts().max_rows * sizeof(smt_unwind_row) >> 10);
    said_full_ = true;
    return false;
  }
  if (p->fresh && !maps_.write_rows(p->first, t->rows)) return false;
  smt_unwind_file f{pc_off, p->first, static_cast<uint32_t>(t->rows.size()), now};
  if (!maps_.write_file(file_key(key.first, key.second), f)) return false;
  files_[key] = t;
  return true;
}

bool UnwindLoader::load_file(const Key& key, const std::string& open_path, uint64_t pgoff) {
  if (files_.count(key)) return true;
  if (no_table_.count(key) || open_path.empty()) return false;
  Table t;
  try {
    t = tables_.get(open_path);
  } catch (const Error& e) {
    spdlog::debug("{}", e.what());
    struct stat st;
    if (lstat(open_path.c_str(), &st) != 0) {
      // Its process exited meanwhile: the next one to meet the file asks again.
      maps_.forget_file(file_key(key.first, key.second));
      ++counts_.asked_gone;
      return false;
    }
    // No CFI (frame pointers then), not x86_64: once per file.
    no_table_.emplace(key, e.what());
    ++counts_.no_table;
    return false;
  }
  const std::optional<uint64_t> pc_off = t->pc_off(pgoff);
  if (!pc_off || t->rows.empty() || t->rows.size() > SMT_UNWIND_FILE_ROWS_MAX) {
    no_table_.emplace(key, "no rows for its code");
    ++counts_.no_table;
    return false;
  }
  return place(key, t, *pc_off);
}

bool UnwindLoader::load_vdso() {
  if (vdso_) return *vdso_;
  Table t;
  try {
    t = build_vdso_table();
  } catch (const Error& e) {
    spdlog::debug("{}", e.what());
  }
  const std::optional<uint64_t> pc_off = t ? t->pc_off(0) : std::nullopt;
  vdso_ = pc_off && !t->rows.empty() && place({SMT_UNWIND_VDSO_INO, 0}, t, *pc_off);
  return *vdso_;
}

void UnwindLoader::want(const smt_unwind_wanted& w) {
  ++counts_.asked;
  const smt_unwind_mapping& m = w.mapping;
  if (m.ino == SMT_UNWIND_VDSO_INO && m.dev == 0) {
    load_vdso();
    return;
  }
  char range[64];
  snprintf(range, sizeof(range), "/map_files/%llx-%llx", static_cast<unsigned long long>(m.start),
           static_cast<unsigned long long>(m.end));
  const std::string path = proc_ + "/" + std::to_string(w.tgid) + range;
  // Asked before its table came in some other way (another process's maps).
  if (files_.count({m.ino, m.dev}) || no_table_.count({m.ino, m.dev})) return;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    // The asking process exited (or unmapped it): not the file's fault. The
    // next process to meet the file asks again.
    maps_.forget_file(file_key(m.ino, m.dev));
    ++counts_.asked_gone;
    return;
  }
  load_file({m.ino, m.dev}, path, uint64_t{m.pgoff} << SMT_UNWIND_PAGE_SHIFT);
}

bool UnwindLoader::load(uint32_t pid, uint32_t exec_id, const ProcessMaps& maps) {
  std::vector<smt_unwind_mapping> all;
  for (const MappedFile& f : maps.files()) {
    load_file({f.inode, f.dev}, f.open_path, f.pgoff);
    all.push_back(mapping(f.start, f.end, f.inode, f.dev, f.pgoff));
  }
  for (const CodeRange& r : maps.other_code()) {
    const bool vdso = r.name == "[vdso]" && load_vdso();
    all.push_back(mapping(r.start, r.end, vdso ? SMT_UNWIND_VDSO_INO : 0, 0, 0));
  }
  // Code the kernel side listed since the maps were read (a library
  // dlopen()ed meanwhile) stays.
  const std::optional<smt_unwind_process> listed = maps_.read_process(pid);
  if (listed && (exec_id == kAnyExec || (listed->flags & SMT_UNWIND_ANY_EXEC) ||
                 listed->exec_id == static_cast<uint16_t>(exec_id))) {
    const size_t from_maps = all.size();
    for (uint32_t i = 0; i < std::min<uint32_t>(listed->nr, SMT_UNWIND_MAPPINGS_MAX); ++i) {
      const smt_unwind_mapping& m = listed->mappings[i];
      if (std::none_of(
              all.begin(), all.begin() + static_cast<long>(from_maps),
              [&](const smt_unwind_mapping& o) { return o.start < m.end && m.start < o.end; }))
        all.push_back(m);
    }
  }
  std::sort(all.begin(), all.end(), [](const smt_unwind_mapping& a, const smt_unwind_mapping& b) {
    return a.start < b.start;
  });
  smt_unwind_process p = {};
  p.exec_id = static_cast<uint16_t>(exec_id);
  if (exec_id == kAnyExec) p.flags |= SMT_UNWIND_ANY_EXEC;
  if (all.size() > SMT_UNWIND_MAPPINGS_MAX) {
    // Past the list, code is found by frame pointers and never cut as data.
    p.flags |= SMT_UNWIND_UNLISTED_CODE;
    ++counts_.mappings_over;
  }
  p.nr = static_cast<uint32_t>(std::min<size_t>(all.size(), SMT_UNWIND_MAPPINGS_MAX));
  std::copy_n(all.begin(), p.nr, p.mappings);
  if (!maps_.write_process(pid, p)) return false;
  ++counts_.processes;
  return true;
}

}  // namespace stackmapd

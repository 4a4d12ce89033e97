// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/unwind_loader.h"

#include <bpf/bpf.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

}  // namespace

UnwindLoader::UnwindLoader(int rows_fd, uint32_t max_rows, int procs_fd, CfiBuilder build)
    : rows_(rows_fd, size_t{max_rows} * sizeof(smt_unwind_row), PROT_READ | PROT_WRITE, 0,
            "the unwind rows map (BPF_F_MMAPABLE arrays need Linux 5.5)"),
      max_rows_(max_rows),
      procs_fd_(procs_fd),
      tables_(std::move(build)) {
  counts_.max_rows = max_rows;
  if (max_rows) free_.emplace(0, max_rows);
}

std::optional<uint32_t> UnwindLoader::take_rows(uint32_t n) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const auto [first, len] = *it;
    if (len < n) continue;
    free_.erase(it);
    if (len > n) free_.emplace(first + n, len - n);
    return first;
  }
  return std::nullopt;
}

std::optional<uint32_t> UnwindLoader::place(const std::shared_ptr<const CfiTable>& t,
                                            const Tables& loading) {
  if (auto it = placed_.find(t.get()); it != placed_.end()) return it->second.first;
  const size_t n = t->rows.size();
  std::optional<uint32_t> first =
      n <= max_rows_ ? take_rows(static_cast<uint32_t>(n)) : std::nullopt;
  if (!first && n <= max_rows_ && reclaim(loading) >= n)
    first = take_rows(static_cast<uint32_t>(n));
  if (!first) {
    ++counts_.rows_full;
    return std::nullopt;
  }
  std::memcpy(rows_.as<smt_unwind_row>() + *first, t->rows.data(), n * sizeof(smt_unwind_row));
  counts_.rows += n;
  ++counts_.tables;
  placed_.emplace(t.get(), Placed{*first, 0});
  return first;
}

void UnwindLoader::set_users(uint32_t pid, Tables used) {
  // Counted before the old list is let go: a table in both keeps its place.
  for (const auto& t : used) ++placed_.at(t.get()).users;
  auto it = users_.find(pid);
  if (it != users_.end()) {
    for (const auto& t : it->second) --placed_.at(t.get()).users;
    users_.erase(it);
  }
  if (!used.empty()) users_.emplace(pid, std::move(used));
}

uint64_t UnwindLoader::reclaim(const Tables& loading) {
  std::vector<uint32_t> gone;
  // A zombie still answers kill(): its rows wait until it is reaped.
  for (const auto& [pid, tables] : users_)
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) gone.push_back(pid);
  for (const uint32_t pid : gone) {
    bpf_map_delete_elem(procs_fd_, &pid);  // may be evicted already: either way, gone
    set_users(pid, {});
  }
  // The tables themselves are held by users_ and the cache: a table freed
  // here keeps its address until placed_ forgets it, below.
  uint64_t freed = 0;
  for (auto it = placed_.begin(); it != placed_.end();) {
    if (it->second.users || std::any_of(loading.begin(), loading.end(),
                                        [&](const auto& t) { return t.get() == it->first; })) {
      ++it;
      continue;
    }
    const auto n = static_cast<uint32_t>(it->first->rows.size());
    auto [run, added] = free_.emplace(it->second.first, n);
    // Merge with the neighbours: a later big file needs one run.
    if (auto next = std::next(run);
        next != free_.end() && run->first + run->second == next->first) {
      run->second += next->second;
      free_.erase(next);
    }
    if (run != free_.begin()) {
      auto prev = std::prev(run);
      if (prev->first + prev->second == run->first) {
        prev->second += run->second;
        free_.erase(run);
      }
    }
    freed += n;
    counts_.rows -= n;
    --counts_.tables;
    ++counts_.tables_freed;
    it = placed_.erase(it);
  }
  return freed;
}

smt_unwind_mapping UnwindLoader::file_mapping(const MappedFile& f, Tables& used) {
  smt_unwind_mapping m = {f.start, f.end, 0, 0, 0};
  const std::string key = f.build_id.empty() ? f.path : f.build_id;
  if (failed_.count(key)) return m;
  std::shared_ptr<const CfiTable> t;
  try {
    t = tables_.get(f.open_path, f.build_id);
  } catch (const Error& e) {
    // No CFI (frame pointers then), not x86_64, gone: once per file.
    spdlog::debug("{}", e.what());
    failed_.insert(key);
    ++counts_.no_table;
    return m;
  }
  const std::optional<uint64_t> bias = t->pc_bias(f.start, f.pgoff);
  if (!bias || t->rows.empty()) return m;
  const std::optional<uint32_t> first = place(t, used);
  if (!first) return m;
  m.pc_bias = *bias;
  m.first_row = *first;
  m.nr_rows = static_cast<uint32_t>(t->rows.size());
  used.push_back(t);
  return m;
}

smt_unwind_mapping UnwindLoader::vdso_mapping(const CodeRange& r, Tables& used) {
  smt_unwind_mapping m = {r.start, r.end, 0, 0, 0};
  if (r.name != "[vdso]") return m;  // JIT code: frame pointers
  if (!vdso_tried_) {
    vdso_tried_ = true;
    try {
      vdso_ = build_vdso_table();
    } catch (const Error& e) {
      spdlog::debug("{}", e.what());
    }
  }
  const std::optional<uint64_t> bias = vdso_ ? vdso_->pc_bias(r.start, 0) : std::nullopt;
  const std::optional<uint32_t> first = bias ? place(vdso_, used) : std::nullopt;
  if (!first) return m;
  m.pc_bias = *bias;
  m.first_row = *first;
  m.nr_rows = static_cast<uint32_t>(vdso_->rows.size());
  used.push_back(vdso_);
  return m;
}

bool UnwindLoader::load(uint32_t pid, uint32_t exec_id, const ProcessMaps& maps) {
  // The previous entry of the process keeps its rows until this one
  // replaces it (set_users below): the walker never reads freed rows.
  std::vector<smt_unwind_mapping> all;
  Tables used;
  for (const MappedFile& f : maps.files()) all.push_back(file_mapping(f, used));
  for (const CodeRange& r : maps.other_code()) all.push_back(vdso_mapping(r, used));
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
  if (bpf_map_update_elem(procs_fd_, &pid, &p, BPF_ANY) != 0) return false;
  set_users(pid, std::move(used));
  ++counts_.processes;
  return true;
}

}  // namespace stackmapd

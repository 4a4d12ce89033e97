// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/unwind_loader.h"

#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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
    : maps_(rows_fd, max_rows, procs_fd), rows_(max_rows), tables_(std::move(build)) {}

UnwindCounts UnwindLoader::counts() const {
  UnwindCounts c = counts_;
  const RowCounts r = rows_.counts();
  c.tables = r.tables;
  c.rows = r.rows;
  c.max_rows = r.max_rows;
  c.rows_full = r.rows_full;
  c.tables_freed = r.tables_freed;
  return c;
}

std::optional<uint32_t> UnwindLoader::place(const std::shared_ptr<const CfiTable>& t,
                                            const Tables& loading) {
  const std::optional<RowAllocator::Placement> p = rows_.place(t, loading);
  // The entries of the processes gone go before their rows are written over.
  for (const uint32_t pid : rows_.take_gone()) maps_.delete_process(pid);
  if (!p) return std::nullopt;
  if (p->fresh) maps_.write_rows(p->first, t->rows);
  return p->first;
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
  if (!maps_.write_process(pid, p)) return false;
  rows_.set_users(pid, std::move(used));
  ++counts_.processes;
  return true;
}

}  // namespace stackmapd

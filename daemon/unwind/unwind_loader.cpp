// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/unwind_loader.h"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

UnwindLoader::UnwindLoader(int rows_fd, uint32_t max_rows, int procs_fd)
    : rows_(rows_fd, size_t{max_rows} * sizeof(smt_unwind_row), PROT_READ | PROT_WRITE, 0,
            "the unwind rows map (BPF_F_MMAPABLE arrays need Linux 5.5)"),
      max_rows_(max_rows),
      procs_fd_(procs_fd) {
  counts_.max_rows = max_rows;
}

std::optional<uint32_t> UnwindLoader::place(const std::shared_ptr<const CfiTable>& t) {
  if (auto it = placed_.find(t.get()); it != placed_.end()) return it->second;
  const size_t n = t->rows.size();
  if (n > max_rows_ - counts_.rows) {
    ++counts_.rows_full;
    return std::nullopt;
  }
  const auto first = static_cast<uint32_t>(counts_.rows);
  std::memcpy(rows_.as<smt_unwind_row>() + first, t->rows.data(), n * sizeof(smt_unwind_row));
  counts_.rows += n;
  ++counts_.tables;
  placed_.emplace(t.get(), first);
  return first;
}

smt_unwind_mapping UnwindLoader::file_mapping(const MappedFile& f) {
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
  const std::optional<uint32_t> first = place(t);
  if (!first) return m;
  m.pc_bias = *bias;
  m.first_row = *first;
  m.nr_rows = static_cast<uint32_t>(t->rows.size());
  return m;
}

smt_unwind_mapping UnwindLoader::vdso_mapping(const CodeRange& r) {
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
  const std::optional<uint32_t> first = bias ? place(vdso_) : std::nullopt;
  if (!first) return m;
  m.pc_bias = *bias;
  m.first_row = *first;
  m.nr_rows = static_cast<uint32_t>(vdso_->rows.size());
  return m;
}

bool UnwindLoader::load(uint32_t pid, uint32_t exec_id, const ProcessMaps& maps) {
  std::vector<smt_unwind_mapping> all;
  for (const MappedFile& f : maps.files()) all.push_back(file_mapping(f));
  for (const CodeRange& r : maps.other_code()) all.push_back(vdso_mapping(r));
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
  ++counts_.processes;
  return true;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/user_stacks.h"

#include <array>
#include <string_view>

#include "stackmapd/abi.h"

namespace stackmapd {

bool reaches_entry_point(const UserStackSet&, const UserStack& s) {
  if (s.frames.empty() || s.frames.back().symbols.empty()) return false;
  static constexpr std::array<std::string_view, 8> kEntries = {"_start",
                                                               "__libc_start_main",
                                                               "__libc_start_call_main",
                                                               "start_thread",
                                                               "clone",
                                                               "clone3",
                                                               "thread_start",
                                                               "__clone"};
  const std::string& outer = s.frames.back().symbols.back();
  const std::string_view name = std::string_view(outer).substr(0, outer.rfind("+0x"));
  for (std::string_view e : kEntries)
    if (name == e) return true;
  return false;
}

UserStackCollector::UserStackCollector(const UserTable& table, std::string proc)
    : table_(table), proc_(std::move(proc)), seen_(table.enabled() ? table.table_size() : 0, 0) {
  set_.enabled = table.enabled();
}

UserStackCounts UserStackCollector::counts() const {
  UserStackCounts c = counts_;
  c.binaries_evicted = symbolizer_.evictions();
  return c;
}

void UserStackCollector::clear() {
  std::fill(seen_.begin(), seen_.end(), 0);
  set_.stacks.clear();
  counts_.gone = counts_.truncated = 0;
}

const ProcessMaps* UserStackCollector::maps_of(uint32_t pid, uint32_t exec_id, bool reread) {
  const uint64_t key = uint64_t{exec_id} << 32 | pid;
  for (auto it = maps_.begin(); it != maps_.end(); ++it)
    if (it->first == key) {
      if (reread) {
        std::optional<ProcessMaps> fresh = ProcessMaps::read(pid, proc_);
        if (fresh) it->second = std::move(*fresh);
      }
      maps_.splice(maps_.begin(), maps_, it);
      return &maps_.front().second;
    }
  std::optional<ProcessMaps> m = ProcessMaps::read(pid, proc_);
  if (!m) return nullptr;
  if (maps_.size() >= kMaxProcesses) {
    maps_.pop_back();
    ++counts_.processes_evicted;
  }
  maps_.emplace_front(key, std::move(*m));
  return &maps_.front().second;
}

int32_t UserStackCollector::binary_index(const MappedFile& f) {
  auto [it, added] = binary_ids_.emplace(std::make_pair(f.path, f.build_id),
                                         static_cast<int32_t>(set_.binaries.size()));
  if (added) set_.binaries.push_back(UserBinary{f.path, f.build_id});
  open_paths_[it->second] = f.open_path;
  return it->second;
}

void UserStackCollector::capture(uint32_t id) {
  seen_[id] = 1;
  std::optional<UserStackIps> ips = table_.stack(id);
  if (!ips) return;
  UserStack s;
  s.pid = ips->pid;
  const ProcessMaps* maps = maps_of(ips->pid, ips->exec_id, false);
  // Code mapped since the maps were read (dlopen): read them again, once.
  bool reread = false;
  for (size_t i = 0; i < ips->ips.size(); ++i) {
    UserFrame f;
    f.addr = ips->ips[i];
    const MappedFile* file = maps ? maps->find(f.addr) : nullptr;
    if (!file && maps && !reread) {
      reread = true;
      maps = maps_of(ips->pid, ips->exec_id, true);
      file = maps ? maps->find(f.addr) : nullptr;
    }
    if (file) {
      f.binary = binary_index(*file);
      f.file_offset = f.addr - file->start + file->pgoff;
      const std::string& key = file->build_id.empty() ? file->path : file->build_id;
      UserSymbolizer::Result r = symbolizer_.resolve(key, file->open_path, f.file_offset, i > 0);
      f.elf_addr = r.elf_addr;
      f.symbols = std::move(r.symbols);
      f.srcline = std::move(r.srcline);
    }
    s.frames.push_back(std::move(f));
  }
  if (!maps) ++counts_.gone;
  s.truncated = ips->ips.size() >= SMT_MAX_USER_DEPTH || !reaches_entry_point(set_, s);
  if (s.truncated) ++counts_.truncated;
  set_.stacks.emplace(id, std::move(s));
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/user_capture.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "stackmapd/abi.h"

namespace stackmapd {

namespace {

// "__libc_start_main@@GLIBC_2.34+0x85" -> "__libc_start_main".
std::string outer_function(const UserFrame& f) {
  if (f.symbols.empty()) return {};
  const std::string name = user_function_name(f.symbols.back());
  return name.substr(0, name.find('@'));
}

}  // namespace

bool reaches_entry_point(const UserStack& s) {
  if (s.frames.empty()) return false;
  static constexpr std::array<std::string_view, 10> kEntries = {
      "_start", "__libc_start_main", "__libc_start_call_main", "start_thread",  "clone", "__clone",
      "clone3", "__clone3",          "thread_start",           "__thread_start"};
  // Go's stacks end in no C entry point: a goroutine's in runtime.goexit
  // (its fake return address, runtime.main's caller), a thread's system
  // stack in runtime.mstart, the first thread's in runtime.rt0_go (the
  // assembly ones named with ".abi0").
  static constexpr std::array<std::string_view, 4> kGoRoots = {"runtime.goexit", "runtime.main",
                                                               "runtime.mstart", "runtime.rt0_go"};
  const std::string outer = outer_function(s.frames.back());
  const std::string_view go =
      std::string_view(outer).substr(0, outer.ends_with(".abi0") ? outer.size() - 5 : outer.size());
  for (std::string_view e : kGoRoots)
    if (go == e) return true;
  for (std::string_view e : kEntries)
    if (outer == e) return true;
  // A stripped program's _start has no name; it is the one caller of
  // __libc_start_main, and the walk ends there.
  return s.frames.size() >= 2 &&
         outer_function(s.frames[s.frames.size() - 2]) == "__libc_start_main";
}

UserCapture::UserCapture(std::string proc, std::unique_ptr<UnwindLoader> unwind)
    : proc_(std::move(proc)) {
  if (unwind) unwind_ = std::make_unique<UnwindThread>(std::move(unwind));
}

const ProcessMaps* UserCapture::maps_of(uint32_t pid, uint32_t exec_id, bool reread, bool& read,
                                        ProcessMaps::OpenedFiles& opened) {
  const uint64_t key = uint64_t{exec_id} << 32 | pid;
  for (auto it = maps_.begin(); it != maps_.end(); ++it)
    if (it->first == key) {
      if (reread) {
        std::optional<ProcessMaps> fresh =
            ProcessMaps::read(pid, proc_, nullptr, sandboxed_build_ids(ids_), &opened);
        if (fresh) {
          it->second = std::move(*fresh);
          read = true;  // code mapped since (dlopen): its unwind tables too
        }
      }
      maps_.splice(maps_.begin(), maps_, it);
      return &maps_.front().second;
    }
  int error = 0;
  std::optional<ProcessMaps> m =
      ProcessMaps::read(pid, proc_, &error, sandboxed_build_ids(ids_), &opened);
  if (!m) {
    say_if_denied(proc_ + "/" + std::to_string(pid) + "/maps", error);
    return nullptr;
  }
  if (maps_.size() >= kMaxProcesses) {
    if (auto it = perf_maps_.find(maps_.back().first); it != perf_maps_.end()) drop_perf_map(it);
    maps_.pop_back();
    ++processes_evicted_;
  }
  maps_.emplace_front(key, std::move(*m));
  read = true;  // the first sight of this process (or of its exec): its unwind tables too
  return &maps_.front().second;
}

void UserCapture::say_if_denied(const std::string& path, int error) {
  if ((error != EACCES && error != EPERM) || said_denied_) return;
  said_denied_ = true;
  spdlog::warn(
      "--user-stacks: cannot open {}: {}: the binaries of other users' processes need "
      "CAP_SYS_PTRACE and CAP_CHECKPOINT_RESTORE (the shipped unit has both); without them "
      "their user stacks have no unwind tables or names",
      path, std::strerror(error));
}

int32_t UserCapture::binary_index(const MappedFile& f) {
  auto [it, added] = binary_ids_.emplace(std::make_pair(f.path, f.build_id),
                                         static_cast<int32_t>(binaries_.size()));
  if (added) binaries_.push_back(UserBinary{f.path, f.build_id, f.identity, f.open_path});
  return it->second;
}

// The symbolizer's cache key: the build id, else the path.
const std::string& UserCapture::key_of(int32_t binary) const {
  const UserBinary& b = binaries_[binary];
  return b.build_id.empty() ? b.path : b.build_id;
}

std::shared_ptr<const UniqueFd> UserCapture::open_file(int32_t binary, const MappedFile& f,
                                                       const ProcessMaps::OpenedFiles& opened) {
  auto it = open_files_.find(binary);
  if (it != open_files_.end()) return it->second;
  if (open_files_.size() >= kMaxOpenFiles) return nullptr;
  auto at_read = opened.by_path.find(f.path);
  auto fd = at_read != opened.by_path.end()
                ? at_read->second
                : std::make_shared<const UniqueFd>(open(f.open_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!*fd) {
    say_if_denied(f.open_path, errno);
    return nullptr;
  }
  open_files_.emplace(binary, fd);
  return fd;
}

std::optional<std::string> UserCapture::jit_name(uint64_t key, uint32_t pid, uint64_t addr,
                                                 bool is_return, bool& reread) {
  auto [it, added] = perf_maps_.try_emplace(key);
  bool changed = added;
  if (added) it->second = read_perf_map(pid);
  std::optional<std::string> name = it->second ? it->second->find(addr, is_return) : std::nullopt;
  // Code compiled since the map was read: read it again, once per stack.
  if (!name && !added && !reread) {
    reread = true;
    if (std::optional<PerfMap> fresh = read_perf_map(pid)) {
      perf_map_bytes_ -= it->second ? it->second->bytes() : 0;
      it->second = std::move(fresh);
      changed = true;
      name = it->second->find(addr, is_return);
    }
  }
  if (changed) {
    perf_map_bytes_ += it->second ? it->second->bytes() : 0;
    // Past the budget, the other processes' maps go first (read again when
    // their JIT code is next seen), then this one.
    for (auto other = perf_maps_.begin();
         perf_map_bytes_ > kMaxPerfMapBytes && other != perf_maps_.end();)
      other = other->first == key ? std::next(other) : drop_perf_map(other);
    if (perf_map_bytes_ > kMaxPerfMapBytes) drop_perf_map(perf_maps_.find(key));
  }
  return name;
}

std::optional<PerfMap> UserCapture::read_perf_map(uint32_t pid) {
  std::string refused;
  std::optional<PerfMap> m = PerfMap::read(pid, proc_, &refused);
  if (!refused.empty()) {
    // A user can make this happen for every process: the first line says it.
    if (!said_perf_map_refused_)
      spdlog::warn("--user-stacks: {}; its JIT frames stay unnamed (said once)", refused);
    else spdlog::debug("--user-stacks: {}", refused);
    said_perf_map_refused_ = true;
  }
  return m;
}

UserCapture::PerfMaps::iterator UserCapture::drop_perf_map(PerfMaps::iterator it) {
  perf_map_bytes_ -= it->second ? it->second->bytes() : 0;
  return perf_maps_.erase(it);
}

std::vector<UserBinary> UserCapture::binaries(size_t from) const {
  std::lock_guard lock(mu_);
  return {binaries_.begin() + std::min(from, binaries_.size()), binaries_.end()};
}

size_t UserCapture::binary_count() const {
  std::lock_guard lock(mu_);
  return binaries_.size();
}

uint64_t UserCapture::processes_evicted() const {
  std::lock_guard lock(mu_);
  return processes_evicted_;
}

CapturedStack UserCapture::capture(const UserStackIps& ips) {
  std::lock_guard lock(mu_);
  CapturedStack c;
  c.stack.pid = ips.pid;
  bool read = false;
  // The stack's files, opened as the maps are read: the process may exit
  // while a new file's build id is parsed.
  ProcessMaps::OpenedFiles opened{ips.ips, {}};
  const ProcessMaps* maps = maps_of(ips.pid, ips.exec_id, false, read, opened);
  // Code mapped since the maps were read (dlopen): read them again, once.
  bool reread = false, perf_map_reread = false;
  for (uint64_t addr : ips.ips) {
    UserFrame f;
    f.addr = addr;
    const MappedFile* file = maps ? maps->find(addr) : nullptr;
    if (!file && maps && !reread && !maps->find_other_code(addr)) {
      reread = true;
      maps = maps_of(ips.pid, ips.exec_id, true, read, opened);
      file = maps ? maps->find(addr) : nullptr;
    }
    if (!file && maps) {
      const CodeRange* code = maps->find_other_code(addr);
      // A caller that is no code (a frame-pointer walk through code without
      // frame pointers reads data): the stack ends before it, never with it.
      if (!code && !c.stack.frames.empty()) break;
      if (code && code->name == "[vdso]") f.symbols = {"[vdso]"};
      if (code && code->name.empty()) {
        if (auto name = jit_name(uint64_t{ips.exec_id} << 32 | ips.pid, ips.pid, addr,
                                 !c.stack.frames.empty(), perf_map_reread))
          f.symbols = {std::move(*name)};
      }
    }
    if (file) {
      f.binary = binary_index(*file);
      f.file_offset = addr - file->start + file->pgoff;
      // /proc/PID/map_files/... opens only while the process lives.
      auto [at, added] = c.files.try_emplace(f.binary, CapturedStack::File{file->open_path, {}});
      if (added && !held_.count(key_of(f.binary)))
        at->second.fd = open_file(f.binary, *file, opened);
    }
    c.stack.frames.push_back(std::move(f));
  }
  c.gone = maps == nullptr;
  // The tables on their own thread: building a new binary's takes up to
  // 150 ms (libc's), which the next processes, if short-lived, do not have.
  if (read && unwind_ && maps) unwind_->load(ips.pid, ips.exec_id, *maps);
  return c;
}

UserStack UserCapture::symbolize(CapturedStack&& c) {
  UserStack s = std::move(c.stack);
  // One call to the parser per binary of the stack, its frames together.
  std::map<int32_t, std::vector<size_t>> by_binary;
  for (size_t i = 0; i < s.frames.size(); ++i)
    if (s.frames[i].binary >= 0) by_binary[s.frames[i].binary].push_back(i);
  for (const auto& [binary, at_frames] : by_binary) {
    const CapturedStack::File& at = c.files[binary];
    std::string key;
    {
      std::lock_guard lock(mu_);
      key = key_of(binary);
    }
    // Frames named before (any process's: an offset of a binary names the
    // same everywhere) are not asked again.
    std::vector<size_t> asked;
    std::vector<SandboxedParser::Frame> frames;
    for (size_t i : at_frames) {
      UserFrame& f = s.frames[i];
      auto known = known_names_.find(NameKey{key, f.file_offset, i > 0});
      if (known == known_names_.end()) {
        asked.push_back(i);
        frames.push_back({f.file_offset, i > 0});
        continue;
      }
      ++names_reused_;
      f.elf_addr = known->second.elf_addr;
      f.symbols = known->second.symbols;
      f.srcline = known->second.srcline;
    }
    // Read through the descriptor kept open: the process may be gone. A
    // binary it could not open stays unnamed in this stack only.
    const int fd = at.fd && *at.fd ? at.fd->get() : -1;
    std::optional<std::vector<UserSymbolizer::Result>> named;
    if (!frames.empty()) named = names_.symbolize(key, fd, frames);
    {
      std::lock_guard lock(mu_);
      open_files_.erase(binary);  // held by the parser now (or unreadable)
      if (names_.holds(key)) held_.insert(key);
      else held_.erase(key);  // let go, or its helper restarted: open it again at capture
    }
    if (!named) continue;
    if (known_names_.size() + asked.size() > kMaxKnownNames) known_names_.clear();
    for (size_t k = 0; k < asked.size(); ++k) {
      UserFrame& f = s.frames[asked[k]];
      UserSymbolizer::Result& r = (*named)[k];
      known_names_.emplace(NameKey{key, f.file_offset, asked[k] > 0}, r);
      f.elf_addr = r.elf_addr;
      f.symbols = std::move(r.symbols);
      f.srcline = std::move(r.srcline);
    }
  }
  s.truncated = s.frames.size() >= SMT_MAX_USER_DEPTH || !reaches_entry_point(s);
  return s;
}

}  // namespace stackmapd

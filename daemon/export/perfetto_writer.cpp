// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/perfetto_writer.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "daemon/export/utf8_text.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

// Field numbers of Perfetto's protos (protos/perfetto/trace/).
namespace pf {
enum Trace : uint32_t { kPacket = 1 };
enum TracePacket : uint32_t {
  kProcessTree = 2,
  kTimestamp = 8,
  kTrustedPacketSequenceId = 10,
  kInternedData = 12,
  kSequenceFlags = 13,
  kTimestampClockId = 58,
  kPerfSample = 66,
  kFirstPacketOnSequence = 87,
};
enum SequenceFlags : uint64_t { kIncrementalStateCleared = 1, kNeedsIncrementalState = 2 };
enum InternedData : uint32_t {
  kFunctionNames = 5,
  kFrames = 6,
  kCallstacks = 7,
  kBuildIds = 16,
  kMappingPaths = 17,
  kMappings = 19,
};
enum InternedString : uint32_t { kIid = 1, kStr = 2 };
enum Frame : uint32_t { kFrameIid = 1, kFunctionNameId = 2, kMappingId = 3, kRelPc = 4 };
enum Mapping : uint32_t { kMappingIid = 1, kBuildId = 2, kStart = 4, kEnd = 5, kPathStringIds = 7 };
enum Callstack : uint32_t { kCallstackIid = 1, kFrameIds = 2 };
enum PerfSample : uint32_t { kCpu = 1, kPid = 2, kTid = 3, kSampleCallstackIid = 4, kCpuMode = 5 };
enum ProcessTree : uint32_t { kProcesses = 1, kThreads = 2 };
enum Process : uint32_t { kProcessPid = 1, kCmdline = 3 };
enum Thread : uint32_t { kThreadTid = 1, kThreadName = 2, kTgid = 5 };
constexpr uint64_t kClockBoottime = 6;
constexpr uint64_t kCpuModeKernel = 1;
constexpr uint64_t kCpuModeUser = 2;
}  // namespace pf

constexpr uint32_t kSequenceId = 1;
constexpr uint64_t kKernelMappingIid = 1;

int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

ProtoWriter interned_string(uint64_t iid, std::string_view s) {
  ProtoWriter w;
  w.varint(pf::kIid, iid);
  w.bytes(pf::kStr, s);
  return w;
}

// "1a2b..." -> its bytes: Perfetto takes a 20-byte build id as raw bytes.
std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// The process's arguments, one string each as Perfetto takes them; `fallback`
// once it has exited (or for a kernel thread, which has none).
std::vector<std::string> cmdline_of(uint32_t pid, const std::string& fallback) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  if (args.empty()) args.push_back(fallback);
  return args;
}

}  // namespace

int64_t PerfettoWriter::boottime_offset_ns() {
  // Read between two MONOTONIC reads: the offset to their midpoint is off by
  // at most half the (sub-microsecond) gap.
  const int64_t m1 = clock_ns(CLOCK_MONOTONIC);
  const int64_t b = clock_ns(CLOCK_BOOTTIME);
  const int64_t m2 = clock_ns(CLOCK_MONOTONIC);
  return b - (m1 + (m2 - m1) / 2);
}

PerfettoWriter::PerfettoWriter(const std::string& path, FrameNamer names, const KernelInfo& kernel)
    : path_(path), tmp_(path + ".tmp"), names_(std::move(names)), text_(kernel.text_address) {
  out_ = std::fopen(tmp_.c_str(), "w");
  if (!out_)
    throw Error("cannot write the Perfetto trace to " + tmp_ + ": " + std::strerror(errno) +
                ": choose a writable --perfetto file");
  fchmod(fileno(out_), 0640);  // frames hold raw kernel addresses
  std::setvbuf(out_, nullptr, _IOFBF, 1 << 20);
  // The BPF side stamps --trace records with bpf_ktime_get_ns (CLOCK_MONOTONIC);
  // Perfetto's and Android's traces are on BOOTTIME, which also counts time
  // suspended: add the offset between the two, measured once at the start.
  boottime_offset_ = boottime_offset_ns();

  ProtoWriter interned, mapping;
  mapping.varint(pf::kMappingIid, kKernelMappingIid);
  if (!kernel.build_id.empty()) {
    interned.message(pf::kBuildIds, interned_string(1, unhex(kernel.build_id)));
    mapping.varint(pf::kBuildId, 1);
  }
  interned.message(pf::kMappingPaths, interned_string(1, "[kernel.kallsyms]"));
  mapping.varint(pf::kStart, text_);
  mapping.varint(pf::kEnd, UINT64_MAX);
  mapping.varint(pf::kPathStringIds, 1);
  interned.message(pf::kMappings, mapping);
  ProtoWriter packet;
  packet.varint(pf::kTrustedPacketSequenceId, kSequenceId);
  packet.varint(pf::kSequenceFlags, pf::kIncrementalStateCleared);
  packet.varint(pf::kFirstPacketOnSequence, 1);
  packet.message(pf::kInternedData, interned);
  emit(packet);
}

PerfettoWriter::~PerfettoWriter() {
  if (out_) {
    std::fclose(out_);
    std::remove(tmp_.c_str());
  }
}

void PerfettoWriter::emit(const ProtoWriter& packet) {
  ProtoWriter trace;
  trace.message(pf::kPacket, packet);
  if (std::fwrite(trace.data().data(), 1, trace.size(), out_) != trace.size()) failed_ = true;
}

uint64_t PerfettoWriter::intern_function(const std::string& name, ProtoWriter& interned) {
  auto [fn, added] = functions_.try_emplace(name, functions_.size() + 1);
  if (added) interned.message(pf::kFunctionNames, interned_string(fn->second, utf8_text(name)));
  return fn->second;
}

uint64_t PerfettoWriter::intern_frame(uint64_t ip, ProtoWriter& interned) {
  auto [it, added] = frames_.try_emplace(ip, next_frame_);
  if (!added) return it->second;
  ++next_frame_;
  ProtoWriter frame;
  frame.varint(pf::kFrameIid, it->second);
  if (std::string name = names_ ? names_(ip) : ""; !name.empty())
    frame.varint(pf::kFunctionNameId, intern_function(name, interned));
  frame.varint(pf::kMappingId, kKernelMappingIid);
  frame.varint(pf::kRelPc, ip - text_);
  interned.message(pf::kFrames, frame);
  return it->second;
}

// A user binary's mapping, interned with its first frame; frames in no file
// (or whose process was gone) share one named "[unknown]", as perf names them.
uint64_t PerfettoWriter::intern_user_mapping(const UserStackSet& set, int32_t binary,
                                             ProtoWriter& interned) {
  const bool in_file = binary >= 0 && static_cast<size_t>(binary) < set.binaries.size();
  auto [it, added] = user_mappings_.try_emplace(in_file ? binary : -1, next_mapping_);
  if (!added) return it->second;
  ++next_mapping_;
  ProtoWriter mapping;
  mapping.varint(pf::kMappingIid, it->second);
  if (in_file && !set.binaries[binary].build_id.empty()) {
    interned.message(pf::kBuildIds,
                     interned_string(next_string_, unhex(set.binaries[binary].build_id)));
    mapping.varint(pf::kBuildId, next_string_++);
  }
  // One component, the whole path: Perfetto prefixes each with '/' and
  // drops the doubled one a full path gets.
  interned.message(
      pf::kMappingPaths,
      interned_string(next_string_, in_file ? utf8_text(set.binaries[binary].path) : "[unknown]"));
  mapping.varint(pf::kPathStringIds, next_string_++);
  interned.message(pf::kMappings, mapping);
  return it->second;
}

// One frame per function of `f`, root first: the function, then those
// inlined into it ("name (inlined)", as the flame graphs show them); one
// frame without a name when it did not resolve.
void PerfettoWriter::intern_user_frames(const UserStackSet& set, const UserFrame& f, bool is_return,
                                        std::vector<uint64_t>& frame_ids, ProtoWriter& interned) {
  const bool in_file = f.binary >= 0 && static_cast<size_t>(f.binary) < set.binaries.size();
  const uint64_t mapping = intern_user_mapping(set, f.binary, interned);
  // An ELF address unknown (the binary was unreadable) is the file offset,
  // which it equals in the text of most binaries.
  uint64_t rel_pc = !in_file ? f.addr : f.elf_addr ? f.elf_addr : f.file_offset;
  if (is_return && rel_pc) --rel_pc;
  std::vector<std::string> names;
  if (!f.symbols.empty()) names = user_frame_names(set, f, false);
  if (names.empty()) names.emplace_back();
  for (auto name = names.rbegin(); name != names.rend(); ++name) {
    auto [it, added] = user_frames_.try_emplace({mapping, rel_pc, *name}, next_frame_);
    if (added) {
      ++next_frame_;
      ProtoWriter frame;
      frame.varint(pf::kFrameIid, it->second);
      if (!name->empty()) frame.varint(pf::kFunctionNameId, intern_function(*name, interned));
      frame.varint(pf::kMappingId, mapping);
      frame.varint(pf::kRelPc, rel_pc);
      interned.message(pf::kFrames, frame);
    }
    frame_ids.push_back(it->second);
  }
}

uint64_t PerfettoWriter::intern_callstack(uint64_t key, const std::vector<uint64_t>& ips,
                                          const UserStackSet* set, const UserStack* user,
                                          ProtoWriter& interned) {
  std::vector<std::pair<int32_t, uint64_t>> user_frames;
  if (user)
    for (const UserFrame& f : user->frames) user_frames.emplace_back(f.binary, f.addr);
  // A reset lets an id name another stack: a changed one is interned anew.
  Callstack& known = callstacks_[key];
  if (known.iid && known.ips == ips && known.user == user_frames) return known.iid;
  known = {next_callstack_++, ips, std::move(user_frames)};
  ProtoWriter callstack;
  callstack.varint(pf::kCallstackIid, known.iid);
  std::vector<uint64_t> frame_ids;
  if (user)
    for (size_t i = user->frames.size(); i-- > 0;)
      intern_user_frames(*set, user->frames[i], i > 0, frame_ids, interned);
  for (auto ip = ips.rbegin(); ip != ips.rend(); ++ip)
    frame_ids.push_back(intern_frame(*ip, interned));
  for (uint64_t id : frame_ids) callstack.varint(pf::kFrameIds, id);  // root first, unpacked
  interned.message(pf::kCallstacks, callstack);
  return known.iid;
}

void PerfettoWriter::name_thread(uint32_t pid, uint32_t tid, const std::string& comm, uint64_t ts) {
  auto [it, added] = threads_.try_emplace(tid, comm);
  if (!added && it->second == comm) return;
  it->second = comm;
  ProtoWriter tree;
  if (processes_.insert(pid).second) {
    ProtoWriter process;
    process.varint(pf::kProcessPid, pid);
    for (const std::string& arg : cmdline_of(pid, comm))
      process.bytes(pf::kCmdline, utf8_text(arg));
    tree.message(pf::kProcesses, process);
  }
  ProtoWriter thread;
  thread.varint(pf::kThreadTid, tid);
  thread.bytes(pf::kThreadName, utf8_text(comm));
  thread.varint(pf::kTgid, pid);
  tree.message(pf::kThreads, thread);
  ProtoWriter packet;
  packet.varint(pf::kTimestamp, ts);
  packet.varint(pf::kTimestampClockId, pf::kClockBoottime);
  packet.varint(pf::kTrustedPacketSequenceId, kSequenceId);
  packet.message(pf::kProcessTree, tree);
  emit(packet);
}

void PerfettoWriter::write(const smt_trace_record& r, const std::string& comm,
                           const std::vector<uint64_t>& ips, const UserStackSet* user) {
  const smt_event_record& e = r.event;
  const uint64_t ts = r.ts_ns + boottime_offset_;
  name_thread(e.tgid, e.tid, comm, ts);
  const UserStack* ustack = nullptr;
  if (user)
    if (auto it = user->stacks.find(e.user_stack_id);
        it != user->stacks.end() && !it->second.frames.empty())
      ustack = &it->second;
  ProtoWriter interned, sample, packet;
  sample.varint(pf::kCpu, e.cpu);
  sample.varint(pf::kPid, e.tgid);
  sample.varint(pf::kTid, e.tid);
  if (!ips.empty() || ustack)
    sample.varint(
        pf::kSampleCallstackIid,
        intern_callstack(uint64_t{e.stack_id} << 32 | (ustack ? e.user_stack_id : kNoUserStack),
                         ips, user, ustack, interned));
  // The leaf's mode: kernel frames come innermost.
  sample.varint(pf::kCpuMode, ips.empty() && ustack ? pf::kCpuModeUser : pf::kCpuModeKernel);
  packet.varint(pf::kTimestamp, ts);
  packet.varint(pf::kTimestampClockId, pf::kClockBoottime);
  packet.varint(pf::kTrustedPacketSequenceId, kSequenceId);
  packet.varint(pf::kSequenceFlags, pf::kNeedsIncrementalState);
  if (interned.size()) packet.message(pf::kInternedData, interned);
  packet.message(pf::kPerfSample, sample);
  emit(packet);
  ++samples_;
}

void PerfettoWriter::finish() {
  const bool ok =
      !failed_ && std::fflush(out_) == 0 && !std::ferror(out_) && fsync(fileno(out_)) == 0;
  const int err = errno;
  std::fclose(out_);
  out_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    throw Error("writing the Perfetto trace to " + path_ +
                " failed: " + std::strerror(ok ? errno : err) + ": check free space");
  }
}

FrameNamer kallsyms_namer(const Kallsyms* ksyms) {
  if (!ksyms) return {};
  return [ksyms](uint64_t ip) -> std::string {
    auto m = ksyms->lookup(ip);
    if (!m) return "";
    std::string name(m->name);
    if (!m->module.empty()) name += " [" + std::string(m->module) + "]";
    return name;
  };
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/perfetto_writer.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

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

uint64_t PerfettoWriter::intern_frame(uint64_t ip, ProtoWriter& interned) {
  auto [it, added] = frames_.try_emplace(ip, frames_.size() + 1);
  if (!added) return it->second;
  ProtoWriter frame;
  frame.varint(pf::kFrameIid, it->second);
  if (std::string name = names_ ? names_(ip) : ""; !name.empty()) {
    auto [fn, new_name] = functions_.try_emplace(name, functions_.size() + 1);
    if (new_name) interned.message(pf::kFunctionNames, interned_string(fn->second, name));
    frame.varint(pf::kFunctionNameId, fn->second);
  }
  frame.varint(pf::kMappingId, kKernelMappingIid);
  frame.varint(pf::kRelPc, ip - text_);
  interned.message(pf::kFrames, frame);
  return it->second;
}

uint64_t PerfettoWriter::intern_callstack(uint32_t stack_id, const std::vector<uint64_t>& ips,
                                          ProtoWriter& interned) {
  // A reset lets an id name another stack: a changed one is interned anew.
  Callstack& known = callstacks_[stack_id];
  if (known.iid && known.ips == ips) return known.iid;
  known = {next_callstack_++, ips};
  ProtoWriter callstack;
  callstack.varint(pf::kCallstackIid, known.iid);
  std::vector<uint64_t> frame_ids;
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
    for (const std::string& arg : cmdline_of(pid, comm)) process.bytes(pf::kCmdline, arg);
    tree.message(pf::kProcesses, process);
  }
  ProtoWriter thread;
  thread.varint(pf::kThreadTid, tid);
  thread.bytes(pf::kThreadName, comm);
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
                           const std::vector<uint64_t>& ips) {
  const smt_event_record& e = r.event;
  const uint64_t ts = r.ts_ns + boottime_offset_;
  name_thread(e.tgid, e.tid, comm, ts);
  ProtoWriter interned, sample, packet;
  sample.varint(pf::kCpu, e.cpu);
  sample.varint(pf::kPid, e.tgid);
  sample.varint(pf::kTid, e.tid);
  if (!ips.empty())
    sample.varint(pf::kSampleCallstackIid, intern_callstack(e.stack_id, ips, interned));
  sample.varint(pf::kCpuMode, pf::kCpuModeKernel);
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

}  // namespace stackmapd

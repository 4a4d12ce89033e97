// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/perfetto_writer.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "daemon/export/perfetto_protos.h"
#include "daemon/export/perfetto_sources.h"
#include "daemon/export/utf8_text.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

// Sequence 1 holds the ProcessTree packets; source S is on 2 + S.
constexpr uint32_t kProcessTreeSequence = 1;
constexpr uint32_t kFirstSourceSequence = 2;
// Interned on every source's sequence first: traced_perf's kernel mapping.
constexpr uint64_t kKernelMappingIid = 1;
constexpr uint64_t kKernelPathIid = 1;

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

// What a ProcessTree.Process says of `pid` beyond its pid, read from /proc
// when its first thread is named.
struct ProcessInfo {
  std::vector<std::string> cmdline;
  bool cmdline_is_comm = false;  // cmdline is its main thread's name
  std::optional<uint64_t> ppid;
  bool kthread = false;
};

ProcessInfo process_info(uint32_t pid, uint32_t tid, const std::string& comm) {
  ProcessInfo p;
  const std::string dir = "/proc/" + std::to_string(pid);
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": the comm
  // may hold spaces and parentheses, so fields count from the last ')'.
  std::ifstream stat(dir + "/stat");
  if (std::string line; std::getline(stat, line)) {
    if (const size_t close = line.rfind(')'); close != std::string::npos) {
      std::istringstream rest(line.substr(close + 1));
      std::string state;
      int64_t pgrp, session, tty, tpgid;  // tpgid is -1 without a terminal
      uint64_t ppid = 0, flags = 0;
      if (rest >> state >> ppid >> pgrp >> session >> tty >> tpgid >> flags) {
        p.ppid = ppid;
        p.kthread = flags & 0x00200000;  // PF_KTHREAD
      }
    }
  }
  std::ifstream in(dir + "/cmdline");
  for (std::string arg; std::getline(in, arg, '\0');) p.cmdline.push_back(arg);
  if (!p.cmdline.empty()) return p;
  // A kernel thread or a zombie has none: its main thread's name stands in,
  // as traced_probes writes it; once the process is gone, the name of the
  // thread seen, which is the main thread's only when tid == pid.
  std::ifstream main_comm(dir + "/comm");
  if (std::string name; std::getline(main_comm, name) && !name.empty()) {
    p.cmdline = {name};
    p.cmdline_is_comm = true;
  } else {
    p.cmdline = {comm};
    p.cmdline_is_comm = tid == pid;
  }
  return p;
}

}  // namespace

int64_t PerfettoWriter::boottime_offset_ns() {
  // Read between two MONOTONIC reads: the offset to their midpoint is off by
  // at most half the (sub-microsecond) gap. BOOTTIME is never behind
  // MONOTONIC: with no suspend, a gap that was not even (slow emulated
  // clock calls) must not make the offset negative.
  const int64_t m1 = clock_ns(CLOCK_MONOTONIC);
  const int64_t b = clock_ns(CLOCK_BOOTTIME);
  const int64_t m2 = clock_ns(CLOCK_MONOTONIC);
  return std::max<int64_t>(0, b - (m1 + (m2 - m1) / 2));
}

PerfettoWriter::PerfettoWriter(const std::string& path, FrameNamer names)
    : path_(path), tmp_(path + ".tmp"), names_(std::move(names)) {
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

PerfettoSource PerfettoWriter::source(uint16_t index) const {
  if (index < sources_.size()) return sources_[index];
  PerfettoSource unknown;
  unknown.name = "source " + std::to_string(index);
  return unknown;
}

// The source's sequence, started at its first event: the packet that clears
// its incremental state, with its samples' defaults and the kernel's mapping.
PerfettoWriter::Sequence& PerfettoWriter::sequence(uint16_t index, uint64_t ts) {
  auto [it, added] = sequences_.try_emplace(index);
  Sequence& seq = it->second;
  if (!added) return seq;
  seq.id = kFirstSourceSequence + index;
  const PerfettoSource src = source(index);
  seq.step = timebase_step(src);
  seq.sum = !src.sum_field.empty();
  ProtoWriter defaults;
  defaults.varint(pf::kDefaultsTimestampClockId, pf::kClockBoottime);
  defaults.message(pf::kPerfSampleDefaults, perf_sample_defaults(src));
  // traced_perf's kernel mapping (its Unwinder's "kernel" MapInfo): path
  // "kernel", start, end, offsets and build id 0, which trace processor's
  // importer takes for the kernel, one mapping in every process.
  ProtoWriter interned, mapping;
  interned.message(pf::kMappingPaths, interned_string(kKernelPathIid, "kernel"));
  mapping.varint(pf::kMappingIid, kKernelMappingIid);
  mapping.varint(pf::kPathStringIds, kKernelPathIid);
  interned.message(pf::kMappings, mapping);

  ProtoWriter packet;
  packet.varint(pf::kTimestamp, ts);
  packet.varint(pf::kTimestampClockId, pf::kClockBoottime);
  packet.varint(pf::kTrustedPacketSequenceId, seq.id);
  packet.varint(pf::kSequenceFlags, pf::kIncrementalStateCleared);
  packet.varint(pf::kFirstPacketOnSequence, 1);
  packet.message(pf::kTracePacketDefaults, defaults);
  packet.message(pf::kInternedData, interned);
  emit(packet);
  return seq;
}

uint64_t PerfettoWriter::intern_function(Sequence& seq, const std::string& name,
                                         ProtoWriter& interned) {
  auto [fn, added] = seq.functions.try_emplace(name, seq.functions.size() + 1);
  if (added) interned.message(pf::kFunctionNames, interned_string(fn->second, utf8_text(name)));
  return fn->second;
}

// A kernel frame: its function's name, its address as rel_pc (the kernel's
// mapping starts at 0), as Perfetto's importer keeps one frame per
// (rel_pc, name) of the kernel.
uint64_t PerfettoWriter::intern_frame(Sequence& seq, uint64_t ip, ProtoWriter& interned) {
  auto [it, added] = seq.frames.try_emplace(ip, seq.next_frame);
  if (!added) return it->second;
  ++seq.next_frame;
  ProtoWriter frame;
  frame.varint(pf::kFrameIid, it->second);
  if (std::string name = names_ ? names_(ip) : ""; !name.empty())
    frame.varint(pf::kFunctionNameId, intern_function(seq, name, interned));
  frame.varint(pf::kMappingId, kKernelMappingIid);
  frame.varint(pf::kRelPc, ip);
  interned.message(pf::kFrames, frame);
  return it->second;
}

// A user binary's mapping, interned with its first frame; frames in no file
// (or whose process was gone) share one named "[unknown]", as perf names them.
uint64_t PerfettoWriter::intern_user_mapping(Sequence& seq, const UserStackSet& set, int32_t binary,
                                             ProtoWriter& interned) {
  const bool in_file = binary >= 0 && static_cast<size_t>(binary) < set.binaries.size();
  auto [it, added] = seq.user_mappings.try_emplace(in_file ? binary : -1, seq.next_mapping);
  if (!added) return it->second;
  ++seq.next_mapping;
  ProtoWriter mapping;
  mapping.varint(pf::kMappingIid, it->second);
  if (in_file && !set.binaries[binary].build_id.empty()) {
    interned.message(pf::kBuildIds,
                     interned_string(seq.next_string, unhex(set.binaries[binary].build_id)));
    mapping.varint(pf::kBuildId, seq.next_string++);
  }
  // One component, the whole path: Perfetto prefixes each with '/' and
  // drops the doubled one a full path gets.
  interned.message(pf::kMappingPaths,
                   interned_string(seq.next_string,
                                   in_file ? utf8_text(set.binaries[binary].path) : "[unknown]"));
  mapping.varint(pf::kPathStringIds, seq.next_string++);
  interned.message(pf::kMappings, mapping);
  return it->second;
}

// One frame per function of `f`, root first: the function, then those
// inlined into it ("name (inlined)", as the flame graphs show them); one
// frame without a name when it did not resolve.
void PerfettoWriter::intern_user_frames(Sequence& seq, const UserStackSet& set, const UserFrame& f,
                                        bool is_return, std::vector<uint64_t>& frame_ids,
                                        ProtoWriter& interned) {
  const bool in_file = f.binary >= 0 && static_cast<size_t>(f.binary) < set.binaries.size();
  const uint64_t mapping = intern_user_mapping(seq, set, f.binary, interned);
  // An ELF address unknown (the binary was unreadable) is the file offset,
  // which it equals in the text of most binaries.
  uint64_t rel_pc = !in_file ? f.addr : f.elf_addr ? f.elf_addr : f.file_offset;
  if (is_return && rel_pc) --rel_pc;
  std::vector<std::string> names;
  if (!f.symbols.empty()) names = user_frame_names(set, f, false);
  if (names.empty()) names.emplace_back();
  for (auto name = names.rbegin(); name != names.rend(); ++name) {
    auto [it, added] = seq.user_frames.try_emplace({mapping, rel_pc, *name}, seq.next_frame);
    if (added) {
      ++seq.next_frame;
      ProtoWriter frame;
      frame.varint(pf::kFrameIid, it->second);
      if (!name->empty()) frame.varint(pf::kFunctionNameId, intern_function(seq, *name, interned));
      frame.varint(pf::kMappingId, mapping);
      frame.varint(pf::kRelPc, rel_pc);
      interned.message(pf::kFrames, frame);
    }
    frame_ids.push_back(it->second);
  }
}

uint64_t PerfettoWriter::intern_callstack(Sequence& seq, uint64_t key,
                                          const std::vector<uint64_t>& ips, const UserStackSet* set,
                                          const UserStack* user, ProtoWriter& interned) {
  std::vector<std::pair<int32_t, uint64_t>> user_frames;
  if (user)
    for (const UserFrame& f : user->frames) user_frames.emplace_back(f.binary, f.addr);
  // A reset lets an id name another stack: a changed one is interned anew.
  Callstack& known = seq.callstacks[key];
  if (known.iid && known.ips == ips && known.user == user_frames) return known.iid;
  known = {seq.next_callstack++, ips, std::move(user_frames)};
  ProtoWriter callstack;
  callstack.varint(pf::kCallstackIid, known.iid);
  std::vector<uint64_t> frame_ids;
  if (user)
    for (size_t i = user->frames.size(); i-- > 0;)
      intern_user_frames(seq, *set, user->frames[i], i > 0, frame_ids, interned);
  for (auto ip = ips.rbegin(); ip != ips.rend(); ++ip)
    frame_ids.push_back(intern_frame(seq, *ip, interned));
  // A sample taken in user mode without its user stack: one frame in the
  // "[unknown]" mapping, as perf shows it. Perfetto's importer drops a
  // sample whose callstack it cannot find, and its count with it.
  if (frame_ids.empty()) {
    static const UserStackSet kNoBinaries;
    UserFrame unknown;
    intern_user_frames(seq, set ? *set : kNoBinaries, unknown, false, frame_ids, interned);
  }
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
    const ProcessInfo info = process_info(pid, tid, comm);
    ProtoWriter process;
    process.varint(pf::kProcessPid, pid);
    if (info.ppid) process.varint(pf::kPpid, *info.ppid);
    for (const std::string& arg : info.cmdline) process.bytes(pf::kCmdline, utf8_text(arg));
    if (info.cmdline_is_comm) process.varint(pf::kCmdlineIsComm, 1);
    if (info.kthread) process.varint(pf::kIsKthread, 1);
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
  packet.varint(pf::kTrustedPacketSequenceId, kProcessTreeSequence);
  if (!tree_started_) packet.varint(pf::kFirstPacketOnSequence, 1);
  tree_started_ = true;
  packet.message(pf::kProcessTree, tree);
  emit(packet);
}

void PerfettoWriter::write(const smt_trace_record& r, const std::string& comm,
                           const std::vector<uint64_t>& ips, const UserStackSet* user) {
  const smt_event_record& e = r.event;
  const uint64_t ts = r.ts_ns + boottime_offset_;
  name_thread(e.tgid, e.tid, comm, ts);
  Sequence& seq = sequence(e.source, ts);
  const UserStack* ustack = nullptr;
  if (user)
    if (auto it = user->stacks.find(e.user_stack_id);
        it != user->stacks.end() && !it->second.frames.empty())
      ustack = &it->second;
  ProtoWriter interned, sample, packet;
  sample.varint(pf::kCpu, e.cpu);
  sample.varint(pf::kPid, e.tgid);
  sample.varint(pf::kTid, e.tid);
  sample.varint(
      pf::kSampleCallstackIid,
      intern_callstack(seq, uint64_t{e.stack_id} << 32 | (ustack ? e.user_stack_id : kNoUserStack),
                       ips, user, ustack, interned));
  // The leaf's mode: kernel frames come innermost; none, taken in user mode.
  sample.varint(pf::kCpuMode, ips.empty() ? pf::kCpuModeUser : pf::kCpuModeKernel);
  // The timebase counter as perf reads it: since the start, per CPU.
  sample.varint(pf::kTimebaseCount, seq.timebase[e.cpu] += seq.step ? seq.step : e.weight);
  if (seq.sum) sample.varint(pf::kFollowerCounts, seq.follower[e.cpu] += e.weight);
  packet.varint(pf::kTimestamp, ts);
  packet.varint(pf::kTimestampClockId, pf::kClockBoottime);
  packet.varint(pf::kTrustedPacketSequenceId, seq.id);
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

// SPDX-License-Identifier: GPL-2.0
// --perfetto FILE: the per-event timeline as a native Perfetto trace
// (ui.perfetto.dev), the packets Android's traced_perf writes for kernel
// stack sampling, so that ours opens beside an Android system trace
// (field numbers: daemon/export/perfetto_protos.h):
//
//   sequence 1   ProcessTree packets: a thread's name and its process
//                (pid, ppid, cmdline; for a kernel thread or a process gone,
//                its main thread's name, cmdline_is_comm) before its first
//                sample
//   sequence 2+S each source S of the session (-e, -f, --profile, --offcpu)
//                on a sequence of its own, as traced_perf writes each of its
//                data sources: trace processor makes one perf session per
//                sequence, named by its timebase. Its first packet clears
//                the incremental state and holds the defaults of its samples
//                (the clock, BOOTTIME, and PerfSampleDefaults: what a sample
//                of S is, below) and the kernel's mapping; then a PerfSample
//                per event (cpu, pid, tid, cpu mode, callstack iid,
//                timebase_count) at its BOOTTIME timestamp (clock id 6). The
//                first event of a stack on the sequence interns its frames,
//                function names and callstack in the same packet, as our
//                table stores each stack once (--user-stacks: the first of
//                its user binaries too); interning is per sequence.
//
// A source's timebase (daemon/export/perfetto_sources.h), and what
// timebase_count (per CPU, running, as perf counts) adds up:
//   -e CAT:NAME   tracepoint CAT:NAME, period 1: the events; with --sum FIELD
//                 also a follower named FIELD adding up the field's values
//   --profile HZ  cpu-clock at HZ: 1e9/HZ ns a sample (the period the kernel
//                 turns cpu-clock's frequency into)
//   -f FUNCTION   named FUNCTION, period 1: the calls
//   --offcpu      named "offcpu": the ns spent off the CPU (no unit known to
//                 trace processor); its blocks reach no trace sink today
// Counts are of the events the session kept (--pid, --cpu filter them).
//
// The kernel's mapping is traced_perf's: the one path component "kernel",
// no range, offset or build id. Trace processor recognizes exactly that as
// the kernel (one mapping for every process); a kernel frame carries its
// function name and its address as rel_pc. Callstacks run root first with
// their frame ids written unpacked, as Perfetto's decoder requires: the
// outermost user frame, the user frames, then the kernel's. A user binary is
// one Mapping (build id, path) for every process, so its range is left empty
// (start = end = 0): Perfetto's importer takes such a mapping as
// process-independent, where ranges would have to be each process's own and
// never overlap. A user frame's rel_pc is its address in the ELF's layout
// (what addr2line takes), a return address less one (inside the call), as
// Perfetto's unwinder writes it. cpu_mode is kernel when a sample has kernel
// frames, else user. Packets stream to FILE.tmp, renamed to FILE by finish().
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "daemon/export/perfetto_sources.h"
#include "daemon/export/proto_wire.h"
#include "daemon/model/stack_record.h"
#include "daemon/model/user_stack.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class Kallsyms;

// A kernel frame's function, as each event is written: "schedule",
// "nf_hook_slow [nf_tables]" for a module; "" when it does not resolve.
using FrameNamer = std::function<std::string(uint64_t ip)>;
// From a symbol table; null: every frame unresolved. `ksyms` must outlive it.
FrameNamer kallsyms_namer(const Kallsyms* ksyms);

class PerfettoWriter {
 public:
  // Creates FILE.tmp at once, so that a bad path fails before tracing.
  // `names` names the kernel's frames.
  PerfettoWriter(const std::string& path, FrameNamer names);
  ~PerfettoWriter();  // removes FILE.tmp unless finish() renamed it
  PerfettoWriter(const PerfettoWriter&) = delete;
  PerfettoWriter& operator=(const PerfettoWriter&) = delete;

  // What each source is (smt_event_record.source indexes it), before the
  // first write(); a source past them is named "source N", period 1.
  void set_sources(std::vector<PerfettoSource> sources) { sources_ = std::move(sources); }
  // One event of a --trace record; `ips` is its stack, innermost first;
  // `user` (--user-stacks, else null) holds the user stack the record names.
  void write(const smt_trace_record& r, const std::string& comm, const std::vector<uint64_t>& ips,
             const UserStackSet* user = nullptr);
  // Flushes and renames FILE.tmp to FILE; throws Error if anything failed.
  void finish();
  uint64_t samples() const { return samples_; }

  // CLOCK_BOOTTIME less CLOCK_MONOTONIC, now: the time the machine was suspended.
  static int64_t boottime_offset_ns();

 private:
  struct Callstack {
    uint64_t iid;
    std::vector<uint64_t> ips;
    std::vector<std::pair<int32_t, uint64_t>> user;  // (binary, address) per user frame
  };
  // One source's sequence: its interned data, its running counts.
  struct Sequence {
    uint32_t id = 0;                                     // trusted_packet_sequence_id
    std::unordered_map<uint64_t, Callstack> callstacks;  // by stack_id << 32 | user stack id
    std::unordered_map<uint64_t, uint64_t> frames;       // kernel ip -> frame iid
    // (mapping iid, rel_pc, function) -> frame iid
    std::map<std::tuple<uint64_t, uint64_t, std::string>, uint64_t> user_frames;
    std::unordered_map<int32_t, uint64_t> user_mappings;  // binary (-1: none) -> mapping iid
    std::unordered_map<std::string, uint64_t> functions;  // name -> function_names iid
    std::unordered_map<uint32_t, uint64_t> timebase;      // cpu -> timebase_count
    std::unordered_map<uint32_t, uint64_t> follower;      // cpu -> the --sum field's total
    uint64_t step = 1;            // what an event adds to timebase_count; 0: its weight
    bool sum = false;             // follower_counts: --sum's field
    uint64_t next_callstack = 1;  // iid 0 means unset
    uint64_t next_frame = 1;
    uint64_t next_mapping = 2;  // 1: the kernel's
    uint64_t next_string = 2;   // build_ids' and mapping_paths' iids; 1: "kernel"
  };
  Sequence& sequence(uint16_t source, uint64_t ts);
  PerfettoSource source(uint16_t index) const;
  uint64_t intern_callstack(Sequence& seq, uint64_t key, const std::vector<uint64_t>& ips,
                            const UserStackSet* set, const UserStack* user, ProtoWriter& interned);
  uint64_t intern_frame(Sequence& seq, uint64_t ip, ProtoWriter& interned);
  void intern_user_frames(Sequence& seq, const UserStackSet& set, const UserFrame& f,
                          bool is_return, std::vector<uint64_t>& frame_ids, ProtoWriter& interned);
  uint64_t intern_user_mapping(Sequence& seq, const UserStackSet& set, int32_t binary,
                               ProtoWriter& interned);
  uint64_t intern_function(Sequence& seq, const std::string& name, ProtoWriter& interned);
  void name_thread(uint32_t pid, uint32_t tid, const std::string& comm, uint64_t ts);
  void emit(const ProtoWriter& packet);

  std::string path_, tmp_;
  FILE* out_;
  FrameNamer names_;
  int64_t boottime_offset_ = 0;
  std::vector<PerfettoSource> sources_;
  std::unordered_map<uint16_t, Sequence> sequences_;   // by source
  std::unordered_map<uint32_t, std::string> threads_;  // tid -> name written
  std::unordered_set<uint32_t> processes_;
  bool tree_started_ = false;  // sequence 1 has a packet
  uint64_t samples_ = 0;
  bool failed_ = false;
};

}  // namespace stackmapd

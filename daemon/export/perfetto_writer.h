// SPDX-License-Identifier: GPL-2.0
// --perfetto FILE: the per-event timeline as a native Perfetto trace
// (ui.perfetto.dev), the packets Android's traced_perf writes for kernel
// stack sampling, so that ours opens beside an Android system trace:
//
//   packet 1   sequence start (incremental state cleared): the kernel's
//              mapping with its build id, interned once
//   per event  a PerfSample (cpu, pid, tid, cpu mode, callstack iid) at
//              its BOOTTIME timestamp (clock id 6); the first event of a
//              stack interns its frames, function names and callstack in
//              the same packet, as our table stores each stack once
//              (--user-stacks: the first of its user binaries too)
//   new thread a ProcessTree packet naming it and its process
//
// Callstacks run root first with their frame ids written unpacked, as
// Perfetto's decoder requires: the outermost user frame, the user frames,
// then the kernel's. A user binary is one Mapping (build id, path) for every
// process, so its range is left empty (start = end = 0): Perfetto's importer
// takes such a mapping as process-independent, where ranges would have to
// be each process's own and never overlap. A user frame's rel_pc is its
// address in the ELF's layout (what addr2line takes), a return address less
// one (inside the call), as Perfetto's unwinder writes it. cpu_mode is kernel
// when a sample has kernel frames, else user. Packets stream to FILE.tmp,
// renamed to FILE by finish().
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

#include "daemon/export/proto_wire.h"
#include "daemon/model/kernel_info.h"
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
  // `names` names the frames; frames' rel_pc count from `kernel.text_address`.
  PerfettoWriter(const std::string& path, FrameNamer names, const KernelInfo& kernel);
  ~PerfettoWriter();  // removes FILE.tmp unless finish() renamed it
  PerfettoWriter(const PerfettoWriter&) = delete;
  PerfettoWriter& operator=(const PerfettoWriter&) = delete;

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
  uint64_t intern_callstack(uint64_t key, const std::vector<uint64_t>& ips, const UserStackSet* set,
                            const UserStack* user, ProtoWriter& interned);
  uint64_t intern_frame(uint64_t ip, ProtoWriter& interned);
  void intern_user_frames(const UserStackSet& set, const UserFrame& f, bool is_return,
                          std::vector<uint64_t>& frame_ids, ProtoWriter& interned);
  uint64_t intern_user_mapping(const UserStackSet& set, int32_t binary, ProtoWriter& interned);
  uint64_t intern_function(const std::string& name, ProtoWriter& interned);
  void name_thread(uint32_t pid, uint32_t tid, const std::string& comm, uint64_t ts);
  void emit(const ProtoWriter& packet);

  std::string path_, tmp_;
  FILE* out_;
  FrameNamer names_;
  uint64_t text_ = 0;
  int64_t boottime_offset_ = 0;
  std::unordered_map<uint64_t, Callstack> callstacks_;  // by stack_id << 32 | user stack id
  std::unordered_map<uint64_t, uint64_t> frames_;       // kernel ip -> frame iid
  // (mapping iid, rel_pc, function) -> frame iid
  std::map<std::tuple<uint64_t, uint64_t, std::string>, uint64_t> user_frames_;
  std::unordered_map<int32_t, uint64_t> user_mappings_;  // binary (-1: none) -> mapping iid
  std::unordered_map<std::string, uint64_t> functions_;  // name -> function_names iid
  std::unordered_map<uint32_t, std::string> threads_;    // tid -> name written
  std::unordered_set<uint32_t> processes_;
  uint64_t next_callstack_ = 1;  // iid 0 means unset
  uint64_t next_frame_ = 1;
  uint64_t next_mapping_ = 2;  // 1: the kernel's
  uint64_t next_string_ = 2;   // build_ids' and mapping_paths' iids; 1: the kernel's
  uint64_t samples_ = 0;
  bool failed_ = false;
};

}  // namespace stackmapd

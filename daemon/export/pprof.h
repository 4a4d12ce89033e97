// SPDX-License-Identifier: GPL-2.0
// pprof profiles (github.com/google/pprof, proto/profile.proto): what
// `go tool pprof`, Parca, Pyroscope and Grafana Alloy read.
//
// Data flow: Snapshot (a session's end, the daemon's current table, a
// stack_map.json or FSMB file read back) + its FrameNames (function names:
// go's pprof cannot symbolize C binaries) -> encode_pprof -> gzipped profile.proto.
// For an endpoint's "last N seconds": delta_snapshot(before, after) first.
//
//   Sample      one per (callstack, key): location ids leaf first,
//               our ips, then --user-stacks' frames innermost first (the
//               folded export's order reversed); values [events|samples
//               count], [cpu nanoseconds] with --profile HZ, [the weight]
//               with --sum/--offcpu; the --by keys as labels (pid, tid, cpu
//               numeric with a unit, since Go drops a numeric 0 without one;
//               the rest strings).
//   Location    one per distinct address, its function (the address,
//               "0xffffffff81000010", when it does not resolve); a
//               user frame's address is its file offset (a return address
//               less one), its lines the inlined functions innermost first,
//               the innermost with file:line when debug info had it.
//   Mapping     the kernel ("[kernel.kallsyms]", as perf names it), its
//               GNU build id (/sys/kernel/notes) so a symbolizer can find
//               the matching vmlinux later, has_functions only when a
//               symbol table named its frames; and one per user binary: its
//               path, build id, memory_start = file_offset = 0 (so that an
//               address is a file offset: the same in every process), the
//               has_* flags from what its frames resolved to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/export/frame_names.h"
#include "daemon/model/snapshot.h"

namespace stackmapd {

struct PprofOptions {
  uint32_t profile_hz = 0;  // --profile HZ: samples/count, cpu/nanoseconds, period 1e9/HZ
  // Which of the snapshot's --by keys become labels; none: all it has. Keys
  // that differ only in the others merge into one sample: an endpoint can
  // leave out pid and tid so that a fleet store's series stay few.
  std::optional<std::vector<KeyField>> label_keys;
  int64_t time_nanos = 0;      // start of the profile, CLOCK_REALTIME; 0: not written
  int64_t duration_nanos = 0;  // its length; 0: not written
  // Addresses are written less this (the kernel's _text: KASLR-free offsets a
  // vmlinux symbolizes), for readers not trusted with raw kernel addresses;
  // one below it is written as 0. 0: raw addresses.
  uint64_t address_base = 0;
};

// The gzipped profile. Labels only when the snapshot's keys were asked for
// (snap.keys_requested: --by); an FSMB file has none. Throws Error only if zlib fails.
std::string encode_pprof(const Snapshot& snap, const FrameNames& names, const PprofOptions& opt);

// What happened between two snapshots of one table: per stack and key,
// `after` less `before`. A stack whose id now holds other frames, or whose
// count went down (a reset came between), counts whole from `after`; stacks
// with nothing new are left out. The rest is `after`'s, its counters less
// `before`'s when no reset came between.
Snapshot delta_snapshot(const Snapshot& before, const Snapshot& after);

}  // namespace stackmapd

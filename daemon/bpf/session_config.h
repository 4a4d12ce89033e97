// SPDX-License-Identifier: GPL-2.0
// What one BPF session traces and how its table is kept (daemon/bpf/bpf_session.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/bpf/sources.h"
#include "stackmapd/abi.h"

namespace stackmapd {

struct SessionConfig {
  std::vector<Tracepoint> events;
  std::vector<FunctionTarget> functions;  // fentry, one program per function
  uint32_t profile_hz = 0;                // CPU sampling on every online CPU; 0 = off
  bool trace = false;                     // richer records for the per-event trace
  uint32_t filter_pid = 0;                // only this process (tgid); 0 = all
  uint32_t filter_cpu = SMT_ANY_CPU;
  uint32_t bits = SMT_DEFAULT_BITS;
  uint32_t ringbuf_bytes = 8u << 20;  // power of two; 16 B per id
  uint32_t verify_every = 0;          // 1 in N events also sends its frames; 0 = off
  // Pin the table's maps here and take over a compatible table found there
  // (same ids and counts after a restart). Empty: nothing pinned.
  std::string pin_dir;
  // Use the programs and maps another loader pinned here (daemon/bpf/loader_pins.h)
  // instead of loading our own; the table's size is then the object's.
  std::string pinned_dir;
};

}  // namespace stackmapd

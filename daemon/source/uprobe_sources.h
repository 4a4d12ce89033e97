// SPDX-License-Identifier: GPL-2.0
// -u: user-space probes, each spec resolved to the places a uprobe goes.
//   BINARY:SYMBOL[+OFF]          a function's entry (or OFF bytes into it);
//                                SYMBOL may be a glob: one probe per function
//   BINARY:usdt:PROVIDER:NAME    a USDT probe of the binary's .note.stapsdt,
//                                each of its sites, its semaphore counted
//                                by the kernel while attached
// BINARY is a path; without a '/', with --pid a library or program the
// process maps, by file name or soname ("libc.so.6", also "libc"), else a
// program in PATH, else a library in the dynamic linker's directories.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stackmapd {

struct UprobeTarget {
  std::string source;           // the events' source name: "PATH:SYMBOL", "PATH:usdt:PROVIDER:NAME"
  std::string binary;           // the file's path
  uint64_t offset = 0;          // the probed instruction, in the file
  uint64_t ref_ctr_offset = 0;  // USDT: the semaphore, in the file; 0: none
  bool at_entry = false;        // a function's first instruction (SMT_COOKIE_AT_ENTRY)
  bool usdt = false;            // a USDT probe's site
  std::string usdt_args;        // USDT: its note's argument specs ("-4@%edi 8@%rax")
  uint32_t weight_field = 0;    // --sum/--hist argN: where it lies (probe_args.h); 0: none
  bool operator==(const UprobeTarget&) const = default;
};

// Resolves every spec; `pids` (--pid) are where a library is found by name.
// Throws Error with one line: a bad spec, a binary that does not exist, a
// function or USDT probe the binary does not have (naming what it has).
// Sites reached twice (aliases such as malloc and __libc_malloc, two specs)
// are probed once, so no event counts twice.
std::vector<UprobeTarget> resolve_uprobes(const std::vector<std::string>& specs,
                                          const std::vector<uint32_t>& pids);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// One ELF file's unwind table (stackmapd/abi/unwind.h): its CFI, row by row,
// in the compact form the BPF walker reads. Built from .eh_frame, or from
// .debug_frame where a file has no .eh_frame, with libdw's CFI API: each FDE's
// range is walked from row boundary to row boundary (dwarf_cfi_addrframe,
// dwarf_frame_info), each row reduced to the CFA, rbp and return address rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stackmapd/abi.h"

namespace stackmapd {

struct CfiTable {
  std::string build_id;              // hex, empty when the file has none
  std::string section;               // ".eh_frame" or ".debug_frame"
  uint64_t base = 0;                 // a row's pc is the ELF virtual address minus this
  std::vector<smt_unwind_row> rows;  // sorted by pc, no two adjacent rows equal
  size_t fdes = 0;                   // FDEs with a non-empty range
  size_t undecodable_fdes = 0;       // left out: their CIE's augmentation is not understood

  struct Segment {
    uint64_t offset = 0, vaddr = 0, filesz = 0;  // a PT_LOAD's
  };
  std::vector<Segment> segments;  // the executable PT_LOADs

  // The row that applies at ELF virtual address `vaddr`; nullptr before the first.
  const smt_unwind_row* find(uint64_t vaddr) const;
  // smt_unwind_file's pc_off (a row's pc = file offset + pc_off) for this
  // file mapped from file offset `pgoff`; nullopt when that offset lies in
  // no executable segment.
  std::optional<uint64_t> pc_off(uint64_t pgoff) const;
  size_t bytes() const { return rows.size() * sizeof(smt_unwind_row); }
};

// Builds the table of the ELF file at `path`; throws Error (one line, naming
// the file) when it cannot be read, is not x86_64, has no CFI, or its code
// lies 4 GiB or more past its base.
CfiTable build_cfi_table(const std::string& path);
// The same of the file open at `fd` (`path` names it in messages).
CfiTable build_cfi_table(int fd, const std::string& path);

}  // namespace stackmapd

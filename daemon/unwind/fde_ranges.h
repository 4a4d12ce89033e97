// SPDX-License-Identifier: GPL-2.0
// The address ranges a CFI section's FDEs cover, in the file's virtual
// addresses: what the unwind table walks row by row. libdw enumerates the
// entries (dwarf_next_cfi) but leaves an FDE's initial_location and
// address_range encoded as its CIE's augmentation says; decoded here.
#pragma once

#include <libelf.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stackmapd {

struct FdeRange {
  uint64_t start = 0, end = 0;  // [start, end)
};

struct FdeRanges {
  std::vector<FdeRange> ranges;  // sorted by start, empty ranges left out
  size_t undecodable = 0;        // FDEs whose CIE's augmentation or encoding is not understood
};

// `data` is the whole section, loaded at `section_addr` (.eh_frame's sh_addr;
// .debug_frame holds absolute addresses); `e_ident` is the file's.
FdeRanges fde_ranges(const unsigned char* e_ident, Elf_Data* data, bool eh_frame,
                     uint64_t section_addr);

}  // namespace stackmapd

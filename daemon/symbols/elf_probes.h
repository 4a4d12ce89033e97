// SPDX-License-Identifier: GPL-2.0
// -u: where a user-space probe goes in an ELF file, as the kernel's uprobes
// take it (a file offset): its functions from .symtab and .dynsym, and its
// USDT probes from the .note.stapsdt notes (systemtap's SDT v3 layout).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stackmapd {

struct ElfFunction {
  std::string name;  // as nm shows it (C++ names mangled)
  uint64_t offset;   // in the file
  uint64_t size;
};

struct UsdtNote {
  std::string provider, name, args;
  uint64_t offset;            // the probe's instruction, in the file
  uint64_t semaphore_offset;  // its semaphore's counter in the file; 0: none
};

struct ElfProbes {
  // Functions (STT_FUNC, defined) by name, each once, in name order.
  std::vector<ElfFunction> functions;
  // GNU indirect functions (libc's strlen, memcpy): their symbol is the
  // resolver that picks an implementation at load, which runs once.
  std::vector<std::string> ifuncs;
  std::vector<UsdtNote> usdt;
};

// Reads `path`; throws Error naming it when it cannot be read or is no ELF file.
ElfProbes read_elf_probes(const std::string& path);

// The DT_SONAME of the ELF file at `path`; empty if none or not readable.
std::string elf_soname(const std::string& path);

}  // namespace stackmapd

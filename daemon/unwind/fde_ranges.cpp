// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/fde_ranges.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <unordered_map>

namespace stackmapd {

namespace {

constexpr uint8_t kAbsptr8 = DW_EH_PE_udata8;  // an 8-byte absolute pointer (ELFCLASS64)

// A CIE's FDE pointer encoding ('R'), or nullopt for an augmentation not understood.
std::optional<uint8_t> fde_encoding(const Dwarf_CIE& cie, bool eh_frame, uint8_t absptr) {
  if (!eh_frame) return absptr;
  const char* aug = cie.augmentation;
  if (aug[0] == '\0') return absptr;
  if (aug[0] != 'z') return std::nullopt;  // no size: the rest cannot be skipped
  const uint8_t* p = cie.augmentation_data;
  const uint8_t* end = p + cie.augmentation_data_size;
  uint8_t enc = absptr;
  for (const char* c = aug + 1; *c; ++c) {
    if (p >= end && *c != 'S') return std::nullopt;
    switch (*c) {
      case 'R': enc = *p++; break;
      case 'L': ++p; break;
      case 'S': break;
      case 'P': {  // personality routine: its encoding, then a pointer of that encoding
        const uint8_t penc = *p++;
        switch (penc & 0x0f) {
          case DW_EH_PE_udata2:
          case DW_EH_PE_sdata2: p += 2; break;
          case DW_EH_PE_udata4:
          case DW_EH_PE_sdata4: p += 4; break;
          case DW_EH_PE_udata8:
          case DW_EH_PE_sdata8: p += 8; break;
          case DW_EH_PE_absptr: p += absptr == kAbsptr8 ? 8 : 4; break;
          default: return std::nullopt;
        }
        break;
      }
      default: return std::nullopt;
    }
  }
  return (enc & 0x0f) == DW_EH_PE_absptr ? (enc & 0xf0) | absptr : enc;
}

// Reads a value of `enc`'s format at *p (which it advances); nullopt for a
// format FDEs do not use.
std::optional<uint64_t> read_value(const uint8_t*& p, const uint8_t* end, uint8_t enc) {
  // Unsigned formats zero-extend, signed ones sign-extend (CFI is in the file's
  // byte order: little-endian on x86_64).
  auto take = [&]<typename T>(T v) -> std::optional<uint64_t> {
    if (end - p < static_cast<ptrdiff_t>(sizeof(v))) return std::nullopt;
    memcpy(&v, p, sizeof(v));
    p += sizeof(v);
    if constexpr (std::is_signed_v<T>) return static_cast<uint64_t>(static_cast<int64_t>(v));
    return static_cast<uint64_t>(v);
  };
  switch (enc & 0x0f) {
    case DW_EH_PE_udata2: return take(uint16_t{});
    case DW_EH_PE_udata4: return take(uint32_t{});
    case DW_EH_PE_udata8: return take(uint64_t{});
    case DW_EH_PE_sdata2: return take(int16_t{});
    case DW_EH_PE_sdata4: return take(int32_t{});
    case DW_EH_PE_sdata8: return take(int64_t{});
    default: return std::nullopt;
  }
}

}  // namespace

FdeRanges fde_ranges(const unsigned char* e_ident, Elf_Data* data, bool eh_frame,
                     uint64_t section_addr) {
  FdeRanges out;
  const uint8_t absptr = e_ident[EI_CLASS] == ELFCLASS64 ? kAbsptr8 : uint8_t{DW_EH_PE_udata4};
  const auto* base = static_cast<const uint8_t*>(data->d_buf);
  std::unordered_map<Dwarf_Off, std::optional<uint8_t>> encodings;  // by CIE offset
  Dwarf_Off offset = 0, next = 0;
  Dwarf_CFI_Entry entry;
  while (dwarf_next_cfi(e_ident, data, eh_frame, offset, &next, &entry) == 0) {
    const Dwarf_Off at = offset;
    offset = next;
    if (entry.CIE_id == LIBDW_CIE_ID) {
      encodings[at] = fde_encoding(entry.cie, eh_frame, absptr);
      continue;
    }
    auto cie = encodings.find(entry.fde.CIE_pointer);
    if (cie == encodings.end()) {  // a CIE after its FDE: legal, rare
      Dwarf_CFI_Entry e;
      Dwarf_Off n;
      if (dwarf_next_cfi(e_ident, data, eh_frame, entry.fde.CIE_pointer, &n, &e) != 0 ||
          e.CIE_id != LIBDW_CIE_ID) {
        ++out.undecodable;
        continue;
      }
      cie = encodings.emplace(entry.fde.CIE_pointer, fde_encoding(e.cie, eh_frame, absptr)).first;
    }
    const uint8_t application = cie->second.value_or(0) & 0xf0;
    if (!cie->second || (application != 0 && application != DW_EH_PE_pcrel)) {
      ++out.undecodable;
      continue;
    }
    const uint8_t enc = *cie->second;
    const uint8_t* p = entry.fde.start;
    const uint64_t field_addr = section_addr + (p - base);
    const auto start = read_value(p, entry.fde.end, enc);
    const auto length = read_value(p, entry.fde.end, enc & 0x0f);
    if (!start || !length) {
      ++out.undecodable;
      continue;
    }
    const uint64_t lo = *start + ((enc & 0x70) == DW_EH_PE_pcrel ? field_addr : 0);
    if (*length > 0) out.ranges.push_back({lo, lo + *length});
  }
  std::sort(out.ranges.begin(), out.ranges.end(),
            [](const FdeRange& a, const FdeRange& b) { return a.start < b.start; });
  return out;
}

}  // namespace stackmapd

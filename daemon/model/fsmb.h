// SPDX-License-Identifier: GPL-2.0
// FSMB, the binary `stack_map_bin` export (docs/usage.md, `--output DIR` and `decode`): a header
// of four little-endian u32 (magic, version, nr_stacks, 0), then per stack four u32 (stack_id,
// nr, ref_count, 0) and its nr u64 ips. The layout is a contract with the RFC's kernel path and
// its tools/tracing/stackmap_dump.py, so it is written and read byte by byte, never through a
// struct.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/model/stack_record.h"
#include "stackmapd/abi.h"

namespace stackmapd {

// Kernel stacks are at most a few hundred frames deep; a record claiming more is corruption,
// and refusing it bounds what one record can make the reader allocate.
inline constexpr uint32_t kFsmbMaxFrames = 4096;
// The largest element pool, ours or the RFC's (bits 10..20): a header claiming more stacks is
// not a truncated export but a foreign or damaged one.
inline constexpr uint32_t kFsmbMaxStacks = 1u << SMT_MAX_BITS;

enum class FsmbRevision {
  kV2,          // magic 0x464D5342, version 2: the RFC's kernel path, and what we write
  kV1,          // magic 0x46534D42, version 1: the later revision of the same layout, read only
  kV1RfcMagic,  // magic 0x464D5342, version 1: read only, as the RFC's stackmap_dump.py does
};

// Names the revision for users, e.g. "FSMB v2 (magic 0x464d5342)".
const char* fsmb_revision_name(FsmbRevision revision);

struct FsmbFile {
  FsmbRevision revision = FsmbRevision::kV2;
  std::vector<StackRecord> stacks;  // every complete record, damaged file or not
  // A one-line error naming the file, its revision and a truncation or trailing bytes after the
  // header's nr_stacks records; empty when the file is whole.
  std::string damage;
};

// Byte-exact FSMB v2. ref_count saturates at UINT32_MAX. Throws Error for a stack with more than
// kFsmbMaxFrames frames, since no reader (ours included) would accept the file.
std::string fsmb_encode(const std::vector<StackRecord>& stacks);

// Parses an FSMB file of any revision above; `name` is what messages call the file. Safe on
// arbitrary input. A file cut short or longer than its records, as the RFC's reader takes it,
// gives its complete records and `damage`. Throws Error with a one-line message for files with
// nothing to read (empty, shorter than the header) and for foreign or corrupt ones (magic,
// version, header's reserved field, nr_stacks over kFsmbMaxStacks, nr over kFsmbMaxFrames).
FsmbFile fsmb_decode(std::string_view bytes, const std::string& name);

// Reads `path` whole and decodes it; throws Error if it cannot be read or fsmb_decode throws.
FsmbFile fsmb_read_file(const std::string& path);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/fsmb.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {
namespace {

constexpr uint32_t kMagicV2 = 0x464D5342;
constexpr uint32_t kMagicV1 = 0x46534D42;
constexpr uint32_t kVersionV2 = 2;
constexpr uint32_t kVersionV1 = 1;
constexpr size_t kHeaderSize = 16;
constexpr size_t kRecordHeaderSize = 16;
constexpr size_t kIpSize = 8;

// Shifts instead of memcpy of host integers: the format is little-endian on every host.
void put_u32(std::string& out, uint32_t value) {
  for (int shift = 0; shift < 32; shift += 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

void put_u64(std::string& out, uint64_t value) {
  for (int shift = 0; shift < 64; shift += 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

// Callers have checked that `offset` leaves enough bytes.
uint32_t get_u32(std::string_view bytes, size_t offset) {
  uint32_t value = 0;
  for (size_t i = 4; i-- > 0;) {
    value = (value << 8) | static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i]));
  }
  return value;
}

uint64_t get_u64(std::string_view bytes, size_t offset) {
  uint64_t value = 0;
  for (size_t i = 8; i-- > 0;) {
    value = (value << 8) | static_cast<uint64_t>(static_cast<unsigned char>(bytes[offset + i]));
  }
  return value;
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

// Shows the bytes both as hex and as text, so a user can tell an ELF, a gzip or the text
// `stack_map` export (which starts "stack_id") from a damaged FSMB file at a glance.
std::string describe_bytes(std::string_view bytes) {
  std::string hex;
  std::string text;
  for (char c : bytes) {
    char byte[4];
    std::snprintf(byte, sizeof(byte), "%02x", static_cast<unsigned char>(c));
    hex += hex.empty() ? "" : " ";
    hex += byte;
    text += (c >= 0x20 && c < 0x7f) ? c : '.';
  }
  return hex + " (\"" + text + "\")";
}

std::string record_position(uint32_t index, uint32_t nr_stacks, size_t offset) {
  return "record " + std::to_string(index + 1) + " of " + std::to_string(nr_stacks) + " at byte " +
         std::to_string(offset);
}

std::string records(size_t n) { return std::to_string(n) + (n == 1 ? " record" : " records"); }

}  // namespace

const char* fsmb_revision_name(FsmbRevision revision) {
  switch (revision) {
    case FsmbRevision::kV2: return "FSMB v2 (magic 0x464d5342)";
    case FsmbRevision::kV1: return "FSMB v1 (magic 0x46534d42)";
    case FsmbRevision::kV1RfcMagic: return "FSMB v1 (magic 0x464d5342)";
  }
  return "FSMB";
}

std::string fsmb_encode(const std::vector<StackRecord>& stacks) {
  if (stacks.size() > std::numeric_limits<uint32_t>::max()) {
    throw Error("cannot write FSMB file: " + std::to_string(stacks.size()) +
                " stacks do not fit its 32-bit count; reduce the table size");
  }
  size_t size = kHeaderSize;
  for (const StackRecord& stack : stacks) {
    if (stack.ips.size() > kFsmbMaxFrames) {
      throw Error("cannot write FSMB file: stack_id " + std::to_string(stack.stack_id) + " has " +
                  std::to_string(stack.ips.size()) + " frames, the format allows at most " +
                  std::to_string(kFsmbMaxFrames) + "; lower the captured stack depth");
    }
    size += kRecordHeaderSize + stack.ips.size() * kIpSize;
  }

  std::string out;
  out.reserve(size);
  put_u32(out, kMagicV2);
  put_u32(out, kVersionV2);
  put_u32(out, static_cast<uint32_t>(stacks.size()));
  put_u32(out, 0);
  for (const StackRecord& stack : stacks) {
    put_u32(out, stack.stack_id);
    put_u32(out, static_cast<uint32_t>(stack.ips.size()));
    // Saturate: a wrapped count would rank the hottest stack among the coldest.
    put_u32(out, stack.ref_count > std::numeric_limits<uint32_t>::max()
                     ? std::numeric_limits<uint32_t>::max()
                     : static_cast<uint32_t>(stack.ref_count));
    put_u32(out, 0);
    for (uint64_t ip : stack.ips) put_u64(out, ip);
  }
  return out;
}

FsmbFile fsmb_decode(std::string_view bytes, const std::string& name) {
  if (bytes.empty()) {
    throw Error(name + ": empty FSMB file (0 bytes); the export was not written or the copy " +
                "failed, copy it again");
  }
  if (bytes.size() < kHeaderSize) {
    throw Error(name + ": truncated FSMB file: " + std::to_string(bytes.size()) +
                " bytes, the header alone needs " + std::to_string(kHeaderSize) +
                "; copy the whole file again");
  }

  FsmbFile file;
  const uint32_t magic = get_u32(bytes, 0);
  const uint32_t version = get_u32(bytes, 4);
  auto unsupported = [&](const char* expected) {
    return Error(name + ": unsupported FSMB version " + std::to_string(version) + " with magic " +
                 hex32(magic) + " (expected version " + expected +
                 "); the file is damaged or from a newer writer, re-export it");
  };
  if (magic == kMagicV2) {
    // The RFC's reader takes version 1 under its magic too.
    if (version != kVersionV2 && version != kVersionV1) throw unsupported("2 or 1");
    file.revision = version == kVersionV2 ? FsmbRevision::kV2 : FsmbRevision::kV1RfcMagic;
  } else if (magic == kMagicV1) {
    if (version != kVersionV1) throw unsupported("1");
    file.revision = FsmbRevision::kV1;
  } else {
    throw Error(name + ": not a stack_map_bin file: first 4 bytes are " +
                describe_bytes(bytes.substr(0, 4)) + ", an FSMB file starts with magic " +
                hex32(kMagicV2) + " or " + hex32(kMagicV1) +
                "; pass the binary stack_map_bin export, not the text stack_map");
  }
  const uint32_t reserved = get_u32(bytes, 12);
  if (reserved != 0) {
    throw Error(name + ": corrupt FSMB header: reserved field is " + hex32(reserved) +
                ", must be 0; the file is damaged or from a newer writer, re-export it");
  }
  const uint32_t nr_stacks = get_u32(bytes, 8);
  if (nr_stacks > kFsmbMaxStacks) {
    throw Error(name + ": corrupt FSMB header: nr_stacks " + std::to_string(nr_stacks) +
                ", no stack table holds more than " + std::to_string(kFsmbMaxStacks) +
                "; the file is damaged or not an export, re-export it");
  }

  const std::string what = std::string(fsmb_revision_name(file.revision)) + " file: ";
  // A header's count of a truncated file is more than the bytes hold: reserve only what fits.
  file.stacks.reserve(
      std::min<size_t>(nr_stacks, (bytes.size() - kHeaderSize) / kRecordHeaderSize));
  size_t offset = kHeaderSize;
  for (uint32_t index = 0; index < nr_stacks; ++index) {
    const size_t left = bytes.size() - offset;
    const uint32_t nr = left >= kRecordHeaderSize ? get_u32(bytes, offset + 4) : 0;
    if (nr > kFsmbMaxFrames) {
      throw Error(name + ": corrupt FSMB file: " + record_position(index, nr_stacks, offset) +
                  " claims " + std::to_string(nr) + " frames, at most " +
                  std::to_string(kFsmbMaxFrames) +
                  " are possible; the file is damaged, re-export it");
    }
    const size_t needed = kRecordHeaderSize + size_t{nr} * kIpSize;
    // Cut short, as a copy that stopped early leaves it: what came before is whole.
    if (left < needed) {
      file.damage = name + ": truncated " + what + record_position(index, nr_stacks, offset) +
                    " needs " + std::to_string(needed) + " bytes, " + std::to_string(left) +
                    " left; kept the " + records(index) + " before it, copy the whole file again";
      return file;
    }
    StackRecord stack;
    stack.stack_id = get_u32(bytes, offset);
    stack.ref_count = get_u32(bytes, offset + 8);
    // The record's reserved field is not checked: the kernel path writes 0 there, and a later
    // writer using it should not make our reader refuse the whole file.
    stack.ips.reserve(nr);
    for (size_t frame = 0; frame < nr; ++frame)
      stack.ips.push_back(get_u64(bytes, offset + kRecordHeaderSize + frame * kIpSize));
    file.stacks.push_back(std::move(stack));
    offset += needed;
  }
  if (offset != bytes.size()) {
    file.damage = name + ": over-long " + what + std::to_string(bytes.size() - offset) +
                  " trailing bytes at byte " + std::to_string(offset) + " after the header's " +
                  records(nr_stacks) +
                  "; kept every record, re-export the file or check how it was copied";
  }
  return file;
}

FsmbFile fsmb_read_file(const std::string& path) {
  bool opened = false;
  const std::optional<std::string> bytes = read_file(path, &opened);
  if (!opened) {
    throw Error(path + ": cannot open FSMB file: " + std::strerror(errno) +
                "; check the path and that you may read it (exports with raw addresses are "
                "root-only)");
  }
  if (!bytes) {
    throw Error(path + ": cannot read FSMB file: " + std::strerror(errno) +
                "; check that the path is a regular file and copy it again");
  }
  return fsmb_decode(*bytes, path);
}

}  // namespace stackmapd

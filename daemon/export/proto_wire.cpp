// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/proto_wire.h"

namespace stackmapd {

void ProtoWriter::append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>(value | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void ProtoWriter::varint(uint32_t field, uint64_t value) {
  tag(field, kVarint);
  append_varint(data_, value);
}

void ProtoWriter::bytes(uint32_t field, std::string_view value) {
  tag(field, kLengthDelimited);
  append_varint(data_, value.size());
  data_.append(value);
}

void ProtoWriter::fixed64(uint32_t field, uint64_t value) {
  tag(field, kFixed64);
  for (int i = 0; i < 8; ++i) data_ += static_cast<char>(value >> (8 * i));
}

void ProtoWriter::packed_varints(uint32_t field, const std::vector<uint64_t>& values) {
  if (values.empty()) return;
  std::string packed;
  for (uint64_t v : values) append_varint(packed, v);
  bytes(field, packed);
}

}  // namespace stackmapd

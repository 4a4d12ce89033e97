// SPDX-License-Identifier: GPL-2.0
// The tests' own reader of the protobuf wire format, apart from the writer
// under test: a message as its fields in order, and gunzip.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace stackmapd::testing {

struct Field {
  uint32_t number;
  uint32_t wire_type;
  uint64_t value;          // varint, fixed64
  std::string_view bytes;  // length-delimited
};

inline uint64_t read_varint(std::string_view& in) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) throw std::runtime_error("truncated varint");
    const auto b = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("varint too long");
}

inline std::vector<Field> parse_message(std::string_view in) {
  std::vector<Field> fields;
  while (!in.empty()) {
    const uint64_t tag = read_varint(in);
    Field f{static_cast<uint32_t>(tag >> 3), static_cast<uint32_t>(tag & 7), 0, {}};
    if (f.wire_type == 0) {
      f.value = read_varint(in);
    } else if (f.wire_type == 1) {
      if (in.size() < 8) throw std::runtime_error("truncated fixed64");
      for (int i = 0; i < 8; ++i) f.value |= uint64_t{static_cast<uint8_t>(in[i])} << (8 * i);
      in.remove_prefix(8);
    } else if (f.wire_type == 2) {
      const uint64_t n = read_varint(in);
      if (n > in.size()) throw std::runtime_error("truncated field");
      f.bytes = in.substr(0, n);
      in.remove_prefix(n);
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.wire_type));
    }
    fields.push_back(f);
  }
  return fields;
}

inline std::vector<Field> fields_of(const std::vector<Field>& m, uint32_t number) {
  std::vector<Field> out;
  for (const Field& f : m)
    if (f.number == number) out.push_back(f);
  return out;
}

// A repeated varint field, packed or not.
inline std::vector<uint64_t> varints_of(const std::vector<Field>& m, uint32_t number) {
  std::vector<uint64_t> out;
  for (const Field& f : fields_of(m, number)) {
    if (f.wire_type == 0) {
      out.push_back(f.value);
      continue;
    }
    std::string_view packed = f.bytes;
    while (!packed.empty()) out.push_back(read_varint(packed));
  }
  return out;
}

inline std::string gunzip(const std::string& data) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw std::runtime_error("inflateInit2");
  std::string out;
  char buf[65536];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  } while (rc == Z_OK);
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("not a complete gzip stream");
  return out;
}

}  // namespace stackmapd::testing

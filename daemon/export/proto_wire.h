// SPDX-License-Identifier: GPL-2.0
// A protobuf message written field by field in the wire format
// (protobuf.dev/programming-guides/encoding): enough for pprof's profile.proto,
// Perfetto's trace packets and OTLP profiles without libprotobuf, which the static arm64
// build could not link. Nested messages are built in their own writer and
// copied in with their length, so a writer holds only its own bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stackmapd {

class ProtoWriter {
 public:
  // uint32/64, int32/64 (non-negative), bool, enum; 0 is written too.
  void varint(uint32_t field, uint64_t value);
  void bytes(uint32_t field, std::string_view value);  // string, bytes
  void fixed64(uint32_t field, uint64_t value);        // fixed64, little-endian
  void message(uint32_t field, const ProtoWriter& m) { bytes(field, m.data_); }
  // Fields written elsewhere, appended as they are (a message is its fields back to back).
  void append(const ProtoWriter& fields) { data_ += fields.data_; }
  // A repeated varint field as one packed record (what Go's pprof writes);
  // nothing when empty. Perfetto's callstacks need unpacked: call varint() per element.
  void packed_varints(uint32_t field, const std::vector<uint64_t>& values);

  const std::string& data() const { return data_; }
  std::string take() { return std::move(data_); }
  size_t size() const { return data_.size(); }
  void clear() { data_.clear(); }

  static void append_varint(std::string& out, uint64_t value);

 private:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };
  void tag(uint32_t field, WireType type) { append_varint(data_, uint64_t{field} << 3 | type); }

  std::string data_;
};

}  // namespace stackmapd

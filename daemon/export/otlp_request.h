// SPDX-License-Identifier: GPL-2.0
// One ExportProfilesServiceRequest as encode_otlp (otlp.h) fills it: the
// dictionary's tables and the samples of each resource. otlp.cpp groups the
// samples and starts a new request where one would pass the size limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/export/frame_names.h"
#include "daemon/export/otlp.h"
#include "daemon/export/proto_wire.h"

namespace stackmapd {

namespace otlp_detail {

// A sample to write: a callstack, split by one of its keys or whole.
struct OtlpEntry {
  size_t resource = 0;  // into the resources; 0: the host's
  uint32_t callstack = 0;
  const KeyCount* key = nullptr;  // null: the callstack's own counts
  uint64_t count = 0, weight = 0;
};

// Bytes a request holds beyond what Request::size() counts: the nesting of
// its resources, scopes, profiles and dictionary, the zero entries, the
// sample types' strings.
inline constexpr size_t kOtlpRequestOverhead = 4096;

// One ExportProfilesServiceRequest being filled: its dictionary, each
// table's index 0 the zero value, and its resources' samples. size() is an
// upper bound of its bytes so far (less kRequestOverhead), cost() one of
// what an entry adds, so a request is closed before it would pass the limit.
class OtlpRequest {
 public:
  OtlpRequest(const Snapshot& snap, const FrameNames& names, const OtlpOptions& opt);

  bool empty() const { return resources_.empty(); }
  size_t size() const { return size_; }
  size_t cost(const OtlpEntry& e, const std::vector<OtlpResource>& resources) const;
  void add(const OtlpEntry& e, const std::vector<OtlpResource>& resources);
  std::string finish();

 private:
  struct Resource {
    size_t index;
    OtlpResource id;
    ProtoWriter counts, weights;  // the samples of each profile
  };
  struct MappingState {
    std::string path, build_id;
    uint64_t start = 0, limit = 0;
  };

  size_t dictionary_size() const;
  uint64_t string(const std::string& s);
  uint64_t stack(uint32_t callstack);
  uint64_t location(uint32_t frame);
  void user_location(const UserFrame& f, ProtoWriter& loc);
  uint32_t new_mapping(MappingState m);
  ProtoWriter mapping(const MappingState& m);
  uint64_t function(const std::string& name, const std::string& file);
  uint64_t attribute(const std::string& key, const ProtoWriter& value);
  std::vector<uint64_t> attributes(const KeyCount* k);
  ProtoWriter value_type(const std::string& type, const std::string& unit);
  ProtoWriter profile(const ProtoWriter& sample_type, const ProtoWriter& samples,
                      const std::string& period_type);
  static ProtoWriter key_value(const std::string& key, const std::string& value);
  static ProtoWriter key_value(const std::string& key, int64_t value);
  ProtoWriter resource_profiles(const Resource& r);

  const Snapshot& snap_;
  const FrameNames& names_;
  const OtlpOptions& opt_;
  const std::vector<Callstack>& cs_;
  std::vector<int32_t> location_of_frame_;   // by model frame; 0: not in this request yet
  std::vector<int32_t> stack_of_callstack_;  // by model callstack; 0: not yet
  std::vector<uint32_t> user_mapping_;       // by binary; 0: not yet
  uint32_t kernel_mapping_ = 0;
  std::vector<MappingState> mappings_;  // [0]: the zero Mapping
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint64_t> string_ids_;
  std::map<std::pair<std::string, std::string>, uint64_t> function_ids_;
  std::unordered_map<std::string, uint64_t> attribute_ids_;  // by the entry's bytes
  ProtoWriter locations_, functions_, attributes_, stacks_;  // each a dictionary table's entries
  size_t locations_count_ = 0, stacks_count_ = 0;
  size_t strings_bytes_ = 0, mappings_bytes_ = 0;
  std::vector<Resource> resources_;
  size_t size_ = 0;
};

}  // namespace otlp_detail

}  // namespace stackmapd

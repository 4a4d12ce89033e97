// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/otlp_request.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "daemon/export/otlp_protos.h"
#include "daemon/export/utf8_text.h"
#include "daemon/export/weight_unit.h"
#include "daemon/model/hex_text.h"
#include "daemon/sys/build_info.h"

namespace stackmapd {

namespace otlp_detail {

namespace {

namespace o = otlp;

inline constexpr const char* kOtherKey = "stackmapd.other";  // events past the cap on keys
inline constexpr const char* kBuildIdKey = "process.executable.build_id.gnu";
// Semantic conventions 1.37.0, as the OpenTelemetry eBPF profiler writes
// them: its schema, and each location's kind of frame ("kernel", "native"),
// by which Pyroscope tells kernel frames apart.
inline constexpr const char* kSchemaUrl = "https://opentelemetry.io/schemas/1.37.0";
inline constexpr const char* kFrameTypeKey = "profile.frame.type";

// The weight's sample type: off-CPU time, or a --sum field, in bytes where its
// name says so (weight_unit.h's rule, as pprof's sample type reads it).
inline std::pair<std::string, std::string> weight_type(const std::string& unit) {
  switch (weight_kind(unit)) {
    case WeightKind::nanoseconds: return {"off_cpu", "nanoseconds"};
    case WeightKind::bytes: return {unit, "bytes"};
    case WeightKind::count: break;
  }
  return {unit, "count"};
}

// kOtlpRequestOverhead's share of each resource beyond its ids.
constexpr size_t kOtlpResourceOverhead = 512;

// A resource's ids, as text (an escaped byte 4 times its size).
size_t resource_bytes(const OtlpResource& r) {
  return r.container.container_id.size() + r.container.pod_uid.size() +
         4 * (r.executable.size() + r.service.size());
}

// The name Pyroscope gives a profile: the third field of "sample type:unit:
// period type:unit" (pkg/ingester/otlp/convert.go, profileType), split at
// ':'; an empty one is refused as a metric name. So a count of events
// carries a period type named for what it counts: the one source's event
// ("sched_switch"), else "events"; only [A-Za-z0-9_.-] are kept.
std::string profile_name(const std::vector<std::string>& sources) {
  if (sources.size() != 1) return "events";
  std::string name = sources.front().substr(sources.front().rfind(':') + 1);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  return name.empty() ? "events" : name;
}

}  // namespace

OtlpRequest::OtlpRequest(const Snapshot& snap, const FrameNames& names, const OtlpOptions& opt)
    : snap_(snap),
      names_(names),
      opt_(opt),
      cs_(callstacks(snap)),
      location_of_frame_(snap.frames.size(), 0),
      stack_of_callstack_(cs_.size(), 0),
      user_mapping_(snap.user.binaries.size(), 0) {
  string("");
  mappings_.emplace_back();
  ProtoWriter zero;
  locations_.message(o::kLocationTable, zero);
  functions_.message(o::kFunctionTable, zero);
  attributes_.message(o::kAttributeTable, zero);
  stacks_.message(o::kStackTable, zero);
}

size_t OtlpRequest::cost(const OtlpEntry& e, const std::vector<OtlpResource>& resources) const {
  const Callstack& c = cs_[e.callstack];
  size_t n = 2 * (64 + 6 * snap_.keys.fields.size());  // a sample in each profile
  if (!stack_of_callstack_[e.callstack]) n += 16 + 6 * c.frames.size();
  for (uint32_t f : c.frames) {
    if (location_of_frame_[f]) continue;
    n += 100;  // its fields and frame type's index
    const Frame& fr = snap_.frames[f];
    if (!fr.user) {
      n += 4 * names_.function(f).size() + 64;
      continue;
    }
    const UserFrame& u = names_.user(f);
    for (const std::string& s : u.symbols) n += 2 * (4 * s.size() + 64);
    n += 4 * u.srcline.size() + 16;
    if (u.binary >= 0 && static_cast<size_t>(u.binary) < user_mapping_.size() &&
        !user_mapping_[static_cast<size_t>(u.binary)]) {
      const UserBinary& b = snap_.user.binaries[static_cast<size_t>(u.binary)];
      n += 4 * (b.path.size() + b.build_id.size()) + 128;
    }
  }
  if (e.key)
    for (KeyField f : snap_.keys.fields) {
      const KeyFieldInfo& info = key_field(f);
      n += 128 + (info.numeric() ? 0 : 4 * (e.key->key.*info.text).size());
    }
  if (resources_.empty() || resources_.back().index != e.resource) {
    n += kOtlpResourceOverhead + resource_bytes(resources[e.resource]);
  }
  return n;
}

void OtlpRequest::add(const OtlpEntry& e, const std::vector<OtlpResource>& resources) {
  if (resources_.empty() || resources_.back().index != e.resource) {
    resources_.push_back({e.resource, resources[e.resource], {}, {}});
    size_ += kOtlpResourceOverhead + resource_bytes(resources[e.resource]);
  }
  const size_t before = dictionary_size();
  ProtoWriter common;
  common.varint(o::kStackIndex, stack(e.callstack));
  common.packed_varints(o::kSampleAttributeIndices, attributes(e.key));
  Resource& r = resources_.back();
  const size_t samples_before = r.counts.size() + r.weights.size();
  ProtoWriter count = common;
  count.packed_varints(o::kValues, {e.count});
  r.counts.message(o::kSamples, count);
  if (!snap_.weight_unit.empty()) {
    ProtoWriter weight = common;
    weight.packed_varints(o::kValues, {e.weight});
    r.weights.message(o::kSamples, weight);
  }
  size_ += dictionary_size() - before + r.counts.size() + r.weights.size() - samples_before;
}

std::string OtlpRequest::finish() {
  ProtoWriter req;
  for (const Resource& r : resources_) req.message(o::kResourceProfiles, resource_profiles(r));
  ProtoWriter dict;
  for (const MappingState& m : mappings_) dict.message(o::kMappingTable, mapping(m));
  dict.append(locations_);
  dict.append(functions_);
  // link_table[0]: the zero Link, with ids of their full lengths as the
  // .proto asks for strict codecs.
  ProtoWriter link;
  link.bytes(o::kTraceId, std::string(16, '\0'));
  link.bytes(o::kSpanId, std::string(8, '\0'));
  dict.message(o::kLinkTable, link);
  for (const std::string& s : strings_) dict.bytes(o::kStringTable, s);
  dict.append(attributes_);
  dict.append(stacks_);
  req.message(o::kDictionary, dict);
  return req.take();
}

size_t OtlpRequest::dictionary_size() const {
  return strings_bytes_ + mappings_bytes_ + locations_.size() + functions_.size() +
         attributes_.size() + stacks_.size();
}

uint64_t OtlpRequest::string(const std::string& s) {
  auto [it, added] = string_ids_.try_emplace(s, strings_.size());
  if (added) {
    strings_.push_back(utf8_text(s));
    strings_bytes_ += strings_.back().size() + 6;
  }
  return it->second;
}

uint64_t OtlpRequest::stack(uint32_t callstack) {
  int32_t& index = stack_of_callstack_[callstack];
  if (index) return static_cast<uint64_t>(index);
  const Callstack& c = cs_[callstack];
  std::vector<uint64_t> locations;
  for (uint32_t f : c.frames) locations.push_back(location(f));
  ProtoWriter s;
  s.packed_varints(o::kLocationIndices, locations);
  stacks_.message(o::kStackTable, s);
  index = static_cast<int32_t>(++stacks_count_);
  return static_cast<uint64_t>(index);
}

uint64_t OtlpRequest::location(uint32_t frame) {
  int32_t& index = location_of_frame_[frame];
  if (index) return static_cast<uint64_t>(index);
  const Frame& f = snap_.frames[frame];
  ProtoWriter loc;
  if (!f.user) {
    if (!kernel_mapping_)
      kernel_mapping_ =
          new_mapping({"[kernel.kallsyms]", snap_.kernel.build_id, f.addr, f.addr + 1});
    MappingState& m = mappings_[kernel_mapping_];
    m.start = std::min(m.start, f.addr);
    m.limit = std::max(m.limit, f.addr + 1);
    loc.varint(o::kMappingIndex, kernel_mapping_);
    loc.varint(o::kAddress, f.addr);
    // An address that did not resolve is its own function, named by the
    // address as the flame graphs and pprof name it.
    std::string name = names_.function(frame);
    if (name.empty()) name = hex(f.addr);
    ProtoWriter line;
    line.varint(o::kFunctionIndex, function(name, ""));
    loc.message(o::kLines, line);
  } else {
    user_location(names_.user(frame), loc);
  }
  ProtoWriter type;
  type.bytes(o::kStringValue, f.user ? "native" : "kernel");
  loc.packed_varints(o::kLocationAttributeIndices, {attribute(kFrameTypeKey, type)});
  locations_.message(o::kLocationTable, loc);
  index = static_cast<int32_t>(++locations_count_);
  return static_cast<uint64_t>(index);
}

// A user frame's address is its offset in its binary's file, which the
// binary's mapping (memory_start 0, file_offset 0) maps it to: the same in
// every process and under ASLR, what a symbolizer needs with the build id.
// Its lines are its inlined functions, innermost first, as the .proto orders them.
void OtlpRequest::user_location(const UserFrame& f, ProtoWriter& loc) {
  const bool in_file = f.binary >= 0 && static_cast<size_t>(f.binary) < snap_.user.binaries.size();
  if (in_file) {
    uint32_t& m = user_mapping_[static_cast<size_t>(f.binary)];
    if (!m) {
      const UserBinary& b = snap_.user.binaries[static_cast<size_t>(f.binary)];
      m = new_mapping({b.path, b.build_id, 0, 0});
    }
    mappings_[m].limit = std::max(mappings_[m].limit, f.file_offset + 1);
    loc.varint(o::kMappingIndex, m);
  }
  loc.varint(o::kAddress, in_file ? f.file_offset : f.addr);
  const size_t colon = f.srcline.rfind(':');
  const std::string file = colon == std::string::npos ? f.srcline : f.srcline.substr(0, colon);
  const uint64_t line_number =
      colon == std::string::npos ? 0 : strtoull(f.srcline.c_str() + colon + 1, nullptr, 10);
  for (size_t i = 0; i < f.symbols.size(); ++i) {
    ProtoWriter line;
    line.varint(o::kFunctionIndex, function(user_function_name(f.symbols[i]), i ? "" : file));
    if (!i && line_number) line.varint(o::kLine, line_number);
    loc.message(o::kLines, line);
  }
}

uint32_t OtlpRequest::new_mapping(MappingState m) {
  mappings_bytes_ += 4 * (m.path.size() + m.build_id.size()) + 128;
  string(m.path);
  if (!m.build_id.empty()) string(m.build_id);
  mappings_.push_back(std::move(m));
  return static_cast<uint32_t>(mappings_.size() - 1);
}

ProtoWriter OtlpRequest::mapping(const MappingState& m) {
  ProtoWriter w;
  if (m.path.empty()) return w;  // mapping_table[0]
  w.varint(o::kMemoryStart, m.start);
  w.varint(o::kMemoryLimit, m.limit);
  w.varint(o::kFilenameStrindex, string(m.path));
  if (!m.build_id.empty()) {
    ProtoWriter value;
    value.bytes(o::kStringValue, m.build_id);
    w.packed_varints(o::kMappingAttributeIndices, {attribute(kBuildIdKey, value)});
  }
  return w;
}

uint64_t OtlpRequest::function(const std::string& name, const std::string& file) {
  auto [it, added] = function_ids_.try_emplace({name, file}, function_ids_.size() + 1);
  if (added) {
    ProtoWriter fn;
    fn.varint(o::kNameStrindex, string(name));
    fn.varint(o::kSystemNameStrindex, string(name));
    if (!file.empty()) fn.varint(o::kFunctionFilenameStrindex, string(file));
    functions_.message(o::kFunctionTable, fn);
  }
  return it->second;
}

// An attribute_table entry, once per (key, value).
uint64_t OtlpRequest::attribute(const std::string& key, const ProtoWriter& value) {
  ProtoWriter kv;
  kv.varint(o::kKeyStrindex, string(key));
  kv.message(o::kValue, value);
  auto [it, added] = attribute_ids_.try_emplace(kv.data(), attribute_ids_.size() + 1);
  if (added) attributes_.message(o::kAttributeTable, kv);
  return it->second;
}

std::vector<uint64_t> OtlpRequest::attributes(const KeyCount* k) {
  if (!k) return {};
  ProtoWriter value;
  if (k->other) {
    value.varint(o::kBoolValue, 1);
    return {attribute(kOtherKey, value)};
  }
  std::vector<uint64_t> out;
  for (KeyField f : snap_.keys.fields) {
    const KeyFieldInfo& info = key_field(f);
    value.clear();
    if (info.numeric()) value.varint(o::kIntValue, k->key.*info.number);
    else value.bytes(o::kStringValue, utf8_text(k->key.*info.text));
    out.push_back(attribute(info.otlp_attribute, value));
  }
  return out;
}

ProtoWriter OtlpRequest::value_type(const std::string& type, const std::string& unit) {
  ProtoWriter vt;
  vt.varint(o::kTypeStrindex, string(type));
  vt.varint(o::kUnitStrindex, string(unit));
  return vt;
}

// period_type: a count's, every event counted (period 1); empty: none.
ProtoWriter OtlpRequest::profile(const ProtoWriter& sample_type, const ProtoWriter& samples,
                                 const std::string& period_type) {
  ProtoWriter p;
  p.message(o::kSampleType, sample_type);
  p.append(samples);
  if (opt_.time_nanos) p.fixed64(o::kTimeUnixNano, static_cast<uint64_t>(opt_.time_nanos));
  if (opt_.duration_nanos) p.varint(o::kDurationNano, static_cast<uint64_t>(opt_.duration_nanos));
  if (opt_.profile_hz) {
    p.message(o::kPeriodType, value_type("cpu", "nanoseconds"));
    p.varint(o::kPeriod, 1000000000ull / opt_.profile_hz);
  } else if (!period_type.empty()) {
    p.message(o::kPeriodType, value_type(period_type, "count"));
    p.varint(o::kPeriod, 1);
  }
  return p;
}

ProtoWriter OtlpRequest::key_value(const std::string& key, const std::string& value) {
  ProtoWriter any, kv;
  any.bytes(o::kStringValue, value);
  kv.bytes(o::kKey, key);
  kv.message(o::kKeyValue, any);
  return kv;
}

ProtoWriter OtlpRequest::key_value(const std::string& key, int64_t value) {
  ProtoWriter any, kv;
  any.varint(o::kIntValue, static_cast<uint64_t>(value));
  kv.bytes(o::kKey, key);
  kv.message(o::kKeyValue, any);
  return kv;
}

ProtoWriter OtlpRequest::resource_profiles(const Resource& r) {
  ProtoWriter resource;
  const OtlpResource& id = r.id;
  // A process's service when its unit says; else none, which receivers
  // name "unknown_service:" + its executable's name (semantic conventions).
  if (!id.service.empty())
    resource.message(o::kAttributes, key_value("service.name", utf8_text(id.service)));
  else if (id == OtlpResource{})
    resource.message(o::kAttributes, key_value("service.name", "stackmapd"));
  if (!opt_.host_name.empty())
    resource.message(o::kAttributes, key_value("host.name", utf8_text(opt_.host_name)));
  if (id.pid) resource.message(o::kAttributes, key_value("process.pid", int64_t{*id.pid}));
  if (!id.executable.empty())
    resource.message(o::kAttributes,
                     key_value("process.executable.name", utf8_text(id.executable)));
  if (!id.container.container_id.empty())
    resource.message(o::kAttributes, key_value("container.id", id.container.container_id));
  if (!id.container.pod_uid.empty())
    resource.message(o::kAttributes, key_value("k8s.pod.uid", id.container.pod_uid));
  ProtoWriter scope;
  scope.bytes(o::kName, "stackmapd");
  scope.bytes(o::kVersion, build_version());
  ProtoWriter scope_profiles;
  scope_profiles.message(o::kScope, scope);
  scope_profiles.bytes(o::kScopeSchemaUrl, kSchemaUrl);
  const std::string name = profile_name(snap_.sources);
  scope_profiles.message(o::kProfiles, profile(opt_.profile_hz ? value_type("samples", "count")
                                                               : value_type("events", "count"),
                                               r.counts, name));
  if (!snap_.weight_unit.empty()) {
    auto [type, unit] = weight_type(snap_.weight_unit);
    // Off-CPU time is "off_cpu:nanoseconds::" to Pyroscope, with no period.
    scope_profiles.message(
        o::kProfiles, profile(value_type(type, unit), r.weights, type == "off_cpu" ? "" : name));
  }
  ProtoWriter rp;
  rp.message(o::kResource, resource);
  rp.message(o::kScopeProfiles, scope_profiles);
  rp.bytes(o::kResourceSchemaUrl, kSchemaUrl);
  return rp;
}

}  // namespace otlp_detail

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/pprof.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "daemon/export/breakdown.h"
#include "daemon/export/gzip.h"
#include "daemon/export/proto_wire.h"
#include "daemon/export/utf8_text.h"
#include "daemon/export/weight_unit.h"
#include "daemon/model/hex_text.h"

namespace stackmapd {

namespace {

// Field numbers of profile.proto.
namespace pb {
enum Profile : uint32_t {
  kSampleType = 1,
  kSample = 2,
  kMapping = 3,
  kLocation = 4,
  kFunction = 5,
  kStringTable = 6,
  kTimeNanos = 9,
  kDurationNanos = 10,
  kPeriodType = 11,
  kPeriod = 12,
  kComment = 13,
  kDefaultSampleType = 14,
};
enum ValueType : uint32_t { kType = 1, kUnit = 2 };
enum Sample : uint32_t { kLocationId = 1, kValue = 2, kLabel = 3 };
enum Label : uint32_t { kKey = 1, kStr = 2, kNum = 3, kNumUnit = 4 };
enum Mapping : uint32_t {
  kMappingId = 1,
  kMemoryStart = 2,
  kMemoryLimit = 3,
  kFilename = 5,
  kBuildId = 6,
  kHasFunctions = 7,
  kHasFilenames = 8,
  kHasLineNumbers = 9,
  kHasInlineFrames = 10,
};
enum Location : uint32_t { kLocId = 1, kLocMappingId = 2, kAddress = 3, kLine = 4 };
enum Line : uint32_t { kFunctionId = 1, kLineNumber = 2 };
enum Function : uint32_t { kFuncId = 1, kName = 2, kSystemName = 3, kFuncFilename = 4 };
}  // namespace pb

constexpr uint64_t kKernelMappingId = 1;
// --user-stacks: Snapshot::user.binaries[i] is mapping i + kFirstUserMappingId.
constexpr uint64_t kFirstUserMappingId = 2;

// "file:line" (UserFrame::srcline) -> its parts; line 0 when there is none.
std::pair<std::string, uint64_t> split_srcline(const std::string& srcline) {
  const size_t colon = srcline.rfind(':');
  if (colon == std::string::npos || colon + 1 == srcline.size()) return {srcline, 0};
  uint64_t line = 0;
  for (size_t i = colon + 1; i < srcline.size(); ++i) {
    if (srcline[i] < '0' || srcline[i] > '9') return {srcline, 0};
    line = line * 10 + static_cast<uint64_t>(srcline[i] - '0');
  }
  return {srcline.substr(0, colon), line};
}

// Interned strings: index 0 is "", as pprof requires. Every name and path of
// the profile passes here, made text: profile.proto's strings are UTF-8.
class Strings {
 public:
  Strings() { id(""); }
  uint64_t id(const std::string& s) {
    auto [it, added] = ids_.try_emplace(s, table_.size());
    if (added) table_.push_back(utf8_text(s));
    return it->second;
  }
  const std::vector<std::string>& table() const { return table_; }

 private:
  std::unordered_map<std::string, uint64_t> ids_;
  std::vector<std::string> table_;
};

struct Label {
  uint64_t key = 0, str = 0, num = 0, num_unit = 0;
  auto operator<=>(const Label&) const = default;
};

// weight_unit: the num_unit of a label whose value is a weight.
std::vector<Label> labels_of(const KeyCount& k, const std::vector<KeyField>& fields,
                             Strings& strings, const std::string& weight_unit) {
  if (fields.empty()) return {};
  if (k.other) return {{strings.id("other"), strings.id("true"), 0, 0}};
  std::vector<Label> labels;
  for (KeyField f : fields) {
    const KeyFieldInfo& info = key_field(f);
    Label l{strings.id(info.name), 0, 0, 0};
    if (info.numeric()) l.num = info.exported(k.key.*info.number);
    else l.str = strings.id(k.key.*info.text);
    if (const std::string unit = info.label_unit(weight_unit); !unit.empty())
      l.num_unit = strings.id(unit);
    labels.push_back(l);
  }
  return labels;
}

struct Values {
  uint64_t count = 0, weight = 0;
};

// The weight's sample type: off-CPU time, or a --sum field, in bytes where
// its name says so (weight_unit.h's rule, as --top and the SVG read it).
std::pair<std::string, std::string> weight_type(const std::string& unit) {
  switch (weight_kind(unit)) {
    case WeightKind::nanoseconds: return {"offcpu", "nanoseconds"};
    case WeightKind::bytes: return {unit, "bytes"};
    case WeightKind::count: break;
  }
  return {unit, "count"};
}

// The num_unit of a label whose value is a weight (--hist's bucket):
// nanoseconds, bytes, else the weight field's name.
std::string weight_label_unit(const std::string& unit) {
  return weight_kind(unit) == WeightKind::count ? unit : weight_type(unit).second;
}

class Encoder {
 public:
  Encoder(const Snapshot& snap, const FrameNames& names, const PprofOptions& opt)
      : snap_(snap), names_(names), opt_(opt), user_mappings_(snap.user.binaries.size()) {}

  std::string encode() {
    const bool weighted = !snap_.weight_unit.empty();
    const uint64_t period = opt_.profile_hz ? 1000000000ull / opt_.profile_hz : 0;
    if (opt_.profile_hz) {
      value_type(pb::kSampleType, "samples", "count");
      value_type(pb::kSampleType, "cpu", "nanoseconds");
    } else {
      value_type(pb::kSampleType, "events", "count");
    }
    if (weighted) {
      auto [type, unit] = weight_type(snap_.weight_unit);
      value_type(pb::kSampleType, type, unit);
      out_.varint(pb::kDefaultSampleType, strings_.id(type));
    }
    std::vector<KeyField> fields = snap_.keys.fields;
    if (opt_.label_keys)
      std::erase_if(fields, [&](KeyField f) {
        return std::find(opt_.label_keys->begin(), opt_.label_keys->end(), f) ==
               opt_.label_keys->end();
      });

    // A sample per callstack and key: the kernel's frames, then --user-stacks'
    // innermost first (leaf first: the kernel's innermost to the user's outermost).
    for (const Callstack& c : callstacks(snap_)) {
      std::vector<uint64_t> locations;
      for (uint32_t k = 0; k < c.kernel_depth; ++k)
        locations.push_back(location(snap_.frames[c.frames[k]].addr, c.frames[k]));
      for (size_t i = c.kernel_depth; i < c.frames.size(); ++i)
        locations.push_back(user_location(names_.user(c.frames[i]), i > c.kernel_depth));
      if (locations.empty()) locations.push_back(unknown_location());
      std::map<std::vector<Label>, Values> samples;
      if (snap_.keys_requested && !c.keys.empty()) {
        for (uint32_t key : c.keys) {
          const KeyCount& k = snap_.stacks[c.stack].by[key];
          Values& v = samples[labels_of(k, fields, strings_, weight_label_unit(snap_.weight_unit))];
          v.count += k.count;
          v.weight += k.weight;
        }
      } else {
        samples[{}] = {c.count, c.weight};
      }
      for (const auto& [labels, v] : samples) {
        if (v.count == 0) continue;
        std::vector<uint64_t> values{v.count};
        if (opt_.profile_hz) values.push_back(v.count * period);
        if (weighted) values.push_back(v.weight);
        ProtoWriter sample;
        sample.packed_varints(pb::kLocationId, locations);
        sample.packed_varints(pb::kValue, values);
        for (const Label& l : labels) {
          ProtoWriter label;
          label.varint(pb::kKey, l.key);
          if (l.str) label.varint(pb::kStr, l.str);
          if (l.num_unit) {
            label.varint(pb::kNum, l.num);
            label.varint(pb::kNumUnit, l.num_unit);
          }
          sample.message(pb::kLabel, label);
        }
        out_.message(pb::kSample, sample);
      }
    }

    if (!locations_.empty()) write_mapping();
    write_user_mappings();
    out_.append(locations_out_);
    out_.append(functions_out_);
    if (opt_.time_nanos) out_.varint(pb::kTimeNanos, static_cast<uint64_t>(opt_.time_nanos));
    if (opt_.duration_nanos)
      out_.varint(pb::kDurationNanos, static_cast<uint64_t>(opt_.duration_nanos));
    if (opt_.profile_hz) {
      value_type(pb::kPeriodType, "cpu", "nanoseconds");
      out_.varint(pb::kPeriod, period);
    }
    out_.varint(pb::kComment, strings_.id(snap_.user.enabled ? "stackmapd kernel and user stacks"
                                                             : "stackmapd kernel stacks"));
    if (!snap_.kernel.release.empty())
      out_.varint(pb::kComment, strings_.id("kernel " + snap_.kernel.release));
    for (const std::string& s : strings_.table()) out_.bytes(pb::kStringTable, s);
    return gzip(out_.data());
  }

 private:
  void value_type(uint32_t field, const std::string& type, const std::string& unit) {
    ProtoWriter vt;
    vt.varint(pb::kType, strings_.id(type));
    vt.varint(pb::kUnit, strings_.id(unit));
    out_.message(field, vt);
  }

  // Location ids start at 1: pprof rejects 0.
  uint64_t location(uint64_t ip, uint32_t frame) {
    auto [it, added] = locations_.try_emplace(ip, next_location_);
    if (!added) return it->second;
    ++next_location_;
    min_ip_ = std::min(min_ip_, ip);
    max_ip_ = std::max(max_ip_, ip);
    ProtoWriter loc;
    loc.varint(pb::kLocId, it->second);
    loc.varint(pb::kLocMappingId, kKernelMappingId);
    loc.varint(pb::kAddress, shown(ip));
    // An address that did not resolve is its own function, named by the
    // address as the flame graphs name it: pprof's default view drops
    // addresses and would merge every such location into one node.
    std::string name = names_.function(frame);
    kernel_functions_ |= !name.empty();
    if (name.empty()) name = opt_.address_base ? "_text+" + hex(shown(ip)) : hex(ip);
    ProtoWriter line;
    line.varint(pb::kFunctionId, function(name, ""));
    loc.message(pb::kLine, line);
    // Written after the samples, field by field: the records of a repeated
    // field may come in any order.
    locations_out_.message(pb::kLocation, loc);
    return it->second;
  }

  // A user frame. Its address is its offset in its binary's file, which is
  // what the binary's mapping (memory_start 0, file_offset 0) maps it to: the
  // same in every process and under ASLR, and what a symbolizer needs with
  // the build id. A return address is written less one, inside the call, as
  // profile.proto allows and as it was symbolized. A frame in no file keeps
  // its address, without a mapping.
  uint64_t user_location(const UserFrame& f, bool is_return) {
    const bool in_file =
        f.binary >= 0 && static_cast<size_t>(f.binary) < snap_.user.binaries.size();
    const uint64_t mapping = in_file ? kFirstUserMappingId + static_cast<uint64_t>(f.binary) : 0;
    uint64_t address = in_file ? f.file_offset : f.addr;
    if (is_return && address) --address;
    auto [it, added] = user_locations_.try_emplace({mapping, address}, next_location_);
    if (!added) return it->second;
    ++next_location_;
    ProtoWriter loc;
    loc.varint(pb::kLocId, it->second);
    if (mapping) loc.varint(pb::kLocMappingId, mapping);
    loc.varint(pb::kAddress, address);
    // Innermost inlined function first, the one they were inlined into
    // last, as profile.proto orders a location's lines; file:line is known
    // for the innermost only.
    const auto [file, line_number] = split_srcline(f.srcline);
    // In no file and unnamed: its address as the function, as the text
    // outputs name it; pprof would show "<unknown>".
    if (!in_file && f.symbols.empty()) {
      ProtoWriter line;
      line.varint(pb::kFunctionId, function(user_frame_names(snap_.user, f, false).front(), ""));
      loc.message(pb::kLine, line);
    }
    for (size_t i = 0; i < f.symbols.size(); ++i) {
      ProtoWriter line;
      line.varint(pb::kFunctionId, function(user_function_name(f.symbols[i]), i ? "" : file));
      if (!i && line_number) line.varint(pb::kLineNumber, line_number);
      loc.message(pb::kLine, line);
    }
    if (in_file) {
      UserMapping& m = user_mappings_[static_cast<size_t>(f.binary)];
      m.used = true;
      m.limit = std::max(m.limit, address + 1);
      m.functions |= !f.symbols.empty();
      m.lines |= !f.symbols.empty() && line_number;
    }
    locations_out_.message(pb::kLocation, loc);
    return it->second;
  }

  // The frame of a stack without frames (a sample taken in user mode, its
  // user stack not recorded), named as the folded stacks name it: pprof
  // drops a sample without locations, and its count with it.
  uint64_t unknown_location() {
    if (unknown_location_) return unknown_location_;
    unknown_location_ = next_location_++;
    ProtoWriter loc;
    loc.varint(pb::kLocId, unknown_location_);
    ProtoWriter line;
    line.varint(pb::kFunctionId, function("[unknown]", ""));
    loc.message(pb::kLine, line);
    locations_out_.message(pb::kLocation, loc);
    return unknown_location_;
  }

  uint64_t function(const std::string& name, const std::string& file) {
    auto [it, added] = functions_.try_emplace({name, file}, functions_.size() + 1);
    if (added) {
      ProtoWriter fn;
      fn.varint(pb::kFuncId, it->second);
      fn.varint(pb::kName, strings_.id(name));
      fn.varint(pb::kSystemName, strings_.id(name));
      if (!file.empty()) fn.varint(pb::kFuncFilename, strings_.id(file));
      functions_out_.message(pb::kFunction, fn);
    }
    return it->second;
  }

  uint64_t shown(uint64_t ip) const { return ip >= opt_.address_base ? ip - opt_.address_base : 0; }

  void write_mapping() {
    ProtoWriter m;
    m.varint(pb::kMappingId, kKernelMappingId);
    m.varint(pb::kMemoryStart, shown(min_ip_));
    m.varint(pb::kMemoryLimit, shown(max_ip_) + 1);
    m.varint(pb::kFilename, strings_.id("[kernel.kallsyms]"));
    if (!snap_.kernel.build_id.empty()) m.varint(pb::kBuildId, strings_.id(snap_.kernel.build_id));
    // Only when a symbol table named its frames: a mapping without it is one
    // a symbolizer may still resolve (by its build id).
    if (kernel_functions_) m.varint(pb::kHasFunctions, 1);
    out_.message(pb::kMapping, m);
  }

  // One mapping per binary the samples use, as if the file were mapped
  // whole at address 0: memory_start 0 and file_offset 0 (not written:
  // protobuf's default), so an address is the file offset. The has_* flags
  // say what its locations carry (any one, as pprof's own symbolizer sets
  // them): file:line comes with debug info, which also gives inlined frames.
  void write_user_mappings() {
    for (size_t b = 0; b < user_mappings_.size(); ++b) {
      const UserMapping& u = user_mappings_[b];
      if (!u.used) continue;
      const UserBinary& binary = snap_.user.binaries[b];
      ProtoWriter m;
      m.varint(pb::kMappingId, kFirstUserMappingId + b);
      m.varint(pb::kMemoryLimit, u.limit);
      m.varint(pb::kFilename, strings_.id(binary.path));
      if (!binary.build_id.empty()) m.varint(pb::kBuildId, strings_.id(binary.build_id));
      if (u.functions) m.varint(pb::kHasFunctions, 1);
      if (u.lines) {
        m.varint(pb::kHasFilenames, 1);
        m.varint(pb::kHasLineNumbers, 1);
        m.varint(pb::kHasInlineFrames, 1);
      }
      out_.message(pb::kMapping, m);
    }
  }

  struct UserMapping {
    bool used = false, functions = false, lines = false;
    uint64_t limit = 0;  // one past the highest address written
  };

  const Snapshot& snap_;
  const FrameNames& names_;
  const PprofOptions& opt_;
  std::vector<UserMapping> user_mappings_;  // by binary
  Strings strings_;
  ProtoWriter out_;
  std::unordered_map<uint64_t, uint64_t> locations_;                  // kernel ip -> id
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> user_locations_;  // (mapping, address) -> id
  uint64_t next_location_ = 1;
  uint64_t unknown_location_ = 0;                                      // 0: not written yet
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;  // (name, file) -> id
  ProtoWriter locations_out_, functions_out_;
  uint64_t min_ip_ = UINT64_MAX, max_ip_ = 0;
  bool kernel_functions_ = false;  // a kernel location named its function
};

}  // namespace

std::string encode_pprof(const Snapshot& snap, const FrameNames& names, const PprofOptions& opt) {
  return Encoder(snap, names, opt).encode();
}

}  // namespace stackmapd

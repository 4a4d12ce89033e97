// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/json_snapshot.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "daemon/export/json_text.h"
#include "daemon/model/fsmb.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

using nlohmann::json;

// "sym+0xoff/0xsize [mod]" -> "sym [mod]"; "0x..." (unresolved) -> "".
std::string function_of(std::string_view symbol) {
  if (symbol.starts_with("0x")) return "";
  std::string_view module;
  if (size_t open = symbol.rfind(" ["); open != std::string_view::npos && symbol.ends_with("]")) {
    module = symbol.substr(open);
    symbol = symbol.substr(0, open);
  }
  if (size_t plus = symbol.rfind("+0x"); plus != std::string_view::npos && plus > 0)
    symbol = symbol.substr(0, plus);
  return std::string(symbol) + std::string(module);
}

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  json parse(std::string_view text) const { return parse_json_export(text, source_); }

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(source_ + ": " + where + " " + what + ": " + kJsonExportFix);
  }
  // j[key], an array of at most `most` elements.
  const json& array(const json& j, const char* key, const std::string& where,
                    size_t most = SIZE_MAX) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array()) fail(where, std::string("has no \"") + key + "\" array");
    if (it->size() > most)
      fail(where + "." + key, "has " + std::to_string(it->size()) + " elements, more than " +
                                  std::to_string(most) + " (no stack is that deep)");
    return *it;
  }
  uint64_t number(const json& j, const char* key, const std::string& where) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned())
      fail(where, std::string("has no non-negative integer \"") + key + "\"");
    return it->get<uint64_t>();
  }
  // j[key] if present, as number() checks it: json's value() would convert a
  // float past 2^64 (what 1e20 parses as) to an integer, which is undefined.
  uint64_t number_or(const json& j, const char* key, uint64_t otherwise,
                     const std::string& where) const {
    return j.contains(key) ? number(j, key, where) : otherwise;
  }
  std::string text(const json& j, const char* key, const std::string& where) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string())
      fail(where, std::string("has no string \"") + key + "\"");
    return it->get<std::string>();
  }

 private:
  const std::string& source_;
};

uint64_t hex_field(const json& j, const char* key, const Reader& r, const std::string& where) {
  const std::string v = r.text(j, key, where);
  try {
    return std::stoull(v, nullptr, 16);
  } catch (const std::exception&) {
    r.fail(where + "." + key, "is not a hex string");
  }
}

// A build id names a file under binaries/ (user_binaries.h): hex only.
bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(uint8_t(c)); });
}

// --user-stacks' section (exports.cpp, user_stacks_json).
void read_user_stacks(const json& u, UserStackSet& set, const Reader& r) {
  set.enabled = true;
  const json& binaries = r.array(u, "binaries", "user_stacks");
  for (size_t i = 0; i < binaries.size(); ++i) {
    const std::string where = "user_stacks.binaries[" + std::to_string(i) + "]";
    UserBinary b{r.text(binaries[i], "path", where), r.text(binaries[i], "build_id", where)};
    if (!is_hex(b.build_id)) r.fail(where + ".build_id", "is not a hex build id");
    set.binaries.push_back(std::move(b));
  }
  const json& stacks = r.array(u, "stacks", "user_stacks");
  for (size_t i = 0; i < stacks.size(); ++i) {
    const json& s = stacks[i];
    const std::string where = "user_stacks.stacks[" + std::to_string(i) + "]";
    UserStack us;
    us.pid = static_cast<uint32_t>(r.number(s, "pid", where));
    us.truncated = s.value("truncated", false);
    // Each name is a frame of the flame graphs: bounded like the frames.
    size_t names = 0;
    const json& frames = r.array(s, "frames", where, kFsmbMaxFrames);
    for (size_t k = 0; k < frames.size(); ++k) {
      const json& fr = frames[k];
      const std::string at = where + ".frames[" + std::to_string(k) + "]";
      UserFrame f;
      f.addr = hex_field(fr, "address", r, at);
      if (fr.contains("binary")) {
        const uint64_t binary = r.number(fr, "binary", at);
        if (binary >= set.binaries.size())
          r.fail(at + ".binary", "names no binary of user_stacks.binaries");
        f.binary = static_cast<int32_t>(binary);
        f.file_offset = hex_field(fr, "file_offset", r, at);
        if (fr.contains("elf_addr")) f.elf_addr = hex_field(fr, "elf_addr", r, at);
      }
      if (fr.contains("symbols"))
        f.symbols = r.array(fr, "symbols", at, kFsmbMaxFrames).get<std::vector<std::string>>();
      if ((names += std::max<size_t>(f.symbols.size(), 1)) > kFsmbMaxFrames)
        r.fail(where, "has more frames than any stack (" + std::to_string(kFsmbMaxFrames) + ")");
      f.srcline = fr.value("srcline", "");
      us.frames.push_back(std::move(f));
    }
    set.stacks.emplace(static_cast<uint32_t>(r.number(s, "user_stack_id", where)), std::move(us));
  }
}

KeyValues key_of(const json& e, const KeySpec& keys, const Reader& r, const std::string& where) {
  KeyValues k;
  for (KeyField f : keys.fields) {
    const KeyFieldInfo& info = key_field(f);
    if (info.numeric()) k.*info.number = static_cast<uint32_t>(r.number(e, info.name, where));
    else k.*info.text = r.text(e, info.name, where);
  }
  return k;
}

JsonExport read(std::string_view json_text, const Reader& r) {
  const json doc = r.parse(json_text);
  if (!doc.is_object() || !doc.contains("stacks") || !doc["stacks"].is_array())
    r.fail("has", "no \"stacks\" array");
  JsonExport out;
  Snapshot& snap = out.snap;
  if (auto keys = doc.find("keys"); keys != doc.end()) {
    std::string list;
    for (const json& k : *keys) list += (list.empty() ? "" : ",") + k.get<std::string>();
    snap.keys = KeySpec::parse(list);
    snap.keys_requested = true;
  }
  if (auto w = doc.find("weight"); w != doc.end() && w->is_string()) snap.weight_unit = *w;
  if (auto s = doc.find("sources"); s != doc.end() && s->is_array())
    snap.sources = s->get<std::vector<std::string>>();
  if (auto k = doc.find("kernel"); k != doc.end() && k->is_object()) {
    snap.kernel.release = k->value("release", "");
    snap.kernel.build_id = k->value("build_id", "");
  }
  if (auto u = doc.find("user_stacks"); u != doc.end() && u->is_object())
    read_user_stacks(*u, snap.user, r);
  if (auto st = doc.find("stats"); st != doc.end() && st->is_object())
    snap.stats.counters[SMC_HITS] = r.number_or(*st, "hits", 0, "stats");

  const json& stacks = doc["stacks"];
  for (size_t i = 0; i < stacks.size(); ++i) {
    const json& s = stacks[i];
    const std::string where = "stacks[" + std::to_string(i) + "]";
    if (!s.is_object()) r.fail(where, "is not an object");
    StackRecord rec;
    rec.stack_id = static_cast<uint32_t>(r.number(s, "stack_id", where));
    rec.ref_count = r.number(s, "ref_count", where);
    rec.weight = snap.weight_unit.empty() ? rec.ref_count : r.number(s, "sum", where);
    const json& ips = r.array(s, "ips", where, kFsmbMaxFrames);
    const json* symbols = s.contains("symbols") ? &s["symbols"] : nullptr;
    for (size_t k = 0; k < ips.size(); ++k) {
      const json& ip = ips[k];
      uint64_t value = 0;
      try {
        value = std::stoull(ip.get<std::string>(), nullptr, 16);
      } catch (const std::exception&) {
        r.fail(where + ".ips[" + std::to_string(k) + "]", "is not a hex address string");
      }
      rec.ips.push_back(value);
      if (symbols && k < symbols->size() && (*symbols)[k].is_string())
        if (std::string fn = function_of((*symbols)[k].get<std::string>()); !fn.empty())
          out.functions.emplace(value, std::move(fn));
    }
    if (auto by = s.find("by");
        (snap.keys_requested || snap.user.enabled) && by != s.end() && by->is_array()) {
      for (size_t k = 0; k < by->size(); ++k) {
        const json& e = (*by)[k];
        const std::string at = where + ".by[" + std::to_string(k) + "]";
        KeyCount kc;
        kc.other = e.value("other", false);
        if (!kc.other && snap.keys_requested) kc.key = key_of(e, snap.keys, r, at);
        if (!kc.other && snap.user.enabled)
          kc.key.ustack = static_cast<uint32_t>(r.number_or(e, "user_stack_id", kNoUserStack, at));
        kc.count = r.number(e, "count", at);
        kc.weight = snap.weight_unit.empty() ? kc.count : r.number(e, "sum", at);
        rec.by.push_back(std::move(kc));
      }
    }
    snap.stacks.push_back(std::move(rec));
  }
  return out;
}

}  // namespace

JsonExport read_json_export(std::string_view json_text, const std::string& source) {
  Reader r(source);
  try {
    return read(json_text, r);
  } catch (const nlohmann::json::exception& e) {
    r.fail("has a field of the wrong type", "(" + std::string(e.what()) + ")");
  }
}

}  // namespace stackmapd

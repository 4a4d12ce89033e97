// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/json_snapshot.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "daemon/export/json_text.h"
#include "daemon/model/fsmb.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

using nlohmann::json;

// "sym+0xoff/0xsize [mod]" -> {sym, mod}; anything else ("[unknown]") is its own name.
FunctionName function_of(std::string_view symbol) {
  std::string_view module;
  if (size_t open = symbol.rfind(" ["); open != std::string_view::npos && symbol.ends_with("]")) {
    module = symbol.substr(open + 2, symbol.size() - open - 3);
    symbol = symbol.substr(0, open);
  }
  if (size_t plus = symbol.rfind("+0x"); plus != std::string_view::npos && plus > 0)
    symbol = symbol.substr(0, plus);
  return {std::string(symbol), std::string(module)};
}

// "0x..." as an address; nullopt for anything else.
std::optional<uint64_t> address_of(const std::string& text) {
  if (!text.starts_with("0x") || text.size() < 3 || text.size() > 18) return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data() + 2, text.data() + text.size(), value, 16);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
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
      fail(where + "." + key, "is missing or not a non-negative integer");
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

// A stack's frames: its "ips", each named by its "symbols" entry when that
// resolved; or, in an export written without addresses, its "symbols" alone,
// each distinct function given a stand-in address below the first page (no
// code is mapped there) that its name is kept under.
class FrameReader {
 public:
  FrameReader(const Reader& r, FunctionNames& names) : r_(r), names_(names) {}

  std::vector<uint64_t> read(const json& s, const std::string& where) {
    const json* symbols = s.contains("symbols") ? &s["symbols"] : nullptr;
    if (!s.contains("ips")) {
      if (!symbols) r_.fail(where, "has neither a \"symbols\" nor an \"ips\" array");
      const json& names = r_.array(s, "symbols", where, kFsmbMaxFrames);
      std::vector<uint64_t> ips;
      for (size_t k = 0; k < names.size(); ++k) ips.push_back(stand_in(symbol(names, k, where)));
      return ips;
    }
    const json& ips = r_.array(s, "ips", where, kFsmbMaxFrames);
    std::vector<uint64_t> out;
    for (size_t k = 0; k < ips.size(); ++k) {
      const std::optional<uint64_t> parsed =
          ips[k].is_string() ? address_of(ips[k].get<std::string>()) : std::nullopt;
      if (!parsed)
        r_.fail(where + ".ips[" + std::to_string(k) + "]", "is not a hex address string");
      // A copy out of the optional: gcc 12 for arm64 cannot see that fail() does not return.
      const uint64_t ip = parsed.value_or(0);
      out.push_back(ip);
      if (symbols && symbols->is_array() && k < symbols->size()) {
        const std::string name = symbol(*symbols, k, where);
        if (!address_of(name)) names_.emplace(ip, function_of(name));
      }
    }
    return out;
  }

 private:
  const std::string& symbol(const json& symbols, size_t k, const std::string& where) const {
    const json& f = symbols[k];
    if (!f.is_string() || f.get_ref<const std::string&>().empty())
      r_.fail(where + ".symbols[" + std::to_string(k) + "]", "is not a non-empty string");
    return f.get_ref<const std::string&>();
  }
  uint64_t stand_in(const std::string& name) {
    if (std::optional<uint64_t> ip = address_of(name)) return *ip;  // unresolved: its address
    FunctionName fn = function_of(name);
    const std::string key = fn.name + " [" + fn.module + "]";
    auto [it, added] = stand_ins_.try_emplace(key, stand_ins_.size() + 1);
    if (added) names_.emplace(it->second, std::move(fn));
    return it->second;
  }

  const Reader& r_;
  FunctionNames& names_;
  std::unordered_map<std::string, uint64_t> stand_ins_;
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
    if (info.numeric()) k.*info.number = info.imported(r.number(e, info.name, where));
    else k.*info.text = r.text(e, info.name, where);
  }
  return k;
}

JsonExport read(std::string_view json_text, const Reader& r) {
  const json doc = r.parse(json_text);
  // The whole export, or the bare array of its stacks (decode --json).
  const json* stacks = &doc;
  if (doc.is_object()) {
    auto it = doc.find("stacks");
    if (it == doc.end()) r.fail("has", "no \"stacks\" array");
    stacks = &*it;
  }
  if (!stacks->is_array()) r.fail("\"stacks\"", "is not an array");
  JsonExport out;
  Snapshot& snap = out.snap;
  const json none = json::object();
  const json& meta = doc.is_object() ? doc : none;
  if (auto keys = meta.find("keys"); keys != meta.end()) {
    std::string list;
    for (const json& k : *keys) list += (list.empty() ? "" : ",") + k.get<std::string>();
    if (!list.empty()) snap.keys = KeySpec::parse_exported(list);
    snap.keys_requested = true;
  }
  if (auto w = meta.find("weight"); w != meta.end() && w->is_string()) snap.weight_unit = *w;
  if (auto s = meta.find("sources"); s != meta.end() && s->is_array())
    snap.sources = s->get<std::vector<std::string>>();
  if (auto k = meta.find("kernel"); k != meta.end() && k->is_object()) {
    snap.kernel.release = k->value("release", "");
    snap.kernel.build_id = k->value("build_id", "");
  }
  if (auto u = meta.find("user_stacks"); u != meta.end() && u->is_object())
    read_user_stacks(*u, snap.user, r);
  if (auto st = meta.find("stats"); st != meta.end() && st->is_object())
    snap.stats.counters[SMC_HITS] = r.number_or(*st, "hits", 0, "stats");

  FrameReader frames(r, out.functions);
  for (size_t i = 0; i < stacks->size(); ++i) {
    const json& s = (*stacks)[i];
    const std::string where = "stacks[" + std::to_string(i) + "]";
    if (!s.is_object()) r.fail(where, "is not an object");
    StackRecord rec;
    // Numbered by its place when the file does not say (a bare array of our own making).
    rec.stack_id = static_cast<uint32_t>(r.number_or(s, "stack_id", i, where));
    rec.ref_count = r.number(s, "ref_count", where);
    rec.weight = snap.weight_unit.empty() ? rec.ref_count : r.number(s, "sum", where);
    rec.ips = frames.read(s, where);
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
  intern_callstacks(snap);
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

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/exports.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

#include "daemon/export/json_text.h"
#include "daemon/export/output_plan.h"
#include "daemon/export/user_binaries.h"
#include "daemon/export/utf8_text.h"
#include "daemon/model/fsmb.h"
#include "daemon/model/hex_text.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"
#include "daemon/sys/staged_files.h"

namespace stackmapd {

namespace {

using nlohmann::json;

void stat_line(std::string& out, const char* name, const std::string& value) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%-11s ", (std::string(name) + ":").c_str());
  out += buf;
  out += value;
  out += '\n';
}

json stack_json(const StackRecord& s, const FrameNames& names) {
  json ips = json::array(), syms = json::array();
  for (uint64_t ip : s.ips) {
    ips.push_back(hex(ip));
    syms.push_back(names.kernel_text(ip));
  }
  return json{{"stack_id", s.stack_id},
              {"ref_count", s.ref_count},
              {"depth", s.ips.size()},
              {"ips", ips},
              {"symbols", syms}};
}

// JsonOptions::addresses false: the frames' "ips" go, and an unresolved
// frame (its symbol is its address) becomes "[unknown]".
void without_addresses(json& stack) {
  stack.erase("ips");
  for (auto& sym : stack["symbols"])
    if (sym.get_ref<const std::string&>().starts_with("0x")) sym = "[unknown]";
}

const char* counter_name(int c) {
  switch (c) {
    case SMC_HITS: return "hits";
    case SMC_INSERTS: return "inserts";
    case SMC_DROP_POOL_FULL: return "drop_pool_full";
    case SMC_DROP_PROBE_LIMIT: return "drop_probe_limit";
    case SMC_DROP_BUSY: return "drop_busy";
    case SMC_DROP_STACK_ERROR: return "drop_stack_error";
    case SMC_DROP_NO_KERNEL_STACK: return "drop_no_kernel_stack";
    case SMC_DROP_RINGBUF_FULL: return "drop_ringbuf_full";
    case SMC_DROP_RESETTING: return "drop_resetting";
    case SMC_DROP_NESTED: return "drop_nested";
    case SMC_DROP_OFFCPU_FULL: return "drop_offcpu_full";
    case SMC_DROP_OFFCPU_UNENDED: return "drop_offcpu_unended";
    case SMC_TRUNCATED: return "truncated";
    case SMC_NAMES_FULL: return "names_full";
    case SMC_SENT_WHOLE: return "sent_whole";
    case SMC_NO_USER_STACK: return "no_user_stack";
    case SMC_USER_NOT_STORED: return "user_not_stored";
    case SMC_USER_TRUNCATED: return "user_depth_truncated";
    case SMC_USER_COMPLETE: return "user_unwind_complete";
    case SMC_USER_NOT_LOADED: return "user_unwind_not_loaded";
    case SMC_USER_NO_TABLE: return "user_unwind_no_table";
    case SMC_USER_FAULT: return "user_unwind_fault";
    case SMC_USER_UNSUPPORTED: return "user_unwind_unsupported";
    case SMC_USER_OUTSIDE_CODE: return "user_unwind_outside_code";
  }
  return "unknown";
}

// The lines after the per-epoch counters, in stat and JSON alike.
std::vector<std::pair<const char*, uint64_t>> extra_stats(const TableStats& st) {
  std::vector<std::pair<const char*, uint64_t>> lines = {{"resets", st.resets},
                                                         {"events_total", st.events_total},
                                                         {"verify_ok", st.verify_ok},
                                                         {"verify_mismatch", st.verify_mismatch},
                                                         {"stale_records", st.stale_records},
                                                         {"bad_records", st.bad_records},
                                                         {"key_pairs", st.key_pairs},
                                                         {"max_key_pairs", st.max_key_pairs},
                                                         {"key_overflow", st.key_overflow}};
  // Only once it happened: the lines are those of earlier versions until then.
  if (st.key_pairs_folded) lines.emplace_back("key_pairs_folded", st.key_pairs_folded);
  lines.insert(lines.end(), {{"offcpu_open", st.offcpu_open},
                             {"ring_bytes", st.ring_bytes},
                             {"overflow_stacks", st.overflow_stacks},
                             {"overflow_lost", st.overflow_lost}});
  return lines;
}

// Counters past SMC_SENT_WHOLE are --user-stacks' own: without it the
// exports keep their lines as they were.
int last_counter(const TableStats& st) { return st.user_stacks ? SMC_NR : SMC_SENT_WHOLE + 1; }

std::vector<std::pair<const char*, uint64_t>> user_stats(const TableStats& st) {
  if (!st.user_stacks) return {};
  return {{"user_entries", st.user_entries},
          {"user_stacks_truncated", st.user_stacks_truncated},
          {"user_processes_gone", st.user_processes_gone},
          {"user_maps_evicted", st.user_maps_evicted},
          {"user_binaries_evicted", st.user_binaries_evicted},
          {"user_parse_failures", st.user_parse_failures},
          {"unwind_processes", st.unwind_processes},
          {"unwind_tables", st.unwind_tables},
          {"unwind_rows", st.unwind_rows},
          {"unwind_rows_full", st.unwind_rows_full},
          {"unwind_tables_freed", st.unwind_tables_freed}};
}

// --user-stacks: every user stack the breakdown names, each frame with what
// symbolizes it anywhere (build id + file offset), and the binaries.
json user_stacks_json(const UserStackSet& set, bool addresses) {
  json binaries = json::array();
  for (const UserBinary& b : set.binaries)
    binaries.push_back({{"path", b.path}, {"build_id", b.build_id}});
  json stacks = json::array();
  for (const auto& [id, s] : set.stacks) {
    json frames = json::array();
    for (const UserFrame& f : s.frames) {
      json fr{{"symbols", f.symbols}};
      if (addresses) fr["address"] = hex(f.addr);
      if (f.binary >= 0) {
        fr["binary"] = f.binary;
        fr["path"] = set.binaries[f.binary].path;
        fr["build_id"] = set.binaries[f.binary].build_id;
        fr["file_offset"] = hex(f.file_offset);
        if (f.elf_addr) fr["elf_addr"] = hex(f.elf_addr);
      }
      if (!f.srcline.empty()) fr["srcline"] = f.srcline;
      frames.push_back(std::move(fr));
    }
    stacks.push_back({{"user_stack_id", id},
                      {"pid", s.pid},
                      {"truncated", s.truncated},
                      {"frames", std::move(frames)}});
  }
  return json{{"binaries", std::move(binaries)}, {"stacks", std::move(stacks)}};
}

// --by's breakdown of one stack, and its --sum/--offcpu weight.
void add_breakdown(const Snapshot& snap, const StackRecord& s, json& out) {
  const bool weighted = !snap.weight_unit.empty();
  if (weighted) out["sum"] = s.weight;
  if (!snap.keys_requested && !snap.user.enabled) return;
  json by = json::array();
  for (const KeyCount& k : s.by) {
    json entry = json::object();
    if (k.other) entry["other"] = true;
    std::vector<KeyField> fields;
    if (!k.other && snap.keys_requested) fields = snap.keys.fields;
    if (snap.user.enabled && !k.other && k.key.ustack != kNoUserStack)
      entry["user_stack_id"] = k.key.ustack;
    for (KeyField f : fields) {
      const KeyFieldInfo& info = key_field(f);
      entry[info.name] =
          info.numeric() ? json(info.exported(k.key.*info.number)) : json(k.key.*info.text);
    }
    entry["count"] = k.count;
    if (weighted) entry["sum"] = k.weight;
    by.push_back(std::move(entry));
  }
  out["by"] = std::move(by);
}

}  // namespace

std::string symbolize(uint64_t ip, const Kallsyms* ksyms) {
  return ksyms ? ksyms->format(ip) : hex(ip);
}

std::string format_stack_map(const std::vector<StackRecord>& stacks, const FrameNames& names) {
  std::string out;
  for (const auto& s : stacks) {
    out += "stack_id " + std::to_string(s.stack_id) + " [ref " + std::to_string(s.ref_count) +
           ", depth " + std::to_string(s.ips.size()) + "]\n";
    for (size_t i = 0; i < s.ips.size(); ++i) {
      out += "  [" + std::to_string(i) + "] ";
      append_utf8(out, names.kernel_text(s.ips[i]));
      out += '\n';
    }
    out += '\n';
  }
  return out;
}

std::string format_stat(const TableStats& st) {
  std::string out;
  // The RFC's five lines first, in its layout: scripts grep them.
  stat_line(out, "entries", std::to_string(st.entries) + " / " + std::to_string(st.pool_size));
  stat_line(out, "table_size", std::to_string(st.table_size));
  stat_line(out, "hits", std::to_string(st.get(SMC_HITS)));
  stat_line(out, "drops", std::to_string(st.drops()));
  // Like the RFC, no rate line where no event gave it a value.
  if (auto rate = st.hit_rate_percent()) stat_line(out, "hit_rate", std::to_string(*rate) + "%");
  if (auto rate = st.reuse_rate_percent())
    stat_line(out, "reuse_rate", std::to_string(*rate) + "%");
  stat_line(out, "events", std::to_string(st.events()));
  for (int c = SMC_INSERTS; c < last_counter(st); ++c)
    stat_line(out, counter_name(c), std::to_string(st.counters[c]));
  stat_line(out, "pool_full", st.pool_full() ? "yes" : "no");
  for (const auto& [name, value] : extra_stats(st)) stat_line(out, name, std::to_string(value));
  for (const auto& [name, value] : user_stats(st)) stat_line(out, name, std::to_string(value));
  return out;
}

std::string format_stacks_json(const std::vector<StackRecord>& stacks, const FrameNames& names) {
  json arr = json::array();
  for (const auto& s : stacks) arr.push_back(stack_json(s, names));
  return dump_json(arr);
}

std::string format_json(const Snapshot& snap, const FrameNames& names, JsonOptions opt) {
  const TableStats& st = snap.stats;
  // Rates are null without events (the stat file then has no line): present, so a reader
  // can tell "no events yet" from a writer that lacks the field.
  auto rate = [](std::optional<uint64_t> r) { return r ? json(*r) : json(nullptr); };
  json stats{{"entries", st.entries},
             {"max_entries", st.pool_size},
             {"table_size", st.table_size},
             {"hits", st.get(SMC_HITS)},
             {"drops", st.drops()},
             {"hit_rate", rate(st.hit_rate_percent())},
             {"reuse_rate", rate(st.reuse_rate_percent())},
             {"pool_full", st.pool_full()}};
  stats["events"] = st.events();
  for (int c = SMC_INSERTS; c < last_counter(st); ++c) stats[counter_name(c)] = st.counters[c];
  for (const auto& [name, value] : extra_stats(st)) stats[name] = value;
  for (const auto& [name, value] : user_stats(st)) stats[name] = value;
  json stacks = json::array();
  for (const auto& s : snap.stacks) {
    stacks.push_back(stack_json(s, names));
    if (!opt.addresses) without_addresses(stacks.back());
    add_breakdown(snap, s, stacks.back());
  }
  json doc{{"bits", snap.bits},
           {"hash_seed", snap.hash_seed},
           {"table_size", st.table_size},
           {"stats", stats},
           {"stacks", stacks}};
  doc["sources"] = snap.sources;
  if (snap.keys_requested) {
    json keys = json::array();
    for (KeyField f : snap.keys.fields) keys.push_back(key_name(f));
    doc["keys"] = std::move(keys);
  }
  if (!snap.weight_unit.empty()) doc["weight"] = snap.weight_unit;
  if (snap.user.enabled) doc["user_stacks"] = user_stacks_json(snap.user, opt.addresses);
  if (!snap.kernel.release.empty()) {
    doc["kernel"] = {{"release", snap.kernel.release}, {"build_id", snap.kernel.build_id}};
    if (opt.addresses) doc["kernel"]["text"] = hex(snap.kernel.text_address);
  }
  return dump_json(doc);
}

void write_exports(const std::string& dir, const Snapshot& snap, const Kallsyms* ksyms,
                   gid_t group) {
  constexpr mode_t kPrivate = 0640;
  // All written before any replaces its old one: the set is of one snapshot.
  StagedFiles set;
  OutputContext ctx(snap, ksyms);
  for (const OutputSpec& o : output_registry())
    if (o.dir_file && (!o.needs_kernel_info || !snap.kernel.release.empty()))
      set.add(dir + "/" + o.dir_file, o.render(ctx), kPrivate, group);
  set.commit();
  if (snap.user.enabled) save_user_binaries(dir, snap.user, group);
}

}  // namespace stackmapd

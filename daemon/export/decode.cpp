// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/decode.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/json_snapshot.h"
#include "daemon/export/pprof.h"
#include "daemon/export/user_binaries.h"
#include "daemon/model/fsmb.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

// The kernel frames' names a stack_map.json gives (its "symbols").
FrameNamer json_namer(const JsonExport& doc) {
  return [&doc](uint64_t ip) {
    auto it = doc.functions.find(ip);
    return it == doc.functions.end() ? std::string() : it->second;
  };
}

}  // namespace

bool is_json_export(const std::string& path) {
  std::ifstream in(path);
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
  }
  return in && (c == '{' || c == '[');
}

void decode(const DecodeOptions& o, std::ostream& out) {
  check_writable_parent(o.folded, "--folded");
  check_writable_parent(o.svg, "--svg");
  check_writable_parent(o.pprof, "--pprof");
  const std::string title = std::filesystem::path(o.file).filename().string();
  if (is_json_export(o.file)) {
    std::ifstream in(o.file);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json probe = nlohmann::json::parse(text.str(), nullptr, false);
    const bool user_stacks = probe.is_object() && probe.contains("user_stacks");
    if (!o.user_symbols_from.empty() && !user_stacks)
      throw Error("--user-symbols-from: " + o.file +
                  " has no user stacks; record with --user-stacks, or drop the option");
    if (user_stacks) {
      JsonExport doc = read_json_export(text.str(), o.file);
      // User frames after the kernel's: --top, --folded, --svg and --pprof from the snapshot.
      if (!o.user_symbols_from.empty()) resymbolize_user_stacks(doc.snap.user, o.user_symbols_from);
      if (!o.folded.empty() || !o.svg.empty())
        write_flame_outputs(flame_stacks(doc.snap, nullptr, &doc.functions), o.folded, o.svg, title,
                            out);
      if (!o.pprof.empty()) write_pprof(o.pprof, doc.snap, json_namer(doc), {});
      if (o.top || (o.folded.empty() && o.svg.empty() && o.pprof.empty()))
        out << format_top(doc.snap, o.top.value_or(0), nullptr, &doc.functions);
      return;
    }
    if (o.folded.empty() && o.svg.empty() && o.pprof.empty())
      throw Error(o.file +
                  " is a JSON export: decode reads it for --folded, --svg and --pprof only; "
                  "for text, decode its stack_map_bin");
    if (!o.folded.empty() || !o.svg.empty())
      write_flame_outputs(stacks_from_json(text.str(), o.file), o.folded, o.svg, title, out);
    if (!o.pprof.empty()) {
      const JsonExport doc = read_json_export(text.str(), o.file);
      write_pprof(o.pprof, doc.snap, json_namer(doc), {});
    }
    return;
  }
  FsmbFile file = fsmb_read_file(o.file);
  std::optional<Kallsyms> ksyms = load_offline_symbols(o.symbols, o.file);
  const Kallsyms* ks = ksyms ? &*ksyms : nullptr;
  // A damaged file's one line (which names the revision) comes after its records instead.
  if (file.damage.empty())
    spdlog::info("{}: {}, {} stacks", o.file, fsmb_revision_name(file.revision),
                 file.stacks.size());
  std::vector<StackRecord> stacks = std::move(file.stacks);
  // --top 0 means all, in file order, as stackmap_dump.py takes it.
  if (o.top && *o.top > 0) {
    std::stable_sort(stacks.begin(), stacks.end(), [](const StackRecord& a, const StackRecord& b) {
      return a.ref_count > b.ref_count;
    });
    if (stacks.size() > *o.top) stacks.resize(*o.top);
  }
  if (!o.folded.empty() || !o.svg.empty())
    write_flame_outputs(symbolize_stacks(stacks, ks), o.folded, o.svg, title, out);
  // An FSMB file has neither keys nor weights: one sample per stack.
  if (!o.pprof.empty()) {
    Snapshot snap;
    snap.stacks = stacks;
    write_pprof(o.pprof, snap, kallsyms_namer(ks), {});
  }
  if (o.folded != "-" && o.pprof.empty())
    out << (o.json ? format_stacks_json(stacks, ks) : format_stack_map(stacks, ks));
  // Everything the file holds is out (JSON complete): only now the one line and the exit.
  if (!file.damage.empty()) throw Error(file.damage);
}

}  // namespace stackmapd

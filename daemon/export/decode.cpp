// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/decode.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "daemon/export/exports.h"
#include "daemon/export/json_snapshot.h"
#include "daemon/export/output_plan.h"
#include "daemon/export/user_binaries.h"
#include "daemon/model/fsmb.h"
#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

bool is_json_export(const std::string& path) {
  std::ifstream in(path);
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
  }
  return in && (c == '{' || c == '[');
}

namespace {

JsonExport read_json_file(const std::string& path) {
  const std::optional<std::string> text = read_file(path);
  if (!text) throw Error("cannot read " + path + ": " + std::strerror(errno));
  return read_json_export(*text, path);
}

// One side of --diff, loaded whole before anything is written.
struct DiffInput {
  std::string file;  // the export read: a directory's stack_map.json, else its stack_map_bin
  Snapshot snap;
  FunctionNames functions;        // a JSON export's names
  std::optional<Kallsyms> ksyms;  // an FSMB file's symbols
  std::string said;               // logged once both sides are read: an error is the only line
};

DiffInput read_diff_input(const std::string& path, const OfflineSymbols& symbols) {
  DiffInput in;
  in.file = path;
  if (std::filesystem::is_directory(path)) {
    in.file = path + "/stack_map.json";
    if (!std::filesystem::exists(in.file)) in.file = path + "/stack_map_bin";
    if (!std::filesystem::exists(in.file))
      throw Error("--diff: " + path +
                  " holds neither stack_map.json nor stack_map_bin: name an export directory "
                  "or one of its files");
  }
  if (is_json_export(in.file)) {
    JsonExport doc = read_json_file(in.file);
    in.snap = std::move(doc.snap);
    in.functions = std::move(doc.functions);
    return in;
  }
  FsmbFile file = fsmb_read_file(in.file);
  // A damaged side would make a graph of part of a profile: nothing is written.
  if (!file.damage.empty()) throw Error(file.damage);
  DecodeSymbols ds = load_decode_symbols(symbols, in.file);
  in.said = in.file + ": " + fsmb_revision_name(file.revision) + ", " +
            std::to_string(file.stacks.size()) + " stacks; " + ds.said;
  in.ksyms = std::move(ds.table);
  in.snap.stacks = std::move(file.stacks);
  intern_callstacks(in.snap);
  return in;
}

// The views a diff has, and what each side must share with the other.
void decode_diff(const DecodeOptions& o, std::ostream& out) {
  const std::string usage = "decode --diff A B --svg FILE and/or --folded FILE";
  if (o.diff.size() != 2) throw Error("--diff takes two exports, A then B: " + usage);
  if (!o.file.empty()) throw Error("--diff A B takes no other file (" + o.file + "): " + usage);
  if (o.json || !o.pprof.empty() || o.top || !o.user_symbols_from.empty() ||
      !o.symbols.kernel_info.empty())
    throw Error(
        "--diff writes --folded and --svg only (each file's own stack_map.kernel is read; "
        "--kallsyms/--vmlinux apply to both): " +
        usage);
  if (o.folded.empty() && o.svg.empty()) throw Error("--diff has nothing to write: " + usage);
  OutputPlan plan;
  if (!o.folded.empty()) plan.add(OutputKind::folded, o.folded);
  if (!o.svg.empty()) plan.add(OutputKind::svg, o.svg);
  plan.check_writable();
  DiffInput a = read_diff_input(o.diff[0], o.symbols);
  DiffInput b = read_diff_input(o.diff[1], o.symbols);
  for (const DiffInput* in : {&a, &b})
    if (!in->said.empty()) spdlog::info("{}", in->said);
  if (a.snap.weight_unit != b.snap.weight_unit)
    throw Error("--diff: " + a.file + " counts " +
                (a.snap.weight_unit.empty() ? "events" : a.snap.weight_unit) + ", " + b.file + " " +
                (b.snap.weight_unit.empty() ? "events" : b.snap.weight_unit) +
                ": compare two exports that count the same thing");
  if (!(a.snap.keys == b.snap.keys))
    throw Error("--diff: " + a.file + " is --by " +
                (a.snap.keys.empty() ? "none" : a.snap.keys.str()) + ", " + b.file + " --by " +
                (b.snap.keys.empty() ? "none" : b.snap.keys.str()) +
                ": compare two exports recorded with the same --by");
  OutputContext base(a.snap, a.ksyms ? &*a.ksyms : nullptr, &a.functions);
  OutputContext ctx(b.snap, b.ksyms ? &*b.ksyms : nullptr, &b.functions);
  ctx.base = &base;
  ctx.title = o.diff[1] + " against " + o.diff[0] + " (red: grew, blue: shrank)";
  plan.write(ctx, out);
}

}  // namespace

void decode(const DecodeOptions& o, std::ostream& out) {
  if (!o.diff.empty()) return decode_diff(o, out);
  if (o.file.empty())
    throw Error("decode: name a file (stack_map_bin, stack_map.json), or --diff A B");
  // What every input offers; each path below adds its view on `out`.
  OutputPlan plan;
  if (!o.folded.empty()) plan.add(OutputKind::folded, o.folded);
  if (!o.svg.empty()) plan.add(OutputKind::svg, o.svg);
  if (!o.pprof.empty()) plan.add(OutputKind::pprof, o.pprof);
  if (!o.otlp.empty()) plan.add(OutputKind::otlp, o.otlp);
  plan.check_writable();
  const std::string title = std::filesystem::path(o.file).filename().string();
  if (is_json_export(o.file)) {
    JsonExport doc = read_json_file(o.file);
    const bool user_stacks = doc.snap.user.enabled;
    if (!o.user_symbols_from.empty() && !user_stacks)
      throw Error("--user-symbols-from: " + o.file +
                  " has no user stacks; record with --user-stacks, or drop the option");
    if (!user_stacks && plan.empty())
      throw Error(
          o.file +
          " is a JSON export: decode reads it for --folded, --svg, --pprof and --otlp only; "
          "for text, decode its stack_map_bin");
    // User frames after the kernel's: --top, --folded, --svg and --pprof from the snapshot.
    if (!o.user_symbols_from.empty()) resymbolize_user_stacks(doc.snap.user, o.user_symbols_from);
    if (user_stacks && (o.top || plan.empty())) plan.add(OutputKind::top);
    OutputContext ctx(doc.snap, nullptr, &doc.functions);
    ctx.title = title;
    ctx.top = o.top.value_or(0);
    plan.write(ctx, out);
    return;
  }
  FsmbFile file = fsmb_read_file(o.file);
  DecodeSymbols symbols = load_decode_symbols(o.symbols, o.file);
  const Kallsyms* ks = symbols.table ? &*symbols.table : nullptr;
  // A damaged file's one line (which names the revision) comes after its records instead.
  if (file.damage.empty()) {
    spdlog::info("{}: {}, {} stacks", o.file, fsmb_revision_name(file.revision),
                 file.stacks.size());
    spdlog::info("{}", symbols.said);
  }
  // An FSMB file has neither keys nor weights: one sample per stack.
  Snapshot snap;
  snap.stacks = std::move(file.stacks);
  std::vector<StackRecord>& stacks = snap.stacks;
  // --top 0 means all, in file order, as stackmap_dump.py takes it.
  if (o.top && *o.top > 0) {
    std::stable_sort(stacks.begin(), stacks.end(), [](const StackRecord& a, const StackRecord& b) {
      return a.ref_count > b.ref_count;
    });
    if (stacks.size() > *o.top) stacks.resize(*o.top);
  }
  intern_callstacks(snap);
  if (o.folded != "-" && o.pprof.empty() && o.otlp.empty())
    plan.add(o.json ? OutputKind::stacks_json : OutputKind::text);
  OutputContext ctx(snap, ks);
  ctx.title = title;
  plan.write(ctx, out);
  // Everything the file holds is out (JSON complete): only now the one line and the exit.
  if (!file.damage.empty()) throw Error(file.damage);
}

}  // namespace stackmapd

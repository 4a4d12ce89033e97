// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/decode.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
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

namespace stackmapd {

bool is_json_export(const std::string& path) {
  std::ifstream in(path);
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
  }
  return in && (c == '{' || c == '[');
}

void decode(const DecodeOptions& o, std::ostream& out) {
  // What every input offers; each path below adds its view on `out`.
  OutputPlan plan;
  if (!o.folded.empty()) plan.add(OutputKind::folded, o.folded);
  if (!o.svg.empty()) plan.add(OutputKind::svg, o.svg);
  if (!o.pprof.empty()) plan.add(OutputKind::pprof, o.pprof);
  if (!o.otlp.empty()) plan.add(OutputKind::otlp, o.otlp);
  plan.check_writable();
  const std::string title = std::filesystem::path(o.file).filename().string();
  if (is_json_export(o.file)) {
    std::ifstream in(o.file);
    std::stringstream text;
    text << in.rdbuf();
    JsonExport doc = read_json_export(text.str(), o.file);
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

// SPDX-License-Identifier: GPL-2.0
// Which outputs a run writes, in what order, and from what. Every output of
// a snapshot is one entry of one registry (output_plan.cpp, kOutputs): what
// it is called, where it goes (a file, the caller's stream, a file of the
// export directory) and how its bytes are made from an OutputContext. A plan
// is the outputs the options ask for, always in the registry's order, each
// with its target; the foreground session and decode write through one, and
// the export directory's set (exports.h, write_exports) is the registry's
// entries that name a file there. A new output is one entry and one line in
// the plan builder of each command that offers it.
//
// The service writes the export directory's set, and its HTTP endpoints
// (daemon/run/http_endpoints.h) make the JSON export and pprof through the
// registry too. Outputs written while a session runs (--trace, --perfetto:
// per event), the live page and the metrics (daemon/http/, above this stage)
// stay with their writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/otlp.h"
#include "daemon/export/pprof.h"
#include "daemon/model/snapshot.h"

namespace stackmapd {

class Kallsyms;

// In the order a plan writes them.
enum class OutputKind : uint8_t {
  exports,      // --output DIR: the export directory's files (write_exports)
  fsmb,         // stack_map_bin
  json,         // stack_map.json
  stack_map,    // the text export
  stat,         // stack_map_stat
  kernel,       // stack_map.kernel, when the snapshot has kernel info
  folded,       // --folded FILE, "-": the stream
  svg,          // --svg FILE
  pprof,        // --pprof FILE
  otlp,         // --otlp FILE
  top,          // --top N on the stream
  text,         // the text export on the stream: the view when nothing else is asked
  stacks_json,  // decode --json: the stacks as JSON on the stream
};

// What the outputs read: one snapshot and the names of its kernel frames
// (symbols, or a JSON export's functions when there are none), and each
// output's own settings.
class OutputContext {
 public:
  OutputContext(const Snapshot& snap, const Kallsyms* ksyms, const FunctionNames* names = nullptr)
      : snap(snap), ksyms(ksyms), names(names) {}

  const Snapshot& snap;
  const Kallsyms* ksyms;       // may be null: raw addresses
  const FunctionNames* names;  // read where there is no ksyms; may be null
  std::string title;           // the flame graph's
  JsonOptions json;            // stack_map.json's
  PprofOptions pprof;
  OtlpOptions otlp;  // a file is one request, whatever its size
  size_t top = 0;    // --top's N, 0: all
  // decode --diff: A's context, this one B's; --folded and --svg are then
  // the differential ones (flame_diff.h).
  OutputContext* base = nullptr;

  // The flame graph's stacks (flame_stacks), made once for --folded and --svg.
  const std::vector<SymbolizedStack>& flame();
  // The snapshot's frame names, resolved once for every output.
  const FrameNames& frames();

 private:
  std::optional<FrameNames> frames_;
  std::optional<std::vector<SymbolizedStack>> flame_;
};

struct OutputSpec {
  enum class Target : uint8_t { directory, file, file_or_stream, stream };
  OutputKind kind;
  const char* label;   // as a failure names it: "--pprof not written"
  const char* option;  // a file's option, checked before the run; null: none
  Target target;
  // Its file in an export directory (write_exports); null: not one of them.
  const char* dir_file;
  bool needs_kernel_info;  // written only when the snapshot has it (Snapshot::kernel)
  std::string (*render)(OutputContext& ctx);  // its bytes; null for the directory
};

// The registry, in OutputKind's order.
std::span<const OutputSpec> output_registry();
const OutputSpec& output_spec(OutputKind kind);

class OutputPlan {
 public:
  struct Item {
    OutputKind kind;
    std::string target;  // a path; "-" or "" for the stream
    std::string said;    // logged once written; empty: nothing
  };

  // Keeps the registry's order whatever the order of the calls.
  void add(OutputKind kind, std::string target = "", std::string said = "");
  bool empty() const { return items_.empty(); }
  const std::vector<Item>& items() const { return items_; }

  // Before the run: every file's directory takes a new file (check_writable_parent).
  void check_writable() const;
  // Writes each output in order, files 0640 (raw addresses), streams to
  // `out`. Without on_error the first failure throws; with it, a failure is
  // told and the outputs after it are still written.
  using OnError = std::function<void(const char* label, const std::exception& e)>;
  void write(OutputContext& ctx, std::ostream& out, const OnError& on_error = {}) const;

 private:
  std::vector<Item> items_;
};

}  // namespace stackmapd

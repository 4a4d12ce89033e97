// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/trace_options.h"

#include <CLI/CLI.hpp>

namespace stackmapd {

void add_trace_options(OptionTable& t, TraceArgs& args) {
  add_session_options(t, args, Command::foreground);
  CLI::App& app = t.app();
  t.add(
      kOutputBpf,
      app.add_option(
          "--trace", args.trace,
          "Write every event as an ftrace-style line with its <stack_id N> to FILE ('-': stdout)"));
  t.add(kOutputBpf,
        app.add_option(
            "--perfetto", args.perfetto,
            "Write every event with its stack as a Perfetto trace to FILE (ui.perfetto.dev)"));
  t.add(kOutput, app.add_option("--folded", args.folded,
                                "At the end, write the stacks in the collapsed flame-graph format "
                                "to FILE ('-': stdout)"));
  t.add(kOutput, app.add_option("--svg", args.svg, "At the end, write an SVG flame graph to FILE"));
  t.add(kOutput,
        app.add_option(
            "--pprof", args.pprof,
            "At the end, write a gzipped pprof profile to FILE (go tool pprof, Pyroscope)"));
  t.add(kOutput,
        app.add_option("--otlp", args.otlp,
                       "At the end, write an OpenTelemetry profile (OTLP protobuf) to FILE"));
  t.add(kOutput, app.add_option("--otlp-resources", args.otlp_resources,
                                "OpenTelemetry resources: one per process (its --by pid, comm, "
                                "unit, cgroup), the host's, or auto (process with --by pid, "
                                "unit or cgroup)")
                     ->check(CLI::IsMember({"auto", "host", "process"}))
                     ->capture_default_str());
  // How long is recorded: the daemon's table holds another span.
  t.add(kShapes,
        app.add_option("--duration", args.duration,
                       "Seconds to trace (default: 5 with --top, else until SIGINT/SIGTERM)"));
  t.add(kOutput,
        app.add_option("--output", args.output,
                       "Write stack_map, stack_map_stat, stack_map_bin and stack_map.json here"));
  t.add(kRequest, app.add_option(
                      "--top", args.top,
                      "Print the N most frequent stacks (from the running daemon if there is one)"))
      ->check(CLI::Range(size_t{1}, kMaxTop));
  // Which backend records a session of our own; it asks for no session.
  t.add(kRequest,
        app.add_option(
            "--backend", args.backend,
            "bpf, tracefs (the kernel's options/stackmap, for kernels without BPF), or auto"))
      ->check(CLI::IsMember({"auto", "bpf", "tracefs"}))
      ->capture_default_str();
  t.add(kRequest, app.add_option("--socket", args.socket, "The daemon's control socket"))
      ->capture_default_str();
}

bool daemon_can_answer(const OptionTable& table) {
  return table.given([](const OptionTraits& t) { return t.role != OptionRole::request; }).empty();
}

std::vector<std::string> bpf_options_given(const OptionTable& table) {
  return table.given([](const OptionTraits& t) { return t.needs_bpf; });
}

}  // namespace stackmapd

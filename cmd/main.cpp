// SPDX-License-Identifier: GPL-2.0
// stackmapd's command line: a foreground session (--top, --output), the
// service (`daemon`), its control client (`ctl`, and --top when a daemon
// runs), `decode` for FSMB files, and `unpin` for uninstalling. Thin: the
// session's options are declared once, with their traits, in
// daemon/run/trace_options.h (and options.h, shared with the daemon and its
// config file); the work is in the library.
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <string_view>

#include "daemon/bpf/pinning.h"
#include "daemon/export/breakdown.h"
#include "daemon/export/decode.h"
#include "daemon/export/exports.h"
#include "daemon/export/output_plan.h"
#include "daemon/resolve/sandboxed_parser.h"
#include "daemon/run/command_child.h"
#include "daemon/run/config.h"
#include "daemon/run/control.h"
#include "daemon/run/foreground.h"
#include "daemon/run/service.h"
#include "daemon/run/trace_options.h"
#include "daemon/run/tracefs_trace.h"
#include "daemon/run/tracer.h"
#include "daemon/symbols/kernel_probe.h"
#include "daemon/symbols/symbol_sources.h"
#include "daemon/sys/build_info.h"
#include "daemon/sys/error.h"
#include "daemon/sys/host_name.h"
#include "daemon/sys/logging.h"
#include "daemon/sys/preflight.h"
#include "daemon/sys/signals.h"
#include "daemon/tracefs/tracefs_session.h"

namespace {

using namespace stackmapd;

// Catches a typo: --duration 1e400 is inf.
constexpr double kMaxDurationS = 365.0 * 24 * 3600;

// The BPF path, or the kernel's own stack map in tracefs (the companion
// patch series) where BPF cannot be used: same exports either way.
Snapshot run_backend(const TraceArgs& args, const OptionTable& options, const TraceOptions& opt,
                     Recording* recording) {
  bool tracefs = args.backend == "tracefs";
  if (!args.pinned.empty()) {
    if (tracefs) throw Error("--pinned uses BPF programs: drop --backend tracefs");
    return trace(opt, recording);
  }
  if (args.backend == "auto") {
    try {
      check_privileges();
      check_btf();
    } catch (const Error& e) {
      if (!tracefs_stackmap_available()) throw;
      spdlog::warn("{}: using the kernel's stack map in tracefs instead", e.what());
      tracefs = true;
    }
  }
  if (!tracefs) return trace(opt, recording);
  if (!args.uprobes.empty())
    throw Error("-u needs the BPF backend (uprobes): drop --backend tracefs");
  if (args.command)
    throw Error(
        "-- CMD needs the BPF backend, which follows the command's processes as they fork: drop "
        "--backend tracefs");
  if (const auto bpf = bpf_options_given(options); !bpf.empty())
    throw Error(name_list(bpf) + (bpf.size() == 1 ? " needs" : " need") +
                " the BPF backend: drop " + (bpf.size() == 1 ? "it" : "them") +
                " for --backend tracefs");
  if (args.bits != SMT_DEFAULT_BITS)
    spdlog::warn(
        "--bits does not apply to the tracefs backend: the kernel's table size is set "
        "with ftrace_stackmap.bits= on its command line");
  return trace_tracefs(opt.session.events, args.filter, opt.duration_s, opt.drain_interval_ms);
}

// What the session writes at its end, in the registry's order (output_plan.h).
// One rule for stdout: the stack_map text goes there only when no other
// output was asked for, so `--folded -` and `--trace -` are all it holds.
OutputPlan session_outputs(const TraceArgs& args) {
  OutputPlan plan;
  if (!args.output.empty())
    plan.add(OutputKind::exports, args.output,
             "wrote stack_map, stack_map_stat, stack_map_bin, stack_map.json to " + args.output);
  if (!args.folded.empty())
    plan.add(OutputKind::folded, args.folded,
             args.folded == "-" ? "" : "wrote the folded stacks to " + args.folded);
  if (!args.svg.empty())
    plan.add(OutputKind::svg, args.svg,
             "wrote the flame graph to " + args.svg + " (open it in a browser)");
  if (!args.pprof.empty())
    plan.add(
        OutputKind::pprof, args.pprof,
        "wrote the pprof profile to " + args.pprof + " (go tool pprof -top " + args.pprof + ")");
  if (!args.otlp.empty())
    plan.add(OutputKind::otlp, args.otlp, "wrote the OpenTelemetry profile to " + args.otlp);
  if (args.top) plan.add(OutputKind::top);
  if (plan.empty() && args.trace.empty() && args.perfetto.empty()) plan.add(OutputKind::text);
  return plan;
}

// The flame graph's title: what was traced.
std::string flame_title(const TraceArgs& args) {
  std::string title;
  for (const auto& e : args.events) title += (title.empty() ? "" : ", ") + e;
  for (const auto& f : args.functions) title += (title.empty() ? "" : ", ") + f;
  for (const auto& u : args.uprobes) title += (title.empty() ? "" : ", ") + u;
  if (args.profile_hz)
    title += (title.empty() ? "" : ", ") + ("profile " + std::to_string(args.profile_hz) + " Hz");
  if (args.offcpu) title += (title.empty() ? "" : ", ") + std::string("off-CPU time");
  return title.empty() ? "kmem:kmem_cache_alloc" : title;
}

// -- CMD's own checks, before anything is loaded or written; its program is
// looked up as execvp will, so that a typo costs one line and exit 127.
void check_command(const TraceArgs& args) {
  if (!args.command) return;
  if (args.command->empty())
    throw Error("'--' with no command after it: give one, as in stackmapd --top 10 -- make -j2");
  if (args.duration)
    throw Error(
        "--duration and -- CMD both end the session: drop --duration (the session ends when the "
        "command does; for a time limit, run -- timeout SECONDS CMD)");
  if (!args.pinned.empty())
    throw Error(
        "-- CMD needs stackmapd's own BPF object (its fork and exit programs); drop --pinned "
        "or run the command first and give --pid");
  find_command(args.command->front());
}

int run_trace(const TraceArgs& args, const OptionTable& options) {
  check_command(args);
  // `--top N` alone asks the running daemon, like `stackmapd ctl top N`.
  if (args.top && !args.command && daemon_can_answer(options)) {
    if (auto reply = control_request(args.socket, "top " + std::to_string(*args.top))) {
      std::cout << *reply;
      return 0;
    }
  }
  // Before any thread starts or -- CMD forks: from here on only the loop's
  // signalfd takes them (daemon/sys/signals.h).
  block_signals(kForegroundSignals);
  TraceOptions opt;
  opt.session = args.session_config();
  opt.session.follow_command = args.command.has_value();
  if (opt.session.events.empty() && args.functions.empty() && !args.profile_hz && !args.offcpu &&
      args.uprobes.empty())
    opt.session.events.push_back({"kmem", "kmem_cache_alloc"});
  opt.function_patterns = args.functions;
  opt.trace_path = args.trace;
  opt.perfetto_path = args.perfetto;
  const OutputPlan plan = session_outputs(args);
  plan.check_writable();
  // NaN fails both comparisons, 1e400 (inf) the second.
  if (args.duration && !(*args.duration > 0 && *args.duration <= kMaxDurationS))
    throw Error("--duration must be more than 0 seconds and at most " +
                std::to_string(static_cast<long>(kMaxDurationS)) + " (a year)");
  opt.duration_s = args.duration;
  if (!opt.duration_s && args.top && !args.command) opt.duration_s = 5.0;
  if (!args.output.empty()) prepare_output_dir(args.output);
  std::optional<CommandChild> command;
  if (args.command) opt.command = &command.emplace(*args.command);

  // The BPF backend narrows this to the time it recorded (loading and
  // symbolizing are no part of pprof's duration); tracefs keeps the whole run.
  Recording recording{std::chrono::system_clock::now(), {}};
  Snapshot snap = run_backend(args, options, opt, &recording);
  // A command that could not run leaves no outputs behind (CommandNotRun).
  const int status = command ? command->exit_status() : 0;
  if (recording.end == std::chrono::system_clock::time_point{})
    recording.end = std::chrono::system_clock::now();
  std::optional<Kallsyms> ksyms = load_host_symbols();
  const Kallsyms* ks = ksyms ? &*ksyms : nullptr;
  snap.kernel = probe_kernel_info_lowering_kptr_restrict(ks);
  OutputContext ctx(snap, ks);
  ctx.title = flame_title(args);
  ctx.top = args.top.value_or(0);
  ctx.pprof.profile_hz = args.profile_hz;
  ctx.pprof.time_nanos = std::chrono::nanoseconds(recording.start.time_since_epoch()).count();
  ctx.pprof.duration_nanos = std::chrono::nanoseconds(recording.end - recording.start).count();
  ctx.otlp.profile_hz = args.profile_hz;
  ctx.otlp.time_nanos = ctx.pprof.time_nanos;
  ctx.otlp.duration_nanos = ctx.pprof.duration_nanos;
  ctx.otlp.host_name = host_name();
  ctx.otlp.resources = parse_otlp_resources(args.otlp_resources);
  // The session is over and cannot be had again: an output that fails (a full
  // disk) is said in one line, the others are still written, and the exit says so.
  bool failed = false;
  plan.write(ctx, std::cout, [&](const char* what, const std::exception& e) {
    spdlog::error("{} not written: {}", what, e.what());
    failed = true;
  });
  // --top's own total and stacks, the events listed under a stack (those
  // taken in user mode among them); the rest were dropped.
  const TableStats& st = snap.stats;
  uint64_t listed = 0;
  for (const Callstack& c : callstacks(snap)) listed += c.count;
  const uint64_t unlisted = st.events() - std::min(listed, st.events());
  spdlog::info("{} events, {} unique stacks{}, {} dropped{}{}", listed, callstacks(snap).size(),
               st.user_mode() ? " (" + std::to_string(st.user_mode()) +
                                    " events sampled in user mode: no kernel frames)"
                              : "",
               unlisted, st.pool_full() ? " (element pool full: raise --bits)" : "",
               st.get(SMC_DROP_RINGBUF_FULL) ? " (ring buffer full: raise --ringbuf-kb)" : "");
  if (st.verify_mismatch)
    throw Error("--verify found " + std::to_string(st.verify_mismatch) +
                " events whose id named another stack: please report this");
  return failed ? 1 : status;
}

int run_ctl(const std::vector<std::string>& words, const std::string& socket) {
  std::string request;
  for (const auto& w : words) request += (request.empty() ? "" : " ") + w;
  auto reply = control_request(socket, request);
  if (!reply)
    throw Error("no stackmapd daemon listens on " + socket +
                ": start it with 'systemctl start stackmapd'");
  std::cout << *reply;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The daemon's parser sandbox runs this binary again: nothing else first.
  if (argc > 1 && std::string_view(argv[1]) == kSandboxArg) return run_sandboxed_parser(argc, argv);
  Sandbox::use_program("/proc/self/exe");
  // Blocks of 128 KiB and more (kallsyms' table, an export's buffers) are
  // mmapped and go back to the kernel when freed. glibc's default raises that
  // threshold after each such free, so setup's transient blocks would stay in
  // the heap for the daemon's lifetime: ~10 MB of its resident memory.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  setup_logging();
  bool verbose = false;

  CLI::App app{
      "stackmapd: kernel stack traces for chosen trace points, each unique stack stored once"};
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("stackmapd: ") + e.what() + " (see stackmapd --help)\n";
  });
  app.require_subcommand(0, 1);
  OptionTable trace_options(app);
  trace_options.add(kRequest, app.add_flag("-v,--verbose", verbose, "Log libbpf and the verifier"));
  trace_options.add(kRequest, app.set_version_flag("--version",
                                                   std::string("stackmapd ") + build_version() +
                                                       " (revision " + build_revision() + ")",
                                                   "Print the version and the source revision"));
  app.footer(
      "stackmapd [OPTIONS] -- CMD ARGS...: run CMD once the programs are attached and trace only "
      "it and its descendants (followed by fork, not by name) until it exits; SIGINT and SIGTERM "
      "go to it, and stackmapd exits with its status (128+N for signal N).");

  TraceArgs trace_args;
  add_trace_options(trace_options, trace_args);
  trace_options.check_complete();  // a logic_error here is a bug: every option says what it does

  DecodeOptions decode_args;
  CLI::App* decode =
      app.add_subcommand("decode", "Print an FSMB file (stack_map_bin) from us or the kernel");
  decode->add_option("file", decode_args.file, "The stack_map_bin file (or a stack_map.json)");
  decode
      ->add_option("--diff", decode_args.diff,
                   "A differential flame graph of B against A for --svg and --folded (red: "
                   "grew, blue: shrank); each an export file or directory")
      ->expected(2)
      ->type_name("A B");
  decode->add_flag("--json", decode_args.json, "JSON output");
  decode->add_option(
      "--folded", decode_args.folded,
      "Write the collapsed flame-graph format to FILE ('-': stdout); FILE may also be "
      "a stack_map.json export");
  decode->add_option("--svg", decode_args.svg, "Write an SVG flame graph to FILE");
  decode->add_option(
      "--pprof", decode_args.pprof,
      "Write a gzipped pprof profile to FILE (with --by's labels from a JSON export)");
  decode->add_option("--otlp", decode_args.otlp,
                     "Write an OpenTelemetry profile (OTLP protobuf) to FILE");
  decode
      ->add_option("--top", decode_args.top,
                   "Only the N stacks with the highest ref_count (0: all, in file order)")
      ->check(CLI::Range(size_t{0}, kMaxTop));
  decode->add_option("--user-symbols-from", decode_args.user_symbols_from,
                     "With a stack_map.json of --user-stacks: symbolize its user frames from "
                     "the binaries the export directory DIR keeps (DIR/binaries/BUILD_ID)");
  decode->add_option("--kallsyms", decode_args.symbols.kallsyms,
                     "Symbolize from this kallsyms file (e.g. saved on the device, any boot)");
  decode->add_option("--vmlinux", decode_args.symbols.vmlinux,
                     "Symbolize from this vmlinux (the traced kernel's, with symbols)");
  decode->add_option("--kernel-info", decode_args.symbols.kernel_info,
                     "The stack_map.kernel written with the export (default: the one beside FILE): "
                     "its _text address gives the KASLR slide");

  // Its options are parsed by daemon/run/config.cpp, again on every reload.
  CLI::App* daemon = app.add_subcommand(
      "daemon", "Run as the service (systemd Type=notify); 'stackmapd daemon --help' for options");
  daemon->prefix_command();
  daemon->set_help_flag();  // --help goes to its own parser

  std::vector<std::string> ctl_words;
  CLI::App* ctl =
      app.add_subcommand("ctl", "Ask the running daemon: stat, top [N], reset, snapshot, reload");
  ctl->add_option("request", ctl_words, "stat | top [N] | reset | snapshot | reload")->required();
  // Also after the subcommand (`ctl --socket S stat`), into the same string.
  ctl->add_option("--socket", trace_args.socket, "The daemon's control socket")
      ->capture_default_str();

  std::string pin_dir = kDefaultPinDir;
  CLI::App* unpin =
      app.add_subcommand("unpin", "Remove the table a stopped daemon left pinned (for uninstall)");
  unpin->add_option("--pin-dir", pin_dir, "Where the table is pinned")->capture_default_str();

  // Everything after the first "--" is the command, never an option of ours.
  trace_args.command = take_command(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  set_verbose(verbose);

  try {
    if (trace_args.command &&
        (decode->parsed() || ctl->parsed() || unpin->parsed() || daemon->parsed()))
      throw Error(
          "-- CMD starts a tracing session of its own: not with decode, ctl, unpin or "
          "daemon");
    if (decode->parsed()) {
      stackmapd::decode(decode_args, std::cout);
      return 0;
    }
    if (ctl->parsed()) return run_ctl(ctl_words, trace_args.socket);
    if (unpin->parsed()) {
      // Not from under a daemon that runs on them: its lock says.
      if (access(pin_dir.c_str(), F_OK) == 0) {
        PinDirLock lock(pin_dir);
        remove_pins(pin_dir, BpfSession::pin_names());
      }
      return 0;
    }
    if (daemon->parsed()) {
      block_signals(kServiceSignals);  // before any thread starts, as in run_trace
      run_service(daemon->remaining());
      return 0;
    }
    return run_trace(trace_args, trace_options);
  } catch (const CommandNotRun& e) {  // the shell's status: 127 not found, 126 not runnable
    spdlog::error("{}", e.what());
    return e.status();
  } catch (const Interrupted& e) {  // 128 + N, as a shell reports signal N
    spdlog::error("{}", e.what());
    return e.status();
  } catch (const std::exception& e) {  // Error: one line naming the fix; anything else too
    spdlog::error("{}", e.what());
    return 1;
  }
}

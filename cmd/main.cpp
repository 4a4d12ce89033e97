// SPDX-License-Identifier: GPL-2.0
// stackmapd's command line: a foreground session (--top, --output), the
// service (`daemon`), its control client (`ctl`, and --top when a daemon
// runs), `decode` for FSMB files, and `unpin` for uninstalling.
#include <bpf/libbpf.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "daemon/run/config.h"
#include "daemon/run/control.h"
#include "daemon/sys/error.h"
#include "daemon/export/exports.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/fsmb.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/symbols/kernel_info.h"
#include "daemon/bpf/pinning.h"
#include "daemon/bpf/preflight.h"
#include "daemon/run/service.h"
#include "daemon/tracefs/tracefs_session.h"
#include "daemon/run/tracer.h"

namespace {

using namespace stackmapd;

bool verbose = false;

int libbpf_log(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (!verbose) return 0;
  char buf[1024];
  int n = vsnprintf(buf, sizeof(buf), fmt, args);
  std::string line(buf);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  spdlog::debug("libbpf{}: {}", level == LIBBPF_WARN ? " warning" : "", line);
  return n;
}

// To the journal, with priorities, when systemd runs us; else to stderr.
void setup_logging() {
  if (std::getenv("JOURNAL_STREAM"))
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("stackmapd", std::make_shared<spdlog::sinks::systemd_sink_mt>()));
  else
    spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));
  spdlog::set_pattern("stackmapd: %v");
  libbpf_set_print(libbpf_log);
}

struct TraceArgs {
  std::vector<std::string> events;
  std::vector<std::string> functions;
  uint32_t profile_hz = 0;
  uint32_t pid = 0;
  std::optional<uint32_t> cpu;
  std::string trace;
  std::string folded;
  std::string svg;
  long bits = SMT_DEFAULT_BITS;
  std::optional<double> duration;
  std::string output;
  std::optional<size_t> top;
  uint32_t verify = 0;
  uint32_t ringbuf_kb = 8192;
  std::string socket = std::string(kDefaultRuntimeDir) + "/" + kControlSocket;
  std::string backend = "auto";
  std::string pinned;
};

struct DecodeArgs {
  std::string file;
  bool json = false;
  std::string folded;
  std::string svg;
  std::optional<size_t> top;
  std::string kallsyms;
  std::string vmlinux;
  std::string kernel_info;
};

// --folded FILE|- and --svg FILE: flame graphs of what a session or a file holds.
// Written 0640 like the exports: unresolved frames are raw addresses.
void write_flame_outputs(const std::vector<SymbolizedStack>& stacks, const std::string& folded,
                         const std::string& svg, const std::string& title) {
  if (folded == "-")
    std::cout << format_folded(stacks);
  else if (!folded.empty())
    write_file_atomic(folded, format_folded(stacks), 0640);
  if (!svg.empty()) {
    FlameGraphOptions opt;
    opt.title = title;
    write_file_atomic(svg, render_flamegraph_svg(stacks, opt), 0640);
  }
}

void check_writable_parent(const std::string& path, const char* option) {
  if (path.empty() || path == "-") return;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (access(parent.c_str(), W_OK) != 0)
    throw Error(std::string(option) + " " + path + ": cannot write in " + parent.string() + ": " +
                std::strerror(errno));
}

// Symbols are loaded once, after tracing, so modules loaded meanwhile resolve.
std::optional<Kallsyms> load_host_symbols() {
  try {
    Kallsyms k = Kallsyms::load();
    if (!k.addresses_hidden()) return k;
    spdlog::warn("/proc/kallsyms shows no addresses (kptr_restrict): frames stay raw");
  } catch (const Error& e) {
    spdlog::warn("{}: frames stay raw", e.what());
  }
  return std::nullopt;
}

// The BPF path, or the kernel's own stack map in tracefs (the companion
// patch series) where BPF cannot be used: same exports either way.
Snapshot run_backend(const TraceArgs& args, const TraceOptions& opt) {
  bool tracefs = args.backend == "tracefs";
  if (!args.pinned.empty()) {
    if (tracefs) throw Error("--pinned uses BPF programs: drop --backend tracefs");
    return trace(opt);
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
  if (!tracefs) return trace(opt);
  if (!args.functions.empty() || args.profile_hz || !args.trace.empty() || args.verify)
    throw Error("-f, --profile, --trace and --verify need the BPF backend: drop them for --backend tracefs");
  if (args.bits != SMT_DEFAULT_BITS)
    spdlog::warn("--bits does not apply to the tracefs backend: the kernel's table size is set "
                 "with ftrace_stackmap.bits= on its command line");
  return trace_tracefs(opt.session.events, opt.duration_s, opt.drain_interval_ms);
}

int run_trace(const TraceArgs& args) {
  // `--top N` alone asks the running daemon, like `stackmapd ctl top N`.
  if (args.top && args.events.empty() && args.functions.empty() && !args.profile_hz &&
      args.output.empty() && !args.duration && args.trace.empty()) {
    if (auto reply = control_request(args.socket, "top " + std::to_string(*args.top))) {
      std::cout << *reply;
      return 0;
    }
  }
  TraceOptions opt;
  check_bits(args.bits);
  opt.session.bits = static_cast<uint32_t>(args.bits);
  for (const auto& e : args.events) opt.session.events.push_back(Tracepoint::parse(e));
  opt.function_patterns = args.functions;
  opt.session.profile_hz = args.profile_hz;
  if (opt.session.events.empty() && args.functions.empty() && !args.profile_hz)
    opt.session.events.push_back({"kmem", "kmem_cache_alloc"});
  opt.session.filter_pid = args.pid;
  if (args.cpu) {
    if (*args.cpu >= static_cast<uint32_t>(libbpf_num_possible_cpus()))
      throw Error("--cpu " + std::to_string(*args.cpu) + " does not exist: this machine has CPUs 0.." +
                  std::to_string(libbpf_num_possible_cpus() - 1));
    opt.session.filter_cpu = *args.cpu;
  }
  opt.trace_path = args.trace;
  check_writable_parent(args.folded, "--folded");
  check_writable_parent(args.svg, "--svg");
  if (args.duration && *args.duration <= 0)
    throw Error("--duration must be more than 0 seconds");
  opt.duration_s = args.duration;
  if (!opt.duration_s && args.top) opt.duration_s = 5.0;
  opt.session.verify_every = args.verify;
  opt.session.ringbuf_bytes = ringbuf_bytes(args.ringbuf_kb);
  opt.session.pinned_dir = args.pinned;
  if (!args.output.empty()) prepare_output_dir(args.output);

  Snapshot snap = run_backend(args, opt);
  std::optional<Kallsyms> ksyms = load_host_symbols();
  const Kallsyms* ks = ksyms ? &*ksyms : nullptr;
  snap.kernel = KernelInfo::probe(ks);
  if (!args.output.empty()) {
    write_exports(args.output, snap, ks);
    spdlog::info("wrote stack_map, stack_map_stat, stack_map_bin, stack_map.json to {}", args.output);
  }
  if (!args.folded.empty() || !args.svg.empty()) {
    std::string title;
    for (const auto& e : args.events) title += (title.empty() ? "" : ", ") + e;
    for (const auto& f : args.functions) title += (title.empty() ? "" : ", ") + f;
    if (args.profile_hz) title += (title.empty() ? "" : ", ") + ("profile " + std::to_string(args.profile_hz) + " Hz");
    if (title.empty()) title = "kmem:kmem_cache_alloc";
    write_flame_outputs(symbolize_stacks(snap.stacks, ks), args.folded, args.svg, title);
  }
  if (args.top)
    std::cout << format_top(snap.stacks, *args.top, ks);
  else if (args.output.empty() && args.folded != "-")
    std::cout << format_stack_map(snap.stacks, ks);
  const TableStats& st = snap.stats;
  spdlog::info("{} events, {} unique stacks, {} dropped{}{}", st.events(), st.entries, st.drops(),
               st.pool_full() ? " (element pool full: raise --bits)" : "",
               st.get(SMC_DROP_RINGBUF_FULL) ? " (ring buffer full: raise --ringbuf-kb)" : "");
  if (st.verify_mismatch) throw Error("--verify found " + std::to_string(st.verify_mismatch) +
                                      " events whose id named another stack: please report this");
  return 0;
}

// Symbols for a file from elsewhere: a saved kallsyms or a vmlinux, moved by
// the KASLR slide recorded with the export (stack_map.kernel beside it, or
// --kernel-info) when its _text differs from the runtime one.
std::optional<Kallsyms> offline_symbols(const DecodeArgs& args) {
  if (!args.kallsyms.empty() && !args.vmlinux.empty())
    throw Error("give --kallsyms or --vmlinux, not both");
  if (args.kallsyms.empty() && args.vmlinux.empty()) {
    if (!args.kernel_info.empty())
      throw Error("--kernel-info needs --kallsyms or --vmlinux to symbolize with");
    return std::nullopt;
  }
  Kallsyms table = args.vmlinux.empty() ? Kallsyms::load(args.kallsyms)
                                        : Kallsyms::from_vmlinux(args.vmlinux);
  std::string info_path = args.kernel_info;
  if (info_path.empty()) {
    auto beside = std::filesystem::path(args.file).parent_path() / "stack_map.kernel";
    if (std::filesystem::exists(beside)) info_path = beside.string();
  }
  if (info_path.empty()) {
    if (!args.vmlinux.empty())
      spdlog::warn("no stack_map.kernel beside {} and no --kernel-info: assuming no KASLR slide",
                   args.file);
    return table;
  }
  std::ifstream in(info_path);
  if (!in) throw Error("cannot read " + info_path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  KernelInfo info = KernelInfo::parse(text.str(), info_path);
  if (info.text_address == 0) {
    spdlog::warn("{}: the device did not record where _text was (kptr_restrict): assuming no "
                 "KASLR slide", info_path);
    return table;
  }
  if (info.text_address == table.text_address()) return table;
  spdlog::info("{}: _text was at {:#x}, {} has it at {:#x}: applying that KASLR slide", info_path,
               info.text_address, args.vmlinux.empty() ? args.kallsyms : args.vmlinux,
               table.text_address());
  return table.rebased(info.text_address);
}

// A stack_map.json export (symbols already resolved) or an FSMB file.
bool is_json_export(const std::string& path) {
  std::ifstream in(path);
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {}
  return in && (c == '{' || c == '[');
}

int run_decode(const DecodeArgs& args) {
  check_writable_parent(args.folded, "--folded");
  check_writable_parent(args.svg, "--svg");
  const std::string title = std::filesystem::path(args.file).filename().string();
  if (is_json_export(args.file)) {
    if (args.folded.empty() && args.svg.empty())
      throw Error(args.file + " is a JSON export: decode reads it for --folded and --svg only; "
                  "for text, decode its stack_map_bin");
    std::ifstream in(args.file);
    std::stringstream text;
    text << in.rdbuf();
    write_flame_outputs(stacks_from_json(text.str(), args.file), args.folded, args.svg, title);
    return 0;
  }
  FsmbFile file = fsmb_read_file(args.file);
  std::optional<Kallsyms> ksyms = offline_symbols(args);
  const Kallsyms* ks = ksyms ? &*ksyms : nullptr;
  spdlog::info("{}: {}, {} stacks", args.file, fsmb_revision_name(file.revision),
               file.stacks.size());
  std::vector<StackRecord> stacks = std::move(file.stacks);
  if (args.top) {
    std::stable_sort(stacks.begin(), stacks.end(), [](const StackRecord& a, const StackRecord& b) {
      return a.ref_count > b.ref_count;
    });
    if (stacks.size() > *args.top) stacks.resize(*args.top);
  }
  if (!args.folded.empty() || !args.svg.empty()) {
    write_flame_outputs(symbolize_stacks(stacks, ks), args.folded, args.svg, title);
    if (args.folded == "-") return 0;
  }
  std::cout << (args.json ? format_stacks_json(stacks, ks) : format_stack_map(stacks, ks));
  return 0;
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
  setup_logging();

  CLI::App app{"stackmapd: kernel stack traces for chosen trace points, each unique stack stored once"};
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("stackmapd: ") + e.what() + " (see stackmapd --help)\n";
  });
  app.require_subcommand(0, 1);
  app.add_flag("-v,--verbose", verbose, "Log libbpf and the verifier");

  TraceArgs trace_args;
  app.add_option("-e,--event", trace_args.events,
                 "Tracepoint CATEGORY:NAME to record stacks on (repeatable; default kmem:kmem_cache_alloc)");
  app.add_option("-f,--function", trace_args.functions,
                 "Kernel function to record stacks on through fentry (repeatable, globs like 'vfs_*')");
  app.add_option("--profile", trace_args.profile_hz,
                 "Sample kernel stacks on every online CPU at HZ (like perf record -g -F HZ)")
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--pid", trace_args.pid, "Only events of this process (all its threads)")
      ->check(CLI::Range(1u, 4194304u));
  app.add_option("--cpu", trace_args.cpu, "Only events on this CPU");
  app.add_option("--trace", trace_args.trace,
                 "Write every event as an ftrace-style line with its <stack_id N> to FILE ('-': stdout)");
  app.add_option("--folded", trace_args.folded,
                 "At the end, write the stacks in the collapsed flame-graph format to FILE ('-': stdout)");
  app.add_option("--svg", trace_args.svg, "At the end, write an SVG flame graph to FILE");
  app.add_option("--bits", trace_args.bits, "Table size: 2^bits unique stacks, 10..20")
      ->capture_default_str();
  app.add_option("--duration", trace_args.duration,
                 "Seconds to trace (default: 5 with --top, else until SIGINT/SIGTERM)");
  app.add_option("--output", trace_args.output,
                 "Write stack_map, stack_map_stat, stack_map_bin and stack_map.json here");
  app.add_option("--top", trace_args.top,
                 "Print the N most frequent stacks (from the running daemon if there is one)");
  app.add_option("--verify", trace_args.verify,
                 "Also send the captured frames of 1 in N events and check them against the stored "
                 "stack (verify_ok/verify_mismatch in stack_map_stat)");
  app.add_option("--ringbuf-kb", trace_args.ringbuf_kb,
                 "Ring buffer size in KiB, a power of two (16 B per event until drained)")
      ->capture_default_str();
  app.add_option("--backend", trace_args.backend,
                 "bpf, tracefs (the kernel's options/stackmap, for kernels without BPF), or auto")
      ->check(CLI::IsMember({"auto", "bpf", "tracefs"}))
      ->capture_default_str();
  app.add_option("--pinned", trace_args.pinned,
                 "Use the programs and maps another loader (Android's bpfloader) pinned in DIR from "
                 "stackmapd.o (share/stackmapd/bpfloader/) instead of loading our own");
  app.add_option("--socket", trace_args.socket, "The daemon's control socket")->capture_default_str();

  DecodeArgs decode_args;
  CLI::App* decode = app.add_subcommand("decode", "Print an FSMB file (stack_map_bin) from us or the kernel");
  decode->add_option("file", decode_args.file, "The stack_map_bin file")->required();
  decode->add_flag("--json", decode_args.json, "JSON output");
  decode->add_option("--folded", decode_args.folded,
                     "Write the collapsed flame-graph format to FILE ('-': stdout); FILE may also be "
                     "a stack_map.json export");
  decode->add_option("--svg", decode_args.svg, "Write an SVG flame graph to FILE");
  decode->add_option("--top", decode_args.top, "Only the N stacks with the highest ref_count");
  decode->add_option("--kallsyms", decode_args.kallsyms,
                     "Symbolize from this kallsyms file (e.g. saved on the device, any boot)");
  decode->add_option("--vmlinux", decode_args.vmlinux,
                     "Symbolize from this vmlinux (the traced kernel's, with symbols)");
  decode->add_option("--kernel-info", decode_args.kernel_info,
                     "The stack_map.kernel written with the export (default: the one beside FILE): "
                     "its _text address gives the KASLR slide");

  // Its options are parsed by daemon/run/config.cpp, again on every reload.
  CLI::App* daemon = app.add_subcommand(
      "daemon", "Run as the service (systemd Type=notify); 'stackmapd daemon --help' for options");
  daemon->prefix_command();
  daemon->set_help_flag();  // --help goes to its own parser

  std::vector<std::string> ctl_words;
  CLI::App* ctl = app.add_subcommand("ctl", "Ask the running daemon: stat, top [N], reset, snapshot, reload");
  ctl->add_option("request", ctl_words, "stat | top [N] | reset | snapshot | reload")->required();

  std::string pin_dir = kDefaultPinDir;
  CLI::App* unpin = app.add_subcommand("unpin", "Remove the table a stopped daemon left pinned (for uninstall)");
  unpin->add_option("--pin-dir", pin_dir, "Where the table is pinned")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (verbose) spdlog::set_level(spdlog::level::debug);

  try {
    if (decode->parsed()) return run_decode(decode_args);
    if (ctl->parsed()) return run_ctl(ctl_words, trace_args.socket);
    if (unpin->parsed()) {
      remove_pins(pin_dir, BpfSession::pin_names());
      return 0;
    }
    if (daemon->parsed()) {
      run_service(daemon->remaining());
      return 0;
    }
    return run_trace(trace_args);
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

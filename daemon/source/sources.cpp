// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/sources.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fnmatch.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

namespace {

// An fentry function gets a program of its own (no multi-attach here), loaded
// and verified one by one, a kprobe a perf event and a link: a bound keeps a
// broad glob from taking minutes.
constexpr size_t kMaxFunctions = 512;

bool is_glob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The functions fentry can attach to: those the kernel's BTF describes.
std::set<std::string> btf_functions() {
  std::set<std::string> names;
  struct btf* btf = btf__load_vmlinux_btf();
  if (!btf) throw Error("cannot read the kernel's BTF: fentry needs CONFIG_DEBUG_INFO_BTF=y");
  for (unsigned id = 1; id < btf__type_cnt(btf); ++id) {
    const struct btf_type* t = btf__type_by_id(btf, id);
    if (btf_is_func(t)) names.insert(btf__name_by_offset(btf, t->name_off));
  }
  btf__free(btf);
  return names;
}

// The functions ftrace can trace (CONFIG_DYNAMIC_FTRACE), module ones too;
// false without the list.
bool listed_functions(const std::string& path, std::set<std::string>* names) {
  std::ifstream in(path);
  if (!in) return false;
  for (std::string line; std::getline(in, line);)
    names->insert(line.substr(0, line.find_first_of(" \t")));  // drop " [module]"
  return true;
}

// Every text symbol, for kprobes where ftrace lists nothing.
std::set<std::string> kallsyms_functions() {
  std::set<std::string> names;
  std::ifstream in("/proc/kallsyms");
  std::string addr, type, name;
  while (in >> addr >> type >> name) {
    if (type == "t" || type == "T") names.insert(name);
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');  // " [module]"
  }
  return names;
}

// Kernel lockdown in confidentiality mode forbids kprobes (LOCKDOWN_KPROBES).
bool lockdown_confidentiality() {
  std::ifstream in("/sys/kernel/security/lockdown");
  std::string modes;
  std::getline(in, modes);
  return modes.find("[confidentiality]") != std::string::npos;
}

}  // namespace

ProbeMechanism parse_probe_mechanism(const std::string& name) {
  if (name == "auto") return ProbeMechanism::automatic;
  if (name == "fentry") return ProbeMechanism::fentry;
  if (name == "kprobe") return ProbeMechanism::kprobe;
  throw Error("--probe-mechanism " + name + ": use auto, fentry or kprobe");
}

ProbeSupport ProbeSupport::probe(const std::string& tracefs_dir) {
  ProbeSupport s;
  if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACING, nullptr) != 1)
    s.no_fentry =
        "BPF tracing programs are refused (bpftool feature probe: program_type tracing is NOT "
        "available)";
  // libbpf attaches kprobes through the kprobe PMU, or tracefs on old kernels.
  if (!exists("/sys/bus/event_source/devices/kprobe/type") &&
      !exists(tracefs_dir + "/kprobe_events"))
    s.no_kprobes =
        "kprobes are off (no /sys/bus/event_source/devices/kprobe: CONFIG_KPROBES and "
        "CONFIG_KPROBE_EVENTS are not set)";
  else if (lockdown_confidentiality())
    s.no_kprobes =
        "kprobes are forbidden by kernel lockdown (confidentiality, "
        "/sys/kernel/security/lockdown)";
  return s;
}

Tracepoint Tracepoint::parse(std::string_view spec) {
  auto colon = spec.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == spec.size() ||
      spec.find(':', colon + 1) != std::string_view::npos ||
      spec.find('/') != std::string_view::npos)
    throw Error("bad event '" + std::string(spec) +
                "': use CATEGORY:NAME, e.g. kmem:kmem_cache_alloc (see "
                "/sys/kernel/tracing/available_events)");
  return Tracepoint{std::string(spec.substr(0, colon)), std::string(spec.substr(colon + 1)), 0};
}

FunctionPlan resolve_functions(const std::vector<std::string>& patterns,
                               const std::string& tracefs_dir, ProbeMechanism mechanism,
                               const ProbeSupport& support) {
  if (patterns.empty()) return {};
  const bool fentry = mechanism != ProbeMechanism::kprobe && support.no_fentry.empty();
  const bool kprobes = mechanism != ProbeMechanism::fentry && support.no_kprobes.empty();
  if (mechanism == ProbeMechanism::fentry && !fentry)
    throw Error("--probe-mechanism fentry: " + support.no_fentry +
                ": use --probe-mechanism auto, or -e tracepoints or --profile here");
  if (mechanism == ProbeMechanism::kprobe && !kprobes)
    throw Error("--probe-mechanism kprobe: " + support.no_kprobes +
                ": use --probe-mechanism auto, or -e tracepoints or --profile here");
  if (!fentry && !kprobes)
    throw Error("-f needs fentry or kprobes, and this kernel has neither: " + support.no_fentry +
                " and " + support.no_kprobes +
                ": boot a kernel with CONFIG_KPROBES=y and CONFIG_KPROBE_EVENTS=y, or use -e "
                "tracepoints or --profile here");
  const std::set<std::string> btf = fentry ? btf_functions() : std::set<std::string>{};
  // Where names come from: ftrace's list, else what each mechanism can reach.
  const std::string list_path = tracefs_dir + "/available_filter_functions";
  std::set<std::string> available;
  std::string where = list_path + (kprobes ? "" : " and the kernel's BTF");
  if (!listed_functions(list_path, &available)) {
    available = btf;
    where = fentry ? "the kernel's BTF" : "";
    if (kprobes) {
      available.merge(kallsyms_functions());
      where += (fentry ? " and " : "") + std::string("/proc/kallsyms");
    }
  }
  // FunctionTarget::kprobe_because, or nothing for a function neither can trace.
  auto kprobe_because = [&](const std::string& name) -> std::optional<std::string> {
    if (!available.count(name)) return std::nullopt;
    if (fentry && btf.count(name)) return "";
    if (!kprobes) return std::nullopt;
    if (mechanism == ProbeMechanism::kprobe) return "--probe-mechanism kprobe";
    if (!fentry) return support.no_fentry;
    return "not in the kernel's BTF";
  };

  FunctionPlan plan;
  plan.kprobe_fallback = mechanism == ProbeMechanism::automatic && fentry && kprobes;
  std::set<std::string> seen;
  for (const auto& pattern : patterns) {
    size_t matched = 0;
    if (!is_glob(pattern)) {
      const std::optional<std::string> why = kprobe_because(pattern);
      if (!why)
        throw Error("no traceable kernel function '" + pattern + "' (not in " + where +
                    "): check the name, or use a glob such as '" + pattern + "*'");
      matched = 1;
      if (seen.insert(pattern).second) plan.targets.push_back({pattern, true, *why});
    } else {
      for (const auto& name : available) {
        if (fnmatch(pattern.c_str(), name.c_str(), 0) != 0) continue;
        const std::optional<std::string> why = kprobe_because(name);
        if (!why) continue;
        ++matched;
        if (seen.insert(name).second) plan.targets.push_back({name, false, *why});
      }
      if (matched == 0)
        throw Error("no traceable kernel function matches '" + pattern + "' (see " + where + ")");
    }
    if (plan.targets.size() > kMaxFunctions)
      throw Error("-f '" + pattern + "' brings the functions to trace to " +
                  std::to_string(plan.targets.size()) + ", more than " +
                  std::to_string(kMaxFunctions) + ": narrow the glob");
  }
  return plan;
}

std::vector<int> parse_cpu_list(const std::string& list) {
  std::vector<int> cpus;
  std::istringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
    if (part.empty()) continue;
    auto dash = part.find('-');
    int lo = 0, hi = 0;
    auto bad = [&] { throw Error("cannot parse CPU list '" + list + "'"); };
    if (std::from_chars(part.data(), part.data() + (dash == std::string::npos ? part.size() : dash),
                        lo)
            .ec != std::errc{})
      bad();
    hi = lo;
    if (dash != std::string::npos &&
        std::from_chars(part.data() + dash + 1, part.data() + part.size(), hi).ec != std::errc{})
      bad();
    if (hi < lo) bad();
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> online_cpus() {
  const char* path = "/sys/devices/system/cpu/online";
  const std::optional<std::string> text = read_file(path);
  if (!text) throw Error(std::string("cannot read ") + path + ": is sysfs mounted?");
  return parse_cpu_list(*text);
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/sources.h"

#include <bpf/btf.h>
#include <fnmatch.h>

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

// Each function gets a program of its own (fentry has no multi-attach here),
// loaded and verified one by one: a bound keeps a broad glob from taking minutes.
constexpr size_t kMaxFunctions = 512;

bool is_glob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path + ": is tracefs mounted and are you root?");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// fentry can attach to functions the kernel's BTF describes; where the
// kernel lists its traceable functions (CONFIG_DYNAMIC_FTRACE), only those.
std::set<std::string> traceable_functions(const std::string& tracefs_dir, std::string* source) {
  std::set<std::string> btf_funcs;
  struct btf* btf = btf__load_vmlinux_btf();
  if (!btf) throw Error("cannot read the kernel's BTF: fentry needs CONFIG_DEBUG_INFO_BTF=y");
  for (unsigned id = 1; id < btf__type_cnt(btf); ++id) {
    const struct btf_type* t = btf__type_by_id(btf, id);
    if (btf_is_func(t)) btf_funcs.insert(btf__name_by_offset(btf, t->name_off));
  }
  btf__free(btf);
  *source = "the kernel's BTF";
  const std::string list_path = tracefs_dir + "/available_filter_functions";
  std::ifstream in(list_path);
  if (!in) return btf_funcs;
  std::set<std::string> both;
  for (std::string line; std::getline(in, line);) {
    std::string name = line.substr(0, line.find_first_of(" \t"));  // drop " [module]"
    if (btf_funcs.count(name)) both.insert(name);
  }
  *source = list_path + " and the kernel's BTF";
  return both;
}

}  // namespace

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

std::vector<FunctionTarget> resolve_functions(const std::vector<std::string>& patterns,
                                              const std::string& tracefs_dir) {
  if (patterns.empty()) return {};
  std::string list_path;
  const std::set<std::string> available = traceable_functions(tracefs_dir, &list_path);
  std::vector<FunctionTarget> out;
  std::set<std::string> seen;
  for (const auto& pattern : patterns) {
    size_t matched = 0;
    if (!is_glob(pattern)) {
      if (!available.count(pattern))
        throw Error("no traceable kernel function '" + pattern + "' (not in " + list_path +
                    "): check the name, or use a glob such as '" + pattern + "*'");
      matched = 1;
      if (seen.insert(pattern).second) out.push_back({pattern, true});
    } else {
      for (const auto& name : available)
        if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) {
          ++matched;
          if (seen.insert(name).second) out.push_back({name, false});
        }
      if (matched == 0)
        throw Error("no traceable kernel function matches '" + pattern + "' (see " + list_path +
                    ")");
    }
    if (out.size() > kMaxFunctions)
      throw Error("-f '" + pattern + "' brings the functions to trace to " +
                  std::to_string(out.size()) + ", more than " + std::to_string(kMaxFunctions) +
                  ": narrow the glob");
  }
  return out;
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
  return parse_cpu_list(read_file("/sys/devices/system/cpu/online"));
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
/*
 * What one snapshot costs off the hot path, stage by stage, for a table of
 * --stacks N kernel stacks (--depth D frames from a pool of real kernel
 * addresses) split by --keys K pids each and, with --user, under K user
 * stacks: the store's snapshot(), intern_callstacks (the model's ids),
 * FrameNames (every frame named once) and each output of the registry.
 *
 *   snapshot_bench [--stacks N] [--depth D] [--keys K] [--user] [--rounds R]
 *
 * Output: one JSON object, milliseconds per stage (the median of R rounds).
 * Figures only; nothing here fails on time.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/export/output_plan.h"
#include "daemon/model/stack_store.h"
#include "daemon/symbols/kallsyms.h"

using namespace stackmapd;

namespace {

struct Args {
  uint32_t stacks = 20000, depth = 16, keys = 3, rounds = 5;
  bool user = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) {
        fprintf(stderr, "snapshot_bench: %s needs a value\n", o.c_str());
        exit(2);
      }
      return static_cast<uint32_t>(strtoul(argv[++i], nullptr, 10));
    };
    if (o == "--stacks") a.stacks = value();
    else if (o == "--depth") a.depth = value();
    else if (o == "--keys") a.keys = value();
    else if (o == "--rounds") a.rounds = std::max(1u, value());
    else if (o == "--user") a.user = true;
    else {
      fprintf(stderr, "snapshot_bench: unknown option %s\n", o.c_str());
      exit(2);
    }
  }
  return a;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const Kallsyms ksyms = Kallsyms::load();
  // Frames drawn from the kernel's own text, so that naming them is real work.
  std::vector<uint64_t> text;
  for (uint64_t ip = 0xffffffff81000000; ip < 0xffffffff85000000 && text.size() < 4096;
       ip += 0x1234)
    if (ksyms.lookup(ip)) text.push_back(ip);
  if (text.empty()) {
    fprintf(stderr, "snapshot_bench: no kernel symbols readable (run as root)\n");
    return 1;
  }
  std::mt19937_64 rng(1);
  StackStore store(a.stacks + 1, KeySpec::parse("pid"), StackStore::kDefaultMaxKeyPairs, a.user);
  for (uint32_t id = 0; id < a.stacks; ++id) {
    std::vector<uint64_t> ips(a.depth);
    for (uint64_t& ip : ips) ip = text[rng() % text.size()];
    for (uint32_t k = 0; k < a.keys; ++k) {
      EventKey key;
      key.pid = 100 + k;
      key.ustack = a.user ? k : 0;
      if (!store.count(id, key, 1, 1 + k)) store.insert(id, ips, key, 1, 1 + k);
    }
  }
  UserStackSet user;
  user.enabled = a.user;
  user.binaries = {{"/usr/bin/app", "ab"}};
  for (uint32_t k = 0; a.user && k < a.keys; ++k) {
    UserStack s{100 + k, false, {}};
    for (uint32_t d = 0; d < a.depth; ++d)
      s.frames.push_back({0x555500000000 + uint64_t{d} * 64 + k,
                          0,
                          uint64_t{d} * 64 + k,
                          uint64_t{d} * 64 + k,
                          {"fn" + std::to_string(d) + "+0x4"},
                          ""});
    user.stacks[k] = s;
  }

  std::map<std::string, std::vector<double>> ms;
  for (uint32_t r = 0; r < a.rounds; ++r) {
    auto t = std::chrono::steady_clock::now();
    Snapshot snap;
    snap.keys = store.keys();
    snap.keys_requested = true;
    snap.stacks = store.snapshot({});
    snap.user = user;
    ms["store_snapshot"].push_back(ms_since(t));
    t = std::chrono::steady_clock::now();
    intern_callstacks(snap);
    ms["intern_callstacks"].push_back(ms_since(t));
    OutputContext ctx(snap, &ksyms);
    t = std::chrono::steady_clock::now();
    ctx.frames();
    ms["frame_names"].push_back(ms_since(t));
    for (const OutputSpec& o : output_registry()) {
      if (!o.render || (o.needs_kernel_info && snap.kernel.release.empty())) continue;
      t = std::chrono::steady_clock::now();
      o.render(ctx);
      const char* name = o.dir_file ? o.dir_file : o.option ? o.option : o.label;
      ms[std::string("output ") + name +
         (o.target == OutputSpec::Target::stream ? " (stream)" : "")]
          .push_back(ms_since(t));
    }
  }
  std::ostringstream out;
  out << "{\"stacks\": " << a.stacks << ", \"depth\": " << a.depth << ", \"keys\": " << a.keys
      << ", \"user\": " << (a.user ? "true" : "false")
      << ", \"callstacks_per_stack\": " << (a.user ? a.keys : 1) << ", \"frames\": " << text.size()
      << ", \"ms\": {";
  bool first = true;
  for (auto& [stage, v] : ms) {
    std::sort(v.begin(), v.end());
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f", v[v.size() / 2]);
    out << (first ? "" : ", ") << "\"" << stage << "\": " << buf;
    first = false;
  }
  out << "}}\n";
  fputs(out.str().c_str(), stdout);
  return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * What parsing a traced binary costs the daemon: for each ELF file, the time
 * to build its unwind table from its CFI (daemon/unwind/), the table's rows
 * and bytes, and, with --sandbox, the same parse done the daemon's way, in
 * its parser sandbox (daemon/resolve/sandboxed_parser.h: a descriptor sent,
 * the table sent back), alternating in one run (in process, sandbox, in
 * process, ...); then symbolized frames per second, in process
 * (UserSymbolizer) and through the sandbox, over the same offsets. The first
 * build of the process is reported apart: it includes libdw's one-time setup
 * (loading its x86_64 backend), which a daemon pays once.
 *
 *   cfi_bench [--rounds R] [--sandbox STACKMAPD] FILE...
 *
 * Output: one JSON object {"files": [{path, section, fdes, rows, bytes,
 * first_ms, median_ms, min_ms, max_ms[, sandbox_median_ms, sandbox_min_ms,
 * symbols: {frames, in_process_per_s, sandbox_per_s}]}]}, ms over R rounds
 * after the first. Figures only; nothing here fails on time.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/resolve/sandboxed_parser.h"
#include "daemon/symbols/user_symbolizer.h"
#include "daemon/sys/error.h"
#include "daemon/sys/untrusted_file.h"
#include "daemon/unwind/cfi_table.h"

using namespace stackmapd;
using Clock = std::chrono::steady_clock;

namespace {

double ms_of(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// File offsets spread over the first executable segment, `n` of them,
// shifted by `round` so that no round finds another's names cached.
std::vector<uint64_t> code_offsets(const std::string& path, size_t n, int round) {
  std::vector<uint64_t> out;
  std::optional<OpenedFile> f = open_regular(path, Links::kernel, nullptr);
  if (!f) return out;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(f->fd.get(), ELF_C_READ_MMAP, nullptr);  // ended below
  size_t phnum = 0;
  if (elf && elf_getphdrnum(elf, &phnum) == 0)
    for (size_t i = 0; i < phnum && out.empty(); ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD ||
          !(ph.p_flags & PF_X) || ph.p_filesz < n * 16)
        continue;
      const uint64_t step = ph.p_filesz / n;
      for (size_t k = 0; k < n; ++k) out.push_back(ph.p_offset + k * step + 1 + round * 7);
    }
  if (elf) elf_end(elf);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  std::string sandbox;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(1, atoi(argv[++i]));
    else if (strcmp(argv[i], "--sandbox") == 0 && i + 1 < argc) sandbox = argv[++i];
    else files.push_back(argv[i]);
  }
  if (files.empty()) {
    fprintf(stderr, "usage: cfi_bench [--rounds R] [--sandbox STACKMAPD] FILE...\n");
    return 2;
  }
  if (!sandbox.empty()) Sandbox::use_program(sandbox);
  auto parser = sandbox.empty() ? nullptr : std::make_shared<SandboxedParser>("bench");
  try {
    printf("{\"files\": [");
    for (size_t f = 0; f < files.size(); ++f) {
      CfiTable t;
      const double first = ms_of([&] { t = build_cfi_table(files[f]); });
      std::vector<double> ms, boxed;
      for (int r = 0; r < rounds; ++r) {
        ms.push_back(ms_of([&] { t = build_cfi_table(files[f]); }));
        if (parser) {
          CfiTable s;
          boxed.push_back(ms_of([&] { s = parser->cfi_table(files[f]); }));
          if (s.rows.size() != t.rows.size())
            throw Error(files[f] + ": the sandbox's table differs");
        }
      }
      printf(
          "%s{\"path\": \"%s\", \"section\": \"%s\", \"fdes\": %zu, \"rows\": %zu, \"bytes\": %zu, "
          "\"first_ms\": %.2f, \"median_ms\": %.2f, \"min_ms\": %.2f, \"max_ms\": %.2f",
          f ? ", " : "", files[f].c_str(), t.section.c_str(), t.fdes, t.rows.size(), t.bytes(),
          first, median(ms), *std::min_element(ms.begin(), ms.end()),
          *std::max_element(ms.begin(), ms.end()));
      if (parser) {
        // Frames named per second, warm (the binary's session open), in
        // process and in the sandbox alternately, new offsets each round.
        constexpr size_t kFrames = 2000, kPerStack = 8;
        UserSymbolizer local;
        std::optional<OpenedFile> file = open_regular(files[f], Links::kernel, nullptr);
        local.resolve(files[f], files[f], 0, false);
        parser->symbolize(files[f], file ? file->fd.get() : -1, {{0, false}});
        std::vector<double> local_rate, boxed_rate;
        for (int r = 1; r <= rounds; ++r) {
          const std::vector<uint64_t> offsets = code_offsets(files[f], kFrames, 2 * r);
          const std::vector<uint64_t> others = code_offsets(files[f], kFrames, 2 * r + 1);
          const double a = ms_of([&] {
            for (uint64_t o : offsets) local.resolve(files[f], files[f], o, true);
          });
          // As the daemon asks: a stack's frames of one binary per call (8 here).
          const double b = ms_of([&] {
            std::vector<SandboxedParser::Frame> stack;
            for (uint64_t o : others) {
              stack.push_back({o, true});
              if (stack.size() == kPerStack) parser->symbolize(files[f], -1, stack), stack.clear();
            }
          });
          local_rate.push_back(offsets.size() * 1000.0 / a);
          boxed_rate.push_back(others.size() * 1000.0 / b);
        }
        printf(
            ", \"sandbox_median_ms\": %.2f, \"sandbox_min_ms\": %.2f, \"symbols\": {\"frames\": "
            "%zu, \"in_process_per_s\": %.0f, \"sandbox_per_s\": %.0f}",
            median(boxed), *std::min_element(boxed.begin(), boxed.end()), kFrames,
            median(local_rate), median(boxed_rate));
      }
      printf("}");
    }
    printf("]}\n");
  } catch (const Error& e) {
    fprintf(stderr, "cfi_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

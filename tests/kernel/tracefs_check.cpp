// SPDX-License-Identifier: GPL-2.0
// Guest-side check of the daemon's tracefs backend (daemon/tracefs/tracefs_session.h),
// run by tests/kernel/guest-init.sh in a kernel with the stackmap series:
// trace kmem:kmem_cache_alloc and sched:sched_process_fork on our own
// instance under a fork/exec workload, write the exports as the daemon does,
// and check them against DESIGN.md's contracts. Prints "CHECK ok|FAIL ..."
// lines and the --top view; exits non-zero on any failure.
//
// Built statically by tests/kernel/build-static.sh; a stand-in until
// `stackmapd --backend tracefs` can be run in the guest itself.
#include <dirent.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/model/fsmb.h"
#include "daemon/run/tracefs_trace.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"
#include "daemon/tracefs/tracefs_session.h"

extern char** environ;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("CHECK %s %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

void run_true() {
  pid_t pid;
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) == 0)
    waitpid(pid, nullptr, 0);
}

void walk_proc() {
  DIR* d = opendir("/proc");
  if (!d) return;
  while (readdir(d)) {
  }
  closedir(d);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main() {
  using namespace stackmapd;
  const std::string out = "/tmp/stackmapd-out";
  try {
    std::string instance;
    Snapshot snap;
    uint64_t pipe_ids = 0;
    {
      const std::vector<Tracepoint> events = {{"kmem", "kmem_cache_alloc"},
                                              {"sched", "sched_process_fork"}};
      TracefsSession session(events);
      instance = session.dir();
      check(access((instance + "/trace_pipe").c_str(), R_OK) == 0,
            "instance " + instance + " created");
      for (int i = 0; i < 200; ++i) {
        run_true();
        walk_proc();
        session.drain(i % 20 == 0 ? 20 : 0);
      }
      session.detach();
      session.drain(0);
      snap = session.snapshot();
      pipe_ids = session.pipe().ids();
      std::printf("pipe: %llu stack ids, %llu full stacks, %zu distinct ids\n",
                  static_cast<unsigned long long>(pipe_ids),
                  static_cast<unsigned long long>(session.pipe().full_stacks()),
                  session.pipe().id_counts().size());
    }
    struct stat st;
    check(stat(instance.c_str(), &st) != 0, "instance removed on teardown");

    const TableStats& ts = snap.stats;
    check(pipe_ids > 0, "stack ids read from trace_pipe: " + std::to_string(pipe_ids));
    check(!snap.stacks.empty() && snap.stacks.size() == ts.entries,
          "stacks in stack_map_bin (" + std::to_string(snap.stacks.size()) +
              ") == entries in stack_map_stat (" + std::to_string(ts.entries) + ")");
    check(snap.stacks.size() < pipe_ids, "deduplicated: " + std::to_string(snap.stacks.size()) +
                                             " stacks for " + std::to_string(pipe_ids) + " events");
    check(ts.bad_records == 0, "every id read resolves in stack_map_bin");
    check(ts.get(SMC_HITS) == pipe_ids, "kernel hits (" + std::to_string(ts.get(SMC_HITS)) +
                                            ") == ids read (" + std::to_string(pipe_ids) + ")");
    uint64_t refs = 0;
    bool sorted = true;
    for (size_t i = 0; i < snap.stacks.size(); ++i) {
      refs += snap.stacks[i].ref_count;
      if (i && snap.stacks[i].stack_id <= snap.stacks[i - 1].stack_id) sorted = false;
    }
    check(refs == ts.get(SMC_HITS), "sum of ref_count == hits");
    check(sorted, "stacks in stack_id order");
    check(snap.bits >= 10 && snap.bits <= 20 && ts.table_size == 2u << snap.bits,
          "bits " + std::to_string(snap.bits) + ", table_size " + std::to_string(ts.table_size));

    Kallsyms ksyms = Kallsyms::load();
    prepare_output_dir(out);
    write_exports(out, snap, &ksyms);
    std::string stat_text = slurp(out + "/stack_map_stat");
    check(stat_text.rfind("entries:    " + std::to_string(ts.entries) + " / ", 0) == 0,
          "stack_map_stat starts with the entries line");
    FsmbFile back = fsmb_read_file(out + "/stack_map_bin");
    bool same = back.stacks.size() == snap.stacks.size();
    for (size_t i = 0; same && i < back.stacks.size(); ++i)
      same = back.stacks[i].stack_id == snap.stacks[i].stack_id &&
             back.stacks[i].ips == snap.stacks[i].ips &&
             back.stacks[i].ref_count == snap.stacks[i].ref_count;
    check(same, "exported stack_map_bin round-trips the kernel's");
    std::string map_text = slurp(out + "/stack_map");
    check(map_text.find("stack_id " + std::to_string(snap.stacks[0].stack_id) + " [ref ") == 0 &&
              map_text.find("+0x") != std::string::npos,
          "stack_map text export, symbolized");
    std::string top = format_top(snap, 3, FrameNames(snap, &ksyms));
    std::printf("--- top 3\n%s---\n", top.c_str());
    check(!top.empty(), "--top view");
  } catch (const std::exception& e) {
    std::printf("CHECK FAIL exception: %s\n", e.what());
    ++failures;
  }

  // trace_tracefs(), what `stackmapd --backend tracefs` runs: a timed
  // session while a child process makes the events.
  try {
    pid_t child = fork();
    if (child == 0) {
      for (int i = 0; i < 400; ++i) {
        run_true();
        walk_proc();
      }
      _exit(0);
    }
    Snapshot snap = trace_tracefs({{"kmem", "kmem_cache_alloc"}}, "", 1.5, 50);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    check(!snap.stacks.empty() && snap.stats.get(SMC_HITS) > 0 && snap.stats.bad_records == 0,
          "trace_tracefs(): " + std::to_string(snap.stacks.size()) + " stacks, " +
              std::to_string(snap.stats.get(SMC_HITS)) + " hits");
    struct stat st;
    check(stat("/sys/kernel/tracing/instances/stackmapd", &st) != 0,
          "trace_tracefs() removed its instance");
  } catch (const std::exception& e) {
    std::printf("CHECK FAIL trace_tracefs: %s\n", e.what());
    ++failures;
  }
  std::printf("tracefs backend: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}

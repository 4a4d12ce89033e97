// SPDX-License-Identifier: GPL-2.0
// The BPF walker's step (include/stackmapd/unwind_step.h) on real stopped
// processes, over tables the UnwindLoader put in real BPF maps, against
// elfutils' own unwinder (libdwfl's CFI interpreter, what eu-stack prints):
// the same frames, to the process's entry point, through a signal frame and
// the stock python3 that keeps no frame pointers. Root: ptrace and BPF maps.
#include <bpf/bpf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "daemon/symbols/user_maps.h"
#include "daemon/sys/unique_fd.h"
#include "daemon/unwind/unwind_loader.h"
#include "unwind_test_maps.h"

namespace {

thread_local pid_t g_target;        // whose memory smt_unwind_read reads
thread_local smt_unwind_row g_row;  // the last row read

}  // namespace

// Read from the rows map itself, as the walker does.
static const smt_unwind_row* smt_unwind_row_at(void* rows_fd, __u32 idx) {
  return bpf_map_lookup_elem(*static_cast<int*>(rows_fd), &idx, &g_row) == 0 ? &g_row : nullptr;
}

static int smt_unwind_read(__u64* dst, __u64 addr) {
  iovec local = {dst, sizeof(*dst)}, remote = {reinterpret_cast<void*>(addr), sizeof(*dst)};
  return process_vm_readv(g_target, &local, 1, &remote, 1, 0) == sizeof(*dst) ? 0 : -1;
}

#include "stackmapd/unwind_find.h"
#include "stackmapd/unwind_step.h"

namespace stackmapd {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kRows = 1u << 18;

// A workload started and stopped under ptrace where it waits.
class Stopped {
 public:
  explicit Stopped(std::vector<std::string> argv, std::chrono::milliseconds settle) {
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    char line[64] = {};
    EXPECT_GT(read(out[0], line, sizeof(line) - 1), 0) << argv[0] << " said nothing";
    close(out[0]);
    std::this_thread::sleep_for(settle);  // into its wait
    EXPECT_EQ(ptrace(PTRACE_SEIZE, pid_, nullptr, nullptr), 0);
    EXPECT_EQ(ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr), 0);
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, __WALL), pid_);
    EXPECT_EQ(ptrace(PTRACE_GETREGS, pid_, nullptr, &regs_), 0);
  }
  ~Stopped() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  const user_regs_struct& regs() const { return regs_; }

 private:
  pid_t pid_ = -1;
  user_regs_struct regs_ = {};
};

// elfutils' unwind of the stopped thread: each frame's pc (a return address
// past frame 0), and the name of the function the last frame is in.
struct Oracle {
  std::vector<uint64_t> pcs;
  std::string outermost;
};

Oracle dwfl_unwind(pid_t pid) {
  static char* debuginfo_path = nullptr;
  static const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo,
                                           nullptr, &debuginfo_path};
  Oracle o;
  Dwfl* dwfl = dwfl_begin(&callbacks);
  EXPECT_EQ(dwfl_linux_proc_report(dwfl, pid), 0);
  dwfl_report_end(dwfl, nullptr, nullptr);
  EXPECT_EQ(dwfl_linux_proc_attach(dwfl, pid, true), 0) << dwfl_errmsg(-1);
  dwfl_getthread_frames(
      dwfl, pid,
      [](Dwfl_Frame* frame, void* arg) -> int {
        Dwarf_Addr pc;
        bool activation;
        if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
        static_cast<std::vector<uint64_t>*>(arg)->push_back(pc);
        return DWARF_CB_OK;
      },
      &o.pcs);
  if (!o.pcs.empty()) {
    const uint64_t last = o.pcs.size() > 1 ? o.pcs.back() - 1 : o.pcs.back();
    Dwfl_Module* m = dwfl_addrmodule(dwfl, last);
    const char* name = m ? dwfl_module_addrname(m, last) : nullptr;
    o.outermost = name ? name : "";
  }
  dwfl_end(dwfl);
  return o;
}

struct Walk {
  std::vector<uint64_t> ips;
  int stop = 0;
};

// The walker's loop, as bpf/user_unwind.bpf.h runs it, over the maps the
// loader filled.
Walk walk(const Stopped& s) {
  const TestUnwindMaps maps(kRows);
  EXPECT_TRUE(maps.ok()) << "BPF maps: run as root";
  UnwindLoader loader(maps.fds(), kRows, [](const std::string& p) { return build_cfi_table(p); });
  const std::optional<ProcessMaps> proc = ProcessMaps::read(static_cast<uint32_t>(s.pid()));
  EXPECT_TRUE(proc.has_value());
  EXPECT_TRUE(loader.load(static_cast<uint32_t>(s.pid()), 0, *proc));
  EXPECT_GT(loader.counts().tables, 0u);

  smt_unwind_process p = {};
  const uint32_t key = static_cast<uint32_t>(s.pid());
  EXPECT_EQ(bpf_map_lookup_elem(maps.procs.get(), &key, &p), 0);
  int rows_fd = maps.rows.get();

  Walk w;
  g_target = s.pid();
  smt_unwind_regs r = {s.regs().rip, s.regs().rsp, s.regs().rbp, 1, 0};
  for (uint32_t i = 0; i < SMT_MAX_USER_DEPTH && !w.stop; ++i) {
    const smt_unwind_mapping* m = smt_unwind_mapping_of(&p, r.ip);
    if (!m && i > 0 && !(p.flags & SMT_UNWIND_UNLISTED_CODE)) {
      w.stop = SMC_USER_OUTSIDE_CODE;
      break;
    }
    w.ips.push_back(r.ip);
    smt_unwind_file f = {};
    smt_unwind_file_key fk = {};
    const smt_unwind_row* row = nullptr;
    __u32 pc = 0;
    if (m) {
      fk.ino = m->ino;
      fk.dev = m->dev;
    }
    if (m && m->ino && bpf_map_lookup_elem(maps.files.get(), &fk, &f) == 0 &&
        smt_unwind_pc(m, &f, smt_unwind_lookup_pc(&r), &pc))
      row = smt_unwind_row_of(&rows_fd, &f, pc);
    w.stop = smt_unwind_step(row, &r);
  }
  return w;
}

std::string hex(const std::vector<uint64_t>& v) {
  std::string out;
  char buf[24];
  for (uint64_t x : v) {
    snprintf(buf, sizeof(buf), " %llx", static_cast<unsigned long long>(x));
    out += buf;
  }
  return out;
}

// The walk and elfutils agree frame for frame, and end at an entry point.
void expect_whole(const Stopped& s, size_t min_depth) {
  const Walk w = walk(s);
  const Oracle o = dwfl_unwind(s.pid());
  EXPECT_EQ(w.stop, SMC_USER_COMPLETE) << "walk:" << hex(w.ips);
  EXPECT_EQ(hex(w.ips), hex(o.pcs));
  EXPECT_GE(w.ips.size(), min_depth);
  EXPECT_EQ(o.outermost, "_start");
}

std::string workload() { return WORKLOAD_DIR "/unwind_workload"; }

TEST(UnwindWalk, NoFramePointersToStart) {
  Stopped s({workload(), "sleep", "30"}, 200ms);
  // nanosleep, nap, unwind_three, two, one, main, __libc_start_call_main,
  // __libc_start_main, _start (nap may be inlined).
  expect_whole(s, 8);
}

TEST(UnwindWalk, ThroughASignalFrame) {
  Stopped s({workload(), "signal", "30"}, 200ms);
  expect_whole(s, 11);
}

TEST(UnwindWalk, ThroughACfaKeptInTheFrame) {
  Stopped s({workload(), "deref", "30"}, 200ms);
  // nanosleep, nap, unwind_deref_callee, deref_frame (CFA = *(rsp + 40) + 8),
  // unwind_three, two, one, main, and libc's three to _start.
  expect_whole(s, 10);
}

TEST(UnwindWalk, StockPython) {
  Stopped s({"/usr/bin/python3", "-c",
             "import time,sys\n"
             "def a(): print('ready', flush=True); time.sleep(30)\n"
             "def b(): a()\n"
             "def c(): b()\n"
             "c()\n"},
            300ms);
  expect_whole(s, 12);  // 3.11 runs Python calls in one C frame of its eval loop
}

}  // namespace
}  // namespace stackmapd

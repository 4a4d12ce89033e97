// SPDX-License-Identifier: GPL-2.0
// The parser sandbox (daemon/sys/sandbox.h) against tests/sandbox_probe.cpp,
// which tries from inside what an exploited parser would: it runs as nobody
// with no capabilities, cannot exec, fork, open a socket, signal or ptrace
// the daemon, write a file, map executable memory or take more memory than
// its limit; a crash or a loop costs one call, and the next gets a new helper.
#include "daemon/sys/sandbox.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {
namespace {

using namespace std::chrono_literals;

class SandboxRoot : public ::testing::Test {
 protected:
  Sandbox::Limits limits() {
    Sandbox::Limits l;
    l.per_call = 2000ms;
    l.memory_bytes = 256ull << 20;
    return l;
  }
  std::string ask(Sandbox& s, const std::string& request, int fd = -1) {
    std::string why;
    std::optional<std::string> reply = s.call(request, fd, &why);
    return reply ? *reply : "lost: " + why;
  }
};

TEST_F(SandboxRoot, RunsAsNobodyWithoutPowers) {
  ASSERT_EQ(geteuid(), 0u) << "the helper drops root: run as root";
  Sandbox s("probe", limits(), STACKMAPD_SANDBOX_PROBE);
  const std::string status = ask(s, "status");
  EXPECT_NE(status.find("Uid:\t65534\t65534\t65534\t65534"), std::string::npos) << status;
  EXPECT_NE(status.find("Gid:\t65534\t65534\t65534\t65534"), std::string::npos) << status;
  EXPECT_NE(status.find("CapEff:\t0000000000000000"), std::string::npos) << status;
  EXPECT_NE(status.find("CapPrm:\t0000000000000000"), std::string::npos) << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos) << status;
  const size_t at = status.find("Pid: ");
  ASSERT_NE(at, std::string::npos);
  struct stat st;
  const std::string fds = "/proc/" + std::to_string(std::stoi(status.substr(at + 5))) + "/fd";
  ASSERT_EQ(stat(fds.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "dumpable: another nobody process could ptrace it for its files";
}

TEST_F(SandboxRoot, WhatAnExploitedParserWouldTryIsRefused) {
  Sandbox s("probe", limits(), STACKMAPD_SANDBOX_PROBE);
  for (const char* attempt : {"exec", "socket", "fork", "kill", "ptrace", "write", "mmap_exec"})
    EXPECT_EQ(ask(s, attempt), "EPERM") << attempt;
  EXPECT_EQ(ask(s, "alloc"), "ENOMEM") << "4 GiB under a 256 MiB limit";
  EXPECT_EQ(ask(s, "read"), "0") << "debug files are read by path, read-only";
  EXPECT_EQ(s.generation(), 1u) << "all of it in one helper: nothing killed it";
}

TEST_F(SandboxRoot, TheFileComesAsADescriptor) {
  Sandbox s("probe", limits(), STACKMAPD_SANDBOX_PROBE);
  const UniqueFd fd(open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  struct stat st;
  ASSERT_EQ(fstat(fd.get(), &st), 0);
  EXPECT_EQ(ask(s, "fd", fd.get()), std::to_string(st.st_size));
  EXPECT_EQ(ask(s, "fd"), "no fd");
}

TEST_F(SandboxRoot, ACrashCostsOneCall) {
  Sandbox s("probe", limits(), STACKMAPD_SANDBOX_PROBE);
  EXPECT_EQ(ask(s, "fd"), "no fd");
  EXPECT_EQ(ask(s, "crash"), "lost: killed by signal 11");
  EXPECT_EQ(s.failures(), 1u);
  EXPECT_EQ(ask(s, "fd"), "no fd") << "the next call has a new helper";
  EXPECT_EQ(s.generation(), 2u);
}

TEST_F(SandboxRoot, ALoopIsCutOffAtItsTimeLimit) {
  Sandbox s("probe", limits(), STACKMAPD_SANDBOX_PROBE);
  const auto start = std::chrono::steady_clock::now();
  const std::string reply = ask(s, "spin");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(reply.rfind("lost: no reply within 2000 ms (killed by signal ", 0), 0u) << reply;
  EXPECT_LT(took, 4s);
  EXPECT_EQ(ask(s, "fd"), "no fd") << "the next call has a new helper";
}

// The shipped unit has no CAP_KILL: a helper (nobody's) that overran cannot
// be killed by the daemon. The call still ends at its deadline, and the
// helper at its own alarm, reaped later.
TEST_F(SandboxRoot, WithoutCapKillALoopEndsByItsOwnAlarm) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2] = {};
    if (syscall(SYS_capget, &head, caps) != 0) _exit(3);
    caps[0].effective &= ~(1u << CAP_KILL);
    caps[0].permitted &= ~(1u << CAP_KILL);
    if (syscall(SYS_capset, &head, caps) != 0) _exit(3);
    Sandbox s("probe", limits(), STACKMAPD_SANDBOX_PROBE);
    const auto start = std::chrono::steady_clock::now();
    const std::string reply = ask(s, "spin");
    const bool on_time = std::chrono::steady_clock::now() - start < 4s;
    // Its own alarm may have ended it already, when the machine was too busy
    // for this thread to see the deadline first.
    if (reply != "lost: no reply within 2000 ms (left to end at its own time limit)" &&
        reply !=
            "lost: no reply within 2000 ms (killed by signal " + std::to_string(SIGALRM) + ")") {
      fprintf(stderr, "reply: %s\n", reply.c_str());
      _exit(4);
    }
    if (ask(s, "fd") != "no fd") _exit(5);  // a new helper meanwhile
    _exit(on_time ? 0 : 6);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "3: capabilities, 4: the reply, 5: no new helper, 6: late (status " << status << ")";
}

TEST(Sandbox, NoProgramNoHelper) {
  unsetenv("STACKMAPD_SANDBOX_PROGRAM");
  Sandbox s("probe");
  std::string why;
  EXPECT_FALSE(s.call("status", -1, &why));
  EXPECT_EQ(why, "no parser program: set STACKMAPD_SANDBOX_PROGRAM to a stackmapd binary");
}

}  // namespace
}  // namespace stackmapd

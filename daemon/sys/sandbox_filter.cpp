// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/sandbox_filter.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace stackmapd {

namespace {

#if defined(__x86_64__)
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "the parser sandbox's filter knows x86_64 and aarch64"
#endif

// Allowed whatever their arguments.
constexpr long kAllowed[] = {
    SYS_read,         SYS_write,          SYS_readv,      SYS_writev,     SYS_pread64,
    SYS_close,        SYS_fstat,          SYS_newfstatat, SYS_statx,      SYS_lseek,
    SYS_munmap,       SYS_mremap,         SYS_brk,        SYS_madvise,    SYS_recvmsg,
    SYS_sendmsg,      SYS_ppoll,          SYS_futex,      SYS_exit,       SYS_exit_group,
    SYS_rt_sigreturn, SYS_rt_sigprocmask, SYS_getpid,     SYS_gettid,     SYS_clock_gettime,
    SYS_setitimer,    SYS_getrandom,      SYS_faccessat,  SYS_readlinkat, SYS_fcntl,
#if defined(__x86_64__)
    SYS_poll,         SYS_alarm,          SYS_access,     SYS_readlink,   SYS_stat,
    SYS_lstat,
#endif
};

constexpr uint32_t kArgLow(int i) {
  return static_cast<uint32_t>(offsetof(seccomp_data, args) + i * sizeof(uint64_t));
}

}  // namespace

bool install_sandbox_filter() {
  const uint32_t allow = SECCOMP_RET_ALLOW, deny = SECCOMP_RET_ERRNO | EPERM;
  std::vector<sock_filter> f;
  auto stmt = [&](uint16_t code, uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto jump = [&](uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
    f.push_back(BPF_JUMP(code, k, jt, jf));
  };
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);  // x32's numbers
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
#endif
  for (long nr : kAllowed) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    stmt(BPF_RET | BPF_K, allow);
  }
  // Memory is mapped, never executable: the code that runs is the binary's.
  for (long nr : {SYS_mmap, SYS_mprotect}) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4);
    stmt(BPF_LD | BPF_W | BPF_ABS, kArgLow(2));
    jump(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1);
    stmt(BPF_RET | BPF_K, deny);
    stmt(BPF_RET | BPF_K, allow);
  }
  // Debug files (/usr/lib/debug) are opened by path, read-only.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 4);
  stmt(BPF_LD | BPF_W | BPF_ABS, kArgLow(2));
  jump(BPF_JMP | BPF_JSET | BPF_K,
       O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_TMPFILE | O_PATH, 0, 1);
  stmt(BPF_RET | BPF_K, deny);
  stmt(BPF_RET | BPF_K, allow);
  stmt(BPF_RET | BPF_K, deny);

  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace stackmapd

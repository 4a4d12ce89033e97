// SPDX-License-Identifier: GPL-2.0
// A parser sandbox (daemon/sys/sandbox.h) whose requests are commands that
// try what a parser exploited by a hostile file would: the tests send them
// and check that the sandbox's walls hold. Not a stand-in for the parser: the
// same run_sandboxed() with another serve function.
//   sandbox_probe --sandboxed-parser NAME PARENT MEMORY SECONDS  (Sandbox runs it)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/sys/sandbox.h"

namespace {

using stackmapd::UniqueFd;

// "0" when the call succeeded, else its errno's name.
std::string result(long rc) { return rc >= 0 ? "0" : strerrorname_np(errno); }

std::string serve(std::string_view request, UniqueFd fd) {
  const std::string r(request);
  if (r == "status") {  // the lines of /proc/self/status that say who we are
    std::ifstream in("/proc/self/status");
    std::ostringstream out;
    for (std::string line; std::getline(in, line);)
      if (line.rfind("Uid:", 0) == 0 || line.rfind("Gid:", 0) == 0 ||
          line.rfind("CapEff:", 0) == 0 || line.rfind("CapPrm:", 0) == 0 ||
          line.rfind("NoNewPrivs:", 0) == 0 || line.rfind("Seccomp:", 0) == 0)
        out << line << "\n";
    out << "Pid: " << getpid() << "\n";  // /proc/PID/fd is root's when not dumpable
    return out.str();
  }
  if (r == "fd") {
    struct stat st;
    return fd && fstat(fd.get(), &st) == 0 ? std::to_string(st.st_size) : "no fd";
  }
  if (r == "exec") return result(execl("/bin/true", "true", nullptr));
  if (r == "socket") return result(socket(AF_INET, SOCK_STREAM, 0));
  if (r == "fork") return result(fork());
  if (r == "kill") return result(kill(getppid(), SIGTERM));
  if (r == "ptrace") return result(ptrace(PTRACE_ATTACH, getppid(), nullptr, nullptr));
  if (r == "write") return result(open("/tmp/stackmapd-sandbox-probe", O_WRONLY | O_CREAT, 0666));
  if (r == "read") return result(open("/etc/hostname", O_RDONLY));
  if (r == "mmap_exec")
    return result(mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
                          MAP_FAILED
                      ? -1
                      : 0);
  if (r == "alloc") {  // past the memory limit
    void* p = malloc(size_t{4} << 30);
    const bool got = p != nullptr;
    free(p);
    return got ? "0" : "ENOMEM";
  }
  if (r == "crash") *static_cast<volatile int*>(nullptr) = 1;  // raise() would be refused
  if (r == "spin")
    for (;;) asm volatile("" ::: "memory");  // a loop the compiler keeps
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == stackmapd::kSandboxArg)
    return stackmapd::run_sandboxed(argc, argv, serve);
  return 2;
}

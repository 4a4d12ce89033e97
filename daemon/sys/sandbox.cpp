// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "daemon/sys/sandbox_filter.h"

namespace stackmapd {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSock = 3;                  // the helper's end of the socket
constexpr uid_t kNobody = 65534;          // nobody and nogroup on Debian, Android's AID_NOBODY too
constexpr uint32_t kMaxFrame = 1u << 30;  // a reply past this is the helper's bug

// Waits until `fd` is readable or writable (`events`) before `deadline`.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    int timeout = -1;  // deadline max(): no limit
    if (deadline != Clock::time_point::max()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      timeout = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, timeout);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// One frame: its length (4 bytes, host order), then its bytes; `fd` rides
// with the first byte.
bool send_frame(int sock, std::string_view data, int fd, Clock::time_point deadline) {
  const uint32_t len = static_cast<uint32_t>(data.size());
  std::string buf(reinterpret_cast<const char*>(&len), sizeof(len));
  buf.append(data);
  size_t sent = 0;
  while (sent < buf.size()) {
    if (!wait_for(sock, POLLOUT, deadline)) return false;
    iovec iov{buf.data() + sent, buf.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (sent == 0 && fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads one frame into *out (and the descriptor sent with it into *fd, when
// given); false at end of stream, on error or past the deadline.
bool read_frame(int sock, std::string* out, UniqueFd* fd, Clock::time_point deadline) {
  uint32_t len = 0;
  std::string head(sizeof(len), '\0');
  size_t got = 0;
  auto read_some = [&](char* to, size_t want) -> ssize_t {
    if (!wait_for(sock, POLLIN, deadline)) return -1;
    iovec iov{to, want};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int received;
        std::memcpy(&received, CMSG_DATA(c), sizeof(int));
        if (fd) fd->reset(received);
        else close(received);
      }
    return n;
  };
  while (got < head.size()) {
    const ssize_t n = read_some(head.data() + got, head.size() - got);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  std::memcpy(&len, head.data(), sizeof(len));
  if (len > kMaxFrame) return false;
  out->assign(len, '\0');
  for (got = 0; got < len;) {
    const ssize_t n = read_some(out->data() + got, len - got);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void die(const char* name, const char* step) {
  fprintf(stderr, "stackmapd: parser sandbox %s: %s: %s\n", name, step, std::strerror(errno));
  _exit(1);
}

// Root's powers gone for good: nobody's ids (the daemon may run as another
// user: then its own), no capabilities, no core, not ptrace-able.
void drop_powers(const char* name) {
  if (getuid() == 0 || geteuid() == 0) {
    if (setgroups(0, nullptr) != 0) die(name, "setgroups (the unit needs CAP_SETGID)");
    if (setresgid(kNobody, kNobody, kNobody) != 0) die(name, "setresgid (CAP_SETGID)");
    if (setresuid(kNobody, kNobody, kNobody) != 0) die(name, "setresuid (CAP_SETUID)");
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  if (syscall(SYS_capset, &head, none) != 0) die(name, "capset");
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) die(name, "PR_SET_DUMPABLE");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(name, "PR_SET_NO_NEW_PRIVS");
}

void set_limit(const char* name, int resource, rlim_t value) {
  const rlimit r{value, value};
  if (setrlimit(resource, &r) != 0) die(name, "setrlimit");
}

}  // namespace

namespace {
std::string& default_program() {
  static std::string program;
  return program;
}
}  // namespace

void Sandbox::use_program(std::string program) { default_program() = std::move(program); }

Sandbox::Sandbox(std::string name, Limits limits, std::string program)
    : name_(std::move(name)), program_(std::move(program)), limits_(limits) {
  if (program_.empty()) program_ = default_program();
  if (program_.empty()) {
    const char* env = getenv("STACKMAPD_SANDBOX_PROGRAM");
    if (env) program_ = env;
  }
}

Sandbox::~Sandbox() { stop(); }

bool Sandbox::start(std::string* why) {
  reap_strays();
  if (program_.empty()) {
    if (why) *why = "no parser program: set STACKMAPD_SANDBOX_PROGRAM to a stackmapd binary";
    return false;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    if (why) *why = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  const std::string parent = std::to_string(getpid());
  const std::string memory = std::to_string(limits_.memory_bytes);
  const std::string seconds = std::to_string((limits_.per_call.count() + 999) / 1000);
  const char* argv[] = {"stackmapd",    kSandboxArg,     name_.c_str(), parent.c_str(),
                        memory.c_str(), seconds.c_str(), nullptr};
  sigset_t none;
  sigemptyset(&none);
  const pid_t pid = fork();
  if (pid < 0) {
    if (why) *why = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    // Async-signal-safe calls only until exec: the daemon has threads.
    if (theirs.get() == kSock ? fcntl(kSock, F_SETFD, 0) != 0 : dup2(theirs.get(), kSock) < 0)
      _exit(127);
    syscall(SYS_close_range, kSock + 1, ~0u, 0);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the daemon's threads block what its loop takes
    setpgid(0, 0);  // a terminal's Ctrl-C is the daemon's to handle, not its helpers' death
    execv(program_.c_str(), const_cast<char* const*>(argv));
    _exit(127);
  }
  pid_ = pid;
  sock_ = std::move(ours);
  ++generation_;
  return true;
}

std::string Sandbox::end_of_helper() {
  if (pid_ < 0) return "not running";
  // Killed if we may (root has CAP_KILL; the unit does not: a helper is
  // nobody's): then it is reaped at once. Else its own alarm ends it within
  // its time limit, and it is reaped later, never waited for here.
  const bool killed = kill(pid_, SIGKILL) == 0;
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 100 && (r = waitpid(pid_, &status, WNOHANG)) == 0 && killed; ++i)
    usleep(1000);
  const pid_t pid = std::exchange(pid_, -1);
  if (r == 0) {
    strays_.push_back(pid);
    return killed ? "killed" : "left to end at its own time limit";
  }
  if (r < 0) return std::string("lost: ") + std::strerror(errno);
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return "could not run " + program_;
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

void Sandbox::stop() {
  sock_.reset();  // a helper waiting for work ends at end of stream
  end_of_helper();
  for (pid_t p : strays_) kill(p, SIGKILL);
  reap_strays();
}

void Sandbox::reap_strays() {
  std::erase_if(strays_, [](pid_t p) { return waitpid(p, nullptr, WNOHANG) != 0; });
}

std::optional<std::string> Sandbox::call(std::string_view request, int fd, std::string* why) {
  if (pid_ < 0 && !start(why)) return std::nullopt;
  const auto deadline = Clock::now() + limits_.per_call;
  std::string reply;
  if (send_frame(sock_.get(), request, fd, deadline) &&
      read_frame(sock_.get(), &reply, nullptr, deadline))
    return reply;
  ++failures_;
  const bool overran = Clock::now() >= deadline;
  sock_.reset();
  const std::string end = end_of_helper();
  if (why)
    *why = overran
               ? "no reply within " + std::to_string(limits_.per_call.count()) + " ms (" + end + ")"
               : end;
  return std::nullopt;
}

int run_sandboxed(int argc, char** argv, const SandboxServe& serve) {
  if (argc != 6) {
    fprintf(stderr, "stackmapd: %s is the daemon's own helper, not for use by hand\n", kSandboxArg);
    return 2;
  }
  const char* name = argv[2];
  // Ends with the daemon; one that died before this line leaves us orphaned.
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != static_cast<pid_t>(std::strtol(argv[3], nullptr, 10))) return 0;
  const rlim_t memory = std::strtoull(argv[4], nullptr, 10);
  const unsigned seconds = static_cast<unsigned>(std::strtoul(argv[5], nullptr, 10));
  drop_powers(name);
  set_limit(name, RLIMIT_AS, memory);
  set_limit(name, RLIMIT_CORE, 0);
  set_limit(name, RLIMIT_FSIZE, 0);
  set_limit(name, RLIMIT_NOFILE, 512);
  if (!install_sandbox_filter()) die(name, "seccomp");
  std::string request;
  for (;;) {
    UniqueFd fd;
    if (!read_frame(kSock, &request, &fd, Clock::time_point::max())) return 0;  // the daemon closed
    alarm(seconds);  // SIGALRM's default action ends a call that overran
    const std::string reply = serve(request, std::move(fd));
    alarm(0);
    if (!send_frame(kSock, reply, -1, Clock::time_point::max())) return 0;
  }
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/command_child.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string_view>

namespace stackmapd {

namespace {

// What a shell exits with when it cannot run a command.
int not_run_status(int err) { return err == ENOENT || err == ENOTDIR ? 127 : 126; }

[[noreturn]] void not_run(const std::string& name, int err) {
  throw CommandNotRun("cannot run '" + name + "': " + std::strerror(err), not_run_status(err));
}

// 0 when `path` is a file execve can be asked to run, else why not.
int runnable(const std::string& path) {
  struct stat st = {};
  if (stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  return access(path.c_str(), X_OK) == 0 ? 0 : errno;
}

// In the forked child, until exec: async-signal-safe calls only.
[[noreturn]] void run_child(int control, char* const* argv) {
  char go = 0;
  ssize_t n;
  do n = read(control, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);  // stackmapd gave up before the command was followed
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvp(argv[0], argv);
  const int err = errno;
  (void)!write(control, &err, sizeof(err));  // the control socket closes on a successful exec
  _exit(not_run_status(err));
}

}  // namespace

std::optional<std::vector<std::string>> take_command(int& argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      std::vector<std::string> command(argv + i + 1, argv + argc);
      argc = i;
      return command;
    }
  return std::nullopt;
}

std::string find_command(const std::string& name) {
  if (name.empty()) not_run(name, ENOENT);
  if (name.find('/') != std::string::npos) {
    if (int err = runnable(name)) not_run(name, err);
    return name;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/bin:/usr/bin");
  int first_err = ENOENT;
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    const int err = runnable(candidate);
    if (!err) return candidate;
    // As execvp: a match it may not run is reported only when none else is found.
    if (err == EACCES || err == EISDIR) first_err = EACCES;
  }
  not_run(name, first_err);
}

CommandChild::CommandChild(const std::vector<std::string>& argv) : name_(argv.at(0)) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A socket, not a pipe: releasing a child that died meanwhile (a ^C while
  // loading) is EPIPE with MSG_NOSIGNAL, not a SIGPIPE to stackmapd.
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(std::string("-- CMD: cannot create a socketpair: ") + std::strerror(errno));
  control_.reset(fds[0]);
  UniqueFd child_end(fds[1]);
  pid_ = fork();
  if (pid_ < 0) throw Error(std::string("-- CMD: cannot fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    control_.reset();
    run_child(child_end.get(), args.data());
  }
  pidfd_.reset(static_cast<int>(syscall(SYS_pidfd_open, pid_, 0)));
  if (!pidfd_) {
    const int err = errno;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    throw Error(std::string("-- CMD: cannot watch the command (pidfd_open): ") +
                std::strerror(err) + ": needs Linux 5.3 or later");
  }
}

CommandChild::~CommandChild() {
  if (!released_) {
    control_.reset();  // the child reads end of file and exits
    waitpid(pid_, nullptr, 0);
  } else if (!exited_) {
    kill(pid_, SIGTERM);
  }
}

void CommandChild::release() {
  const char go = 1;
  released_ = true;
  // A child that died meanwhile is reaped by the loop like any exit.
  (void)send(control_.get(), &go, 1, MSG_NOSIGNAL);
}

bool CommandChild::reap() {
  if (exited_) return true;
  if (waitpid(pid_, &wait_status_, WNOHANG) != pid_) return false;
  exited_ = true;
  int err = 0;
  if (recv(control_.get(), &err, sizeof(err), MSG_DONTWAIT) == sizeof(err)) exec_errno_ = err;
  return true;
}

void CommandChild::signal(int sig) const {
  if (!exited_) kill(pid_, sig);
}

int CommandChild::exit_status() const {
  if (exec_errno_) not_run(name_, exec_errno_);
  if (WIFSIGNALED(wait_status_)) return 128 + WTERMSIG(wait_status_);
  return WEXITSTATUS(wait_status_);
}

}  // namespace stackmapd

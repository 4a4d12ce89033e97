// SPDX-License-Identifier: GPL-2.0
// `stackmapd [OPTIONS] -- CMD ARGS...`: the command, forked before the
// session loads and held before its exec until the session follows its pid
// (BpfSession::track), so that everything it and its descendants do is
// traced from their first instruction. The foreground loop watches its pidfd
// and never waits on it (daemon/run/foreground.h); its exit ends the session
// and gives stackmapd's exit status.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

// The command could not be run; status() is what a shell exits with then.
class CommandNotRun : public Error {
 public:
  CommandNotRun(const std::string& message, int status) : Error(message), status_(status) {}
  int status() const { return status_; }  // 127: not found, 126: found, not runnable

 private:
  int status_;
};

// Splits argv at its first "--": the command after it (possibly empty), and
// argc cut to what comes before, for the option parser. None without "--".
std::optional<std::vector<std::string>> take_command(int& argc, char** argv);

// The file execvp would run for `name`: as it is with a '/', else the first
// executable one in PATH (/bin:/usr/bin when unset). Throws CommandNotRun.
std::string find_command(const std::string& name);

class CommandChild {
 public:
  // Forks the child, which waits for release() with nothing else done.
  // Throws Error.
  explicit CommandChild(const std::vector<std::string>& argv);
  // Not released: the child ends without running the command, reaped here.
  // Released and still running (stackmapd failed): SIGTERM, not waited for.
  ~CommandChild();
  CommandChild(const CommandChild&) = delete;
  CommandChild& operator=(const CommandChild&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  // The child takes the default signal dispositions and an empty mask, and
  // execs the command (PATH searched, as execvp).
  void release();
  // Readable once the command has exited.
  int pidfd() const { return pidfd_.get(); }
  // Reaps the command if it has exited, without waiting; true once it has.
  bool reap();
  bool exited() const { return exited_; }
  // Sends `sig` to the command while it has not been reaped.
  void signal(int sig) const;
  // Once exited(): the command's exit code, 128 + N when signal N killed it.
  // Throws CommandNotRun when its exec failed.
  int exit_status() const;

 private:
  std::string name_;
  pid_t pid_ = -1;
  UniqueFd control_;  // our end of the socketpair: release byte out, exec errno in
  UniqueFd pidfd_;
  bool released_ = false;
  bool exited_ = false;
  int wait_status_ = 0;
  int exec_errno_ = 0;
};

}  // namespace stackmapd

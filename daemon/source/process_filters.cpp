// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/process_filters.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "daemon/symbols/cgroups.h"
#include "daemon/sys/error.h"
#include "stackmapd/abi.h"

namespace stackmapd {

namespace {

constexpr uint32_t kPidMax = 4194304;  // PID_MAX_LIMIT: no pid is higher on any kernel

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// One word of --pid: a process id, or one line naming what it is not.
uint32_t parse_pid(const std::string& word) {
  uint32_t pid = 0;
  const char* end = word.data() + word.size();
  auto [at, ec] = std::from_chars(word.data(), end, pid);
  // `--pid $(pidof NAME)` with no NAME running: the shell passed the next option.
  if (word.starts_with("--"))
    throw Error("--pid was given no pid (the next word is the option " + quoted(word) +
                "): the pid list is empty; is the process running (pidof NAME found none?)");
  if (ec != std::errc() || at != end || pid == 0 || pid > kPidMax)
    throw Error("--pid " + quoted(word) +
                " is not a process id: give numbers, as in --pid 1234,1235 or --pid \"$(pidof "
                "NAME)\"");
  return pid;
}

// The process a pid names, when it is one of its threads but not the process itself.
std::optional<uint32_t> owning_process(uint32_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("Tgid:")) {
      const uint32_t tgid = static_cast<uint32_t>(std::strtoul(line.c_str() + 5, nullptr, 10));
      if (tgid && tgid != pid) return tgid;
      break;
    }
  return std::nullopt;
}

// Repeated options and comma lists as their words, empty ones dropped.
std::vector<std::string> words_of(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    std::istringstream in(arg);
    for (std::string w; std::getline(in, w, ',');)
      if (!w.empty()) out.push_back(w);
  }
  return out;
}

}  // namespace

std::vector<uint32_t> running_processes(const std::vector<std::string>& args) {
  std::vector<uint32_t> pids;
  for (std::string arg : args) {
    std::replace(arg.begin(), arg.end(), ',', ' ');
    std::istringstream words(arg);
    for (std::string word; words >> word;) pids.push_back(parse_pid(word));
  }
  if (!args.empty() && pids.empty())
    throw Error(
        "--pid '' names no process: give the pid of a running process (pidof NAME found none?)");
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  if (pids.size() > SMT_MAX_PIDS)
    throw Error("--pid: " + std::to_string(pids.size()) + " processes, at most " +
                std::to_string(SMT_MAX_PIDS) +
                " at once: trace fewer, or all without --pid and split by --by pid");
  for (uint32_t pid : pids) {
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      throw Error("--pid " + std::to_string(pid) +
                  ": no such process: give the pid of a running process (pgrep NAME)");
    if (auto tgid = owning_process(pid))
      throw Error("--pid " + std::to_string(pid) + " is a thread of process " +
                  std::to_string(*tgid) + ": give " + std::to_string(*tgid) +
                  " (--pid keeps all threads of a process)");
  }
  return pids;
}

std::vector<std::string> task_names(const std::vector<std::string>& args) {
  std::vector<std::string> names = words_of(args);
  if (!args.empty() && names.empty())
    throw Error("--comm '' names no task: give a name as ps -o comm shows it, as in --comm nginx");
  // The kernel keeps TASK_COMM_LEN - 1 bytes: a longer name never matches whole.
  for (std::string& n : names)
    if (n.size() > 15) n.resize(15);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.size() > SMT_MAX_COMMS)
    throw Error("--comm: " + std::to_string(names.size()) + " names, at most " +
                std::to_string(SMT_MAX_COMMS) +
                " at once: trace fewer, or all and split by --by comm");
  return names;
}

std::vector<CgroupFilter> cgroup_filters(const std::vector<std::string>& args, std::string mount) {
  if (args.empty()) return {};
  if (mount.empty()) mount = CgroupNames::cgroup2_mount();
  while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
  std::vector<CgroupFilter> out;
  for (const std::string& arg : args) {
    std::string rel = arg;
    if (rel.starts_with(mount + "/") || rel == mount) rel.erase(0, mount.size());
    // Components, "." and ".." refused: the level counts the path as written.
    CgroupFilter f;
    std::istringstream in(rel);
    for (std::string part; std::getline(in, part, '/');) {
      if (part.empty()) continue;
      if (part == "." || part == "..")
        throw Error("--cgroup " + quoted(arg) +
                    ": give the cgroup's path without . or .., as in /system.slice/nginx.service");
      f.path += "/" + part;
      ++f.level;
    }
    if (f.path.empty()) f.path = "/";
    struct stat st = {};
    if (stat((mount + f.path).c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw Error("--cgroup " + quoted(arg) + ": no such cgroup under " + mount +
                  ": give a path as systemd-cgls or /proc/PID/cgroup shows it");
    f.id = st.st_ino;
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  }
  if (out.size() > SMT_MAX_CGROUPS)
    throw Error("--cgroup: " + std::to_string(out.size()) + " cgroups, at most " +
                std::to_string(SMT_MAX_CGROUPS) +
                " at once: give a parent cgroup, which keeps those below it");
  return out;
}

}  // namespace stackmapd

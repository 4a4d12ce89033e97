// SPDX-License-Identifier: GPL-2.0
// A helper process for parsing what other users control (their binaries'
// ELF and DWARF) without root's powers, so that a crash or a hang in the
// parser (elfutils has had CVEs on malformed input) costs one file, never the
// daemon. As systemd-coredump parses ELF "in a forked process", and further:
// the helper is a fresh exec of the daemon's own binary (no inherited
// threads, locks, mappings of BPF maps or descriptors), running as nobody
// with no capabilities, not dumpable (no other nobody process can ptrace it
// for the descriptors it holds), under no_new_privs and a seccomp filter that
// leaves it reading and mapping files (no exec, no sockets, no process
// creation, files opened read-only), with a memory limit and, per call, a
// time limit (its own alarm, and the caller's deadline).
//
// The caller sends a request and at most one descriptor (the file, opened by
// the daemon: the helper opens nothing of the user's by path) and waits for
// the reply. A helper that crashed or overran is gone with its state; the
// next call starts another.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {

// argv[1] of the daemon's binary run as the helper (cmd/main.cpp dispatches).
inline constexpr const char* kSandboxArg = "--sandboxed-parser";

class Sandbox {
 public:
  struct Limits {
    std::chrono::milliseconds per_call{5000};
    uint64_t memory_bytes = 1ull << 30;  // RLIMIT_AS: libc's debug info maps ~20 MB
  };
  // `program`: the binary to run as the helper; empty: the one given to
  // use_program(), else $STACKMAPD_SANDBOX_PROGRAM (the tests, whose own
  // binary is no stackmapd); with neither, no helper starts (every call fails).
  explicit Sandbox(std::string name, Limits limits, std::string program = "");
  // main() of the daemon's binary: its helpers are that binary (/proc/self/exe).
  static void use_program(std::string program);
  explicit Sandbox(std::string name) : Sandbox(std::move(name), Limits{}) {}
  ~Sandbox();  // ends the helper
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Sends `request` with `fd` (-1: none) and returns the helper's reply;
  // nullopt when it crashed, overran its time or could not start, and *why
  // says which ("killed by signal 11", "no reply within 5000 ms").
  std::optional<std::string> call(std::string_view request, int fd, std::string* why);
  // Bumped by each helper started: what an earlier one held is gone.
  uint64_t generation() const { return generation_; }
  bool running() const { return pid_ >= 0; }
  uint64_t failures() const { return failures_; }  // calls lost to a crash or overrun

 private:
  bool start(std::string* why);
  void stop();                  // ends the helper and reaps what it can
  std::string end_of_helper();  // kills it if it may: how it ended
  void reap_strays();           // helpers that outlived their call, once ended

  std::string name_, program_;
  Limits limits_;
  pid_t pid_ = -1;
  std::vector<pid_t> strays_;
  UniqueFd sock_;
  uint64_t generation_ = 0, failures_ = 0;
};

// The helper's side, after exec: drops root's powers (nobody, no
// capabilities, not dumpable, no_new_privs, the limits, seccomp), then
// answers each request on descriptor 3 with `serve` until the daemon closes
// it. `serve` gets the request and the descriptor sent with it (or none).
// Returns the process's exit status; a step that fails says so on stderr.
using SandboxServe = std::function<std::string(std::string_view request, UniqueFd fd)>;
int run_sandboxed(int argc, char** argv, const SandboxServe& serve);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/preflight.h"

#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "daemon/sys/error.h"
#include "stackmapd/abi.h"

namespace stackmapd {

namespace fs = std::filesystem;

namespace {

bool has_cap(const __user_cap_data_struct* data, int cap) {
  return data[cap / 32].effective & (1u << (cap % 32));
}

}  // namespace

bool in_host_pid_namespace(const std::string& ns_link) {
  constexpr ino_t kInitPidNamespace = 0xEFFFFFFC;  // the kernel's PROC_PID_INIT_INO
  struct stat st;
  return stat(ns_link.c_str(), &st) != 0 || st.st_ino == kInitPidNamespace;
}

void check_privileges() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0)
    throw Error("cannot read this process's capabilities: run stackmapd as root");
  bool bpf_and_perfmon = has_cap(data, CAP_BPF) && has_cap(data, CAP_PERFMON);
  if (!bpf_and_perfmon && !has_cap(data, CAP_SYS_ADMIN))
    throw Error(
        "stackmapd needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) to load BPF programs: "
        "run it as root, e.g. with sudo");
}

void check_btf(const std::string& btf_path) {
  std::error_code ec;
  if (!fs::exists(btf_path, ec))
    throw Error("no kernel BTF at " + btf_path +
                ": stackmapd needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
}

std::string lookup_tracefs_events() {
  for (const char* dir : {"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"}) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir;
  }
  return {};
}

std::string mount_tracefs_events() {
  std::string dir = lookup_tracefs_events();
  if (!dir.empty()) return dir;
  // As root we can mount it where the kernel provides its mount point.
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0)
    dir = lookup_tracefs_events();
  if (dir.empty())
    throw Error("tracefs is not mounted and could not be mounted (" + std::string(strerror(errno)) +
                "): mount it with 'mount -t tracefs nodev /sys/kernel/tracing'");
  return dir;
}

void check_bits(long bits) {
  if (bits < SMT_MIN_BITS || bits > SMT_MAX_BITS)
    throw Error("--bits " + std::to_string(bits) + " is out of range: use " +
                std::to_string(SMT_MIN_BITS) + ".." + std::to_string(SMT_MAX_BITS) +
                " (2^bits unique stacks, default " + std::to_string(SMT_DEFAULT_BITS) + ")");
}

uint32_t ringbuf_bytes(uint32_t kb) {
  if (kb < 16 || kb > (1u << 20) || (kb & (kb - 1)))
    throw Error("--ringbuf-kb " + std::to_string(kb) +
                " is not a power of two from 16 to 1048576 (16 bytes per event id)");
  return kb * 1024;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// Checks that turn the kernel's bare errnos into one line a user can act on,
// run before anything is loaded so that nothing is left half-done.
#pragma once

#include <cstdint>
#include <string>

namespace stackmapd {

// CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN (what root has).
void check_privileges();
// Whether this process is in the host's (the initial) PID namespace, where
// the pids BPF programs see are /proc's; true when that cannot be told.
bool in_host_pid_namespace(const std::string& ns_link = "/proc/self/ns/pid");
// Kernel BTF, without which the CO-RE program cannot be relocated.
void check_btf(const std::string& btf_path = "/sys/kernel/btf/vmlinux");
// The tracefs events directory (/sys/kernel/tracing/events or the debugfs
// one) where mounted; empty when neither is.
std::string lookup_tracefs_events();
// The same, mounting tracefs on /sys/kernel/tracing first when it is not
// mounted (minimal systems, containers); throws Error when it cannot.
std::string mount_tracefs_events();
// `--bits` within the RFC's range.
void check_bits(long bits);
// `--ringbuf-kb`: a power of two the kernel accepts; returns the size in bytes.
uint32_t ringbuf_bytes(uint32_t kb);

}  // namespace stackmapd

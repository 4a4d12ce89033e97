// SPDX-License-Identifier: GPL-2.0
// Move-only owners of libbpf's handles and of BPF links on perf events.
#pragma once

#include <bpf/libbpf.h>
#include <linux/perf_event.h>

#include <cstdint>
#include <string>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {

using BpfLink = UniqueHandle<bpf_link, bpf_link__destroy>;
using RingBuffer = UniqueHandle<ring_buffer, ring_buffer__free>;
// A skeleton type with its generated destroy function, e.g.
// Skeleton<my_bpf, my_bpf__destroy>.
template <typename T, auto Destroy>
using Skeleton = UniqueHandle<T, Destroy>;

// A BPF program attached to a perf event (tracepoint, CPU clock) through a
// BPF link, or with no link through PERF_EVENT_IOC_SET_BPF (closing the
// perf event detaches it). Members close in reverse order: the link first,
// so the program stops running before its event goes away.
struct PerfLink {
  UniqueFd perf;
  UniqueFd link;
};

// perf_event_open(2) with FD_CLOEXEC, for every thread (pid -1) on `cpu`.
UniqueFd open_perf_event(perf_event_attr* attr, int cpu);

// Links `prog_fd` to the perf event with `cookie` (bpf_get_attach_cookie) and
// enables it. Throws Error naming `what` and the kernel's reason.
PerfLink attach_perf_event(int prog_fd, UniqueFd perf, uint64_t cookie, const std::string& what);

// Android's way on every kernel (links and cookies need 5.15):
// PERF_EVENT_IOC_SET_BPF, then enable; no cookie. Throws Error like the above.
PerfLink attach_perf_event_ioctl(int prog_fd, UniqueFd perf, const std::string& what);

}  // namespace stackmapd

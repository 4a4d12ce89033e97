// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/bpf_handles.h"

#include <bpf/bpf.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

UniqueFd open_perf_event(perf_event_attr* attr, int cpu) {
  return UniqueFd(
      static_cast<int>(syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)));
}

PerfLink attach_perf_event(int prog_fd, UniqueFd perf, uint64_t cookie, const std::string& what) {
  LIBBPF_OPTS(bpf_link_create_opts, opts, .perf_event = {.bpf_cookie = cookie});
  PerfLink l;
  l.perf = std::move(perf);
  l.link.reset(bpf_link_create(prog_fd, l.perf.get(), BPF_PERF_EVENT, &opts));
  if (!l.link || ioctl(l.perf.get(), PERF_EVENT_IOC_ENABLE, 0) != 0) {
    int err = errno;
    throw Error("cannot attach to " + what + ": " + std::strerror(err) +
                (err == EINVAL ? ": BPF attaches to tracepoints and perf events only (not to "
                                 "ftrace's own events), on kernels with BPF links on perf "
                                 "events (5.15+)"
                               : ""));
  }
  return l;
}

PerfLink attach_perf_event_ioctl(int prog_fd, UniqueFd perf, const std::string& what) {
  PerfLink l;
  l.perf = std::move(perf);
  if (ioctl(l.perf.get(), PERF_EVENT_IOC_SET_BPF, prog_fd) != 0 ||
      ioctl(l.perf.get(), PERF_EVENT_IOC_ENABLE, 0) != 0) {
    int err = errno;
    throw Error("cannot attach to " + what + " (PERF_EVENT_IOC_SET_BPF): " + std::strerror(err) +
                (err == EEXIST ? ": another program is attached to this perf event" : ""));
  }
  return l;
}

}  // namespace stackmapd

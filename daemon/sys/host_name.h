// SPDX-License-Identifier: GPL-2.0
// This machine's name, as the outputs that name it write it (pprof's
// endpoint, OpenTelemetry's host.name).
#pragma once

#include <unistd.h>

#include <string>

namespace stackmapd {

inline std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The parser helper's seccomp filter (sandbox.h): what reading, mapping and
// parsing files needs, nothing else. Files open read-only, memory never
// executable; no exec, fork, socket, ptrace, kill, ioctl or mount. A call
// outside the list fails with EPERM (libraries probe, and must go on); a
// call of another architecture's ABI ends the process.
#pragma once

namespace stackmapd {

// Installs it on the calling thread (the helper has one); false on failure.
bool install_sandbox_filter();

}  // namespace stackmapd

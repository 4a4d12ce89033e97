// SPDX-License-Identifier: GPL-2.0
// The kernel's identity on this machine (daemon/model/kernel_info.h): its
// release, build id and where `_text` is on this boot.
#pragma once

#include <string>

#include "daemon/model/kernel_info.h"

namespace stackmapd {

class Kallsyms;

// The running kernel's GNU build id (its first NT_GNU_BUILD_ID note in
// /sys/kernel/notes, readable by anyone), hex; "" when there is none.
std::string running_kernel_build_id();

// This machine, now. `ksyms` (may be null) supplies _text when it shows
// addresses; otherwise this WRITES /proc/sys/kernel/kptr_restrict: lowered
// to 0 for the moment /proc/kallsyms is read, then restored, where we may
// (as Perfetto's traced_probes does). Hence the name.
KernelInfo probe_kernel_info_lowering_kptr_restrict(const Kallsyms* ksyms);

}  // namespace stackmapd

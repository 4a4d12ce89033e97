// SPDX-License-Identifier: GPL-2.0
// Where the symbols for a Snapshot's frames come from: this machine's
// /proc/kallsyms after a session, or, for a file from elsewhere, a saved
// kallsyms or a vmlinux moved by the KASLR slide recorded with the export
// (stack_map.kernel, kernel_info.h).
#pragma once

#include <optional>
#include <string>

#include "daemon/model/kernel_info.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {

// /proc/kallsyms, or none (a warning says why: hidden by kptr_restrict, or
// unreadable), in which case frames stay raw. Load it after tracing, so that
// modules loaded meanwhile resolve.
std::optional<Kallsyms> load_host_symbols();

struct OfflineSymbols {
  std::string kallsyms;     // a kallsyms file saved on the device, any boot
  std::string vmlinux;      // the traced kernel's vmlinux, with symbols
  std::string kernel_info;  // its stack_map.kernel; empty: the one beside the file, if any
};

// Symbols for `file` (an export from another machine or boot) from `from`:
// none when it names neither kallsyms nor vmlinux. When the recorded _text
// differs from the table's, the table is moved by that KASLR slide. Throws
// Error for both or a kernel-info alone, and for unreadable files.
std::optional<Kallsyms> load_offline_symbols(const OfflineSymbols& from, const std::string& file);

// What `decode` symbolizes `file` with: --kallsyms or --vmlinux when given
// (load_offline_symbols); else this machine's /proc/kallsyms when its
// stack_map.kernel (--kernel-info, or the one beside it) says it was recorded
// on this very boot (the same build id and _text); else none. `said` is the
// one line telling which, and what to pass when none.
struct DecodeSymbols {
  std::optional<Kallsyms> table;
  std::string said;
};
DecodeSymbols load_decode_symbols(const OfflineSymbols& from, const std::string& file);

// `table` as on the boot `info` describes (its runtime _text); `info_source`
// and `table_source` name both in the log lines.
Kallsyms apply_kaslr_slide(Kallsyms table, const KernelInfo& info, const std::string& info_source,
                           const std::string& table_source);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// What is needed to symbolize raw frames off the machine: the kernel's
// release and build id (to pick the matching vmlinux) and where `_text` was on
// this boot (the KASLR slide against a vmlinux or a kallsyms from another
// boot). Written beside the exports as stack_map.kernel and into the JSON;
// the FSMB file stays byte-exact. Read from this machine by
// daemon/symbols/kernel_probe.h.
#pragma once

#include <cstdint>
#include <string>

namespace stackmapd {

struct KernelInfo {
  std::string release;        // uname -r
  std::string build_id;       // GNU build id from /sys/kernel/notes, hex
  uint64_t text_address = 0;  // runtime _text; 0 when it could not be read

  std::string to_text() const;  // "release R\nbuild_id B\ntext 0x...\n"
  static KernelInfo parse(const std::string& text, const std::string& source);  // throws Error
};

}  // namespace stackmapd

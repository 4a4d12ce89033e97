// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: the FSMB reader must reject any input with an Error, never
// crash, and what it reads (of a damaged file too) must survive a write and a
// second read unchanged and whole.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "daemon/model/fsmb.h"
#include "daemon/sys/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  stackmapd::FsmbFile file;
  try {
    file = stackmapd::fsmb_decode(bytes, "fuzz");
  } catch (const stackmapd::Error&) {
    return 0;
  }
  std::string again = stackmapd::fsmb_encode(file.stacks);
  stackmapd::FsmbFile reread = stackmapd::fsmb_decode(again, "fuzz-reencoded");
  if (!reread.damage.empty() || reread.stacks.size() != file.stacks.size()) abort();
  for (size_t i = 0; i < file.stacks.size(); ++i) {
    const auto& a = file.stacks[i];
    const auto& b = reread.stacks[i];
    if (a.stack_id != b.stack_id || a.ref_count != b.ref_count || a.ips != b.ips) abort();
  }
  return 0;
}

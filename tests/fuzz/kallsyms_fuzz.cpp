// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: the kallsyms parser must reject any input with an Error,
// never crash, and lookups in what it accepts must stay within the symbol.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    stackmapd::Kallsyms k = stackmapd::Kallsyms::parse(text);
    // Probe addresses taken from the input itself, and around them.
    for (size_t off = 0; off + 8 <= size && off < 256; off += 8) {
      uint64_t ip;
      std::memcpy(&ip, data + off, sizeof(ip));
      for (uint64_t probe : {ip, ip - 1, ip + 1}) {
        auto m = k.lookup(probe);
        if (m && (m->offset >= m->size || m->name.empty())) abort();
        (void)k.format(probe);
      }
    }
  } catch (const stackmapd::Error&) {
  }
  return 0;
}

// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/kernel_probe.h"

#include <sys/utsname.h>

#include <fstream>

#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

namespace {

// Lowers kptr_restrict to 0 for its lifetime, when it may.
class ScopedKptrRestrict {
 public:
  ScopedKptrRestrict() {
    std::ifstream in(kPath);
    if (!(in >> old_) || old_ == "0") return;
    std::ofstream out(kPath);
    lowered_ = static_cast<bool>(out << "0\n") && static_cast<bool>(out.flush());
  }
  ~ScopedKptrRestrict() {
    if (lowered_) std::ofstream(kPath) << old_ << "\n";
  }
  bool lowered() const { return lowered_; }

 private:
  static constexpr const char* kPath = "/proc/sys/kernel/kptr_restrict";
  std::string old_;
  bool lowered_ = false;
};

}  // namespace

std::string running_kernel_build_id() {
  const std::string notes = read_file("/sys/kernel/notes").value_or("");
  auto u32 = [&](size_t off) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(notes[off + i]);
    return v;
  };
  for (size_t off = 0; off + 12 <= notes.size();) {
    const uint32_t namesz = u32(off), descsz = u32(off + 4), type = u32(off + 8);
    const size_t name_off = off + 12, desc_off = name_off + ((namesz + 3) & ~3u);
    if (desc_off + descsz > notes.size()) break;
    if (type == 3 && namesz == 4 && notes.compare(name_off, 3, "GNU") == 0) {
      static const char* hex = "0123456789abcdef";
      std::string id;
      for (size_t i = 0; i < descsz; ++i) {
        const auto b = static_cast<unsigned char>(notes[desc_off + i]);
        id += hex[b >> 4];
        id += hex[b & 15];
      }
      return id;
    }
    off = desc_off + ((descsz + 3) & ~3u);
  }
  return "";
}

KernelInfo probe_kernel_info_lowering_kptr_restrict(const Kallsyms* ksyms) {
  KernelInfo info;
  struct utsname u;
  if (uname(&u) == 0) info.release = u.release;
  info.build_id = running_kernel_build_id();
  if (ksyms && !ksyms->addresses_hidden()) {
    info.text_address = ksyms->text_address();
    return info;
  }
  ScopedKptrRestrict lowered;
  if (!lowered.lowered()) return info;
  try {
    info.text_address = Kallsyms::load().text_address();
  } catch (const Error&) {
  }
  return info;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/kernel_info.h"

#include <charconv>
#include <sstream>

#include "daemon/sys/error.h"

namespace stackmapd {

std::string KernelInfo::to_text() const {
  std::ostringstream out;
  out << "release " << (release.empty() ? "-" : release) << "\n"
      << "build_id " << (build_id.empty() ? "-" : build_id) << "\n"
      << "text 0x" << std::hex << text_address << "\n";
  return out.str();
}

KernelInfo KernelInfo::parse(const std::string& text, const std::string& source) {
  KernelInfo info;
  bool have_text = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key, value;
    if (!(fields >> key >> value)) continue;
    if (key == "release") {
      info.release = value == "-" ? "" : value;
    } else if (key == "build_id") {
      info.build_id = value == "-" ? "" : value;
    } else if (key == "text") {
      const char* b = value.data() + (value.rfind("0x", 0) == 0 ? 2 : 0);
      const char* e = value.data() + value.size();
      have_text = std::from_chars(b, e, info.text_address, 16).ptr == e;
    }
  }
  if (!have_text)
    throw Error(source +
                " has no 'text 0x...' line: pass the stack_map.kernel written with the export");
  return info;
}

}  // namespace stackmapd

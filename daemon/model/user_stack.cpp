// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/user_stack.h"

#include "daemon/model/hex_text.h"

namespace stackmapd {

namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string user_function_name(const std::string& symbol) {
  const size_t plus = symbol.rfind("+0x");
  return plus == std::string::npos ? symbol : symbol.substr(0, plus);
}

std::vector<std::string> user_frame_names(const UserStackSet& set, const UserFrame& f,
                                          bool with_offsets) {
  const std::string bin = f.binary >= 0 && static_cast<size_t>(f.binary) < set.binaries.size()
                              ? base_name(set.binaries[f.binary].path)
                              : std::string();
  if (f.symbols.empty()) {
    if (bin.empty()) return {hex(f.addr)};
    return {"[" + bin + "]" + (with_offsets ? "+" + hex(f.file_offset) : std::string())};
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < f.symbols.size(); ++i) {
    const bool inlined = i + 1 < f.symbols.size();
    std::string name = with_offsets && !inlined ? f.symbols[i] : user_function_name(f.symbols[i]);
    if (inlined) name += " (inlined)";
    if (with_offsets && !bin.empty()) name += " (" + bin + ")";
    out.push_back(std::move(name));
  }
  return out;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/symbol_sources.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "daemon/sys/error.h"

namespace stackmapd {

std::optional<Kallsyms> load_host_symbols() {
  try {
    Kallsyms k = Kallsyms::load();
    if (!k.addresses_hidden()) return k;
    spdlog::warn("/proc/kallsyms shows no addresses (kptr_restrict): frames stay raw");
  } catch (const Error& e) {
    spdlog::warn("{}: frames stay raw", e.what());
  }
  return std::nullopt;
}

Kallsyms apply_kaslr_slide(Kallsyms table, const KernelInfo& info, const std::string& info_source,
                           const std::string& table_source) {
  if (info.text_address == 0) {
    spdlog::warn(
        "{}: the device did not record where _text was (kptr_restrict): assuming no "
        "KASLR slide",
        info_source);
    return table;
  }
  if (info.text_address == table.text_address()) return table;
  spdlog::info("{}: _text was at {:#x}, {} has it at {:#x}: applying that KASLR slide", info_source,
               info.text_address, table_source, table.text_address());
  return table.rebased(info.text_address);
}

std::optional<Kallsyms> load_offline_symbols(const OfflineSymbols& from, const std::string& file) {
  if (!from.kallsyms.empty() && !from.vmlinux.empty())
    throw Error("give --kallsyms or --vmlinux, not both");
  if (from.kallsyms.empty() && from.vmlinux.empty()) {
    if (!from.kernel_info.empty())
      throw Error("--kernel-info needs --kallsyms or --vmlinux to symbolize with");
    return std::nullopt;
  }
  const std::string& table_source = from.vmlinux.empty() ? from.kallsyms : from.vmlinux;
  Kallsyms table =
      from.vmlinux.empty() ? Kallsyms::load(from.kallsyms) : Kallsyms::from_vmlinux(from.vmlinux);
  std::string info_path = from.kernel_info;
  if (info_path.empty()) {
    auto beside = std::filesystem::path(file).parent_path() / "stack_map.kernel";
    if (std::filesystem::exists(beside)) info_path = beside.string();
  }
  if (info_path.empty()) {
    // A kallsyms without one is taken as from the same boot; a vmlinux never is.
    if (!from.vmlinux.empty())
      spdlog::warn("no stack_map.kernel beside {} and no --kernel-info: assuming no KASLR slide",
                   file);
    return table;
  }
  std::ifstream in(info_path);
  if (!in) throw Error("cannot read " + info_path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return apply_kaslr_slide(std::move(table), KernelInfo::parse(text.str(), info_path), info_path,
                           table_source);
}

}  // namespace stackmapd

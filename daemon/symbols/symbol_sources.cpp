// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/symbol_sources.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "daemon/symbols/kernel_probe.h"
#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

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

namespace {

// --kernel-info, or the stack_map.kernel beside `file`; "" when neither.
std::string kernel_info_path(const OfflineSymbols& from, const std::string& file) {
  if (!from.kernel_info.empty()) return from.kernel_info;
  auto beside = std::filesystem::path(file).parent_path() / "stack_map.kernel";
  return std::filesystem::exists(beside) ? beside.string() : "";
}

KernelInfo read_kernel_info(const std::string& path) {
  const std::optional<std::string> text = read_file(path);
  if (!text) throw Error("cannot read " + path + ": " + std::strerror(errno));
  return KernelInfo::parse(*text, path);
}

}  // namespace

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
  const std::string info_path = kernel_info_path(from, file);
  if (info_path.empty()) {
    // A kallsyms without one is taken as from the same boot; a vmlinux never is.
    if (!from.vmlinux.empty())
      spdlog::warn("no stack_map.kernel beside {} and no --kernel-info: assuming no KASLR slide",
                   file);
    return table;
  }
  return apply_kaslr_slide(std::move(table), read_kernel_info(info_path), info_path, table_source);
}

DecodeSymbols load_decode_symbols(const OfflineSymbols& from, const std::string& file) {
  if (!from.kallsyms.empty() || !from.vmlinux.empty()) {
    return {load_offline_symbols(from, file),
            "symbols: " + (from.vmlinux.empty() ? "--kallsyms " + from.kallsyms
                                                : "--vmlinux " + from.vmlinux)};
  }
  load_offline_symbols(from, file);  // a --kernel-info alone is an error
  const std::string pass = "; pass --kallsyms or --vmlinux of the kernel it recorded";
  const std::string info_path = kernel_info_path(from, file);
  if (info_path.empty()) {
    return {std::nullopt, "no symbols: no stack_map.kernel beside " + file +
                              " says which boot it is from" + pass};
  }
  const KernelInfo recorded = read_kernel_info(info_path);
  // The build id alone cannot tell a reboot of the same kernel (another KASLR
  // slide, other modules); _text alone could match by chance on another kernel.
  if (recorded.build_id.empty() || recorded.build_id != running_kernel_build_id()) {
    return {std::nullopt, "no symbols: " + file + " is from another kernel than the running one (" +
                              info_path + ")" + pass};
  }
  std::optional<Kallsyms> host;
  try {
    host = Kallsyms::load();
  } catch (const Error& e) {
    return {std::nullopt, "no symbols: " + std::string(e.what()) + pass};
  }
  if (host->addresses_hidden()) {
    return {std::nullopt, "no symbols: /proc/kallsyms shows no addresses (kptr_restrict)" + pass};
  }
  if (recorded.text_address == 0 || recorded.text_address != host->text_address()) {
    return {std::nullopt,
            fmt::format("no symbols: {} is from another boot of the running kernel "
                        "({}: _text {:#x}, now {:#x}){}",
                        file, info_path, recorded.text_address, host->text_address(), pass)};
  }
  return {std::move(host), "symbols: the running kernel (same boot as " + file + ")"};
}

}  // namespace stackmapd

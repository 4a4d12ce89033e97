// SPDX-License-Identifier: GPL-2.0
// The symbols stage: turns the raw frames of a Snapshot into names for the exports
// (daemon/export/). Kallsyms holds the kernel's text symbols, from /proc/kallsyms on this
// machine, or offline (symbol_sources.h) from a saved kallsyms or a vmlinux moved by the KASLR
// slide that kernel_info.h recorded. Frames print the way the kernel's %pS does. Loaded once into
// one arena and binary-searched, since a kernel has ~200k symbols and every export symbolizes
// thousands of frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stackmapd {

class Kallsyms {
 public:
  // Reads and parses the file in chunks; throws Error naming the path and the fix.
  static Kallsyms load(const std::string& path = "/proc/kallsyms");
  // Throws Error on a malformed line, naming its 1-based line number.
  static Kallsyms parse(std::string_view text);

  // "sym+0xoff/0xsize", "sym+0xoff/0xsize [module]", or "0x<hex ip>" when unresolved.
  std::string format(uint64_t ip) const;

  // Views into this object: valid while it lives and is not moved from.
  struct Match {
    std::string_view name;
    std::string_view module;  // empty for the core kernel
    uint64_t offset;
    uint64_t size;
  };
  std::optional<Match> lookup(uint64_t ip) const;

  // Text symbols of a vmlinux ELF (its .symtab), at their link-time addresses.
  static Kallsyms from_vmlinux(const std::string& path);

  // Where this table puts the kernel's `_text` (0 when it has none): with the
  // runtime address recorded on the device, the KASLR slide.
  uint64_t text_address() const { return text_address_; }
  // This table as on a boot whose `_text` is at `runtime_text`: core-kernel
  // symbols shift by the KASLR slide; module symbols are dropped, since
  // modules load at addresses of their own. Throws Error without `_text`.
  Kallsyms rebased(uint64_t runtime_text) const;

  // [start, end) of every symbol `wanted` names whose end is known, by address.
  struct Range {
    uint64_t start, end;
  };
  std::vector<Range> ranges_of(const std::function<bool(std::string_view)>& wanted) const;

  size_t size() const;            // number of symbols kept (text symbols, aliases removed)
  bool addresses_hidden() const;  // every address is 0: kptr_restrict, or not root

 private:
  struct Symbol {
    uint64_t addr;
    uint32_t name_offset;
    uint32_t module_offset;
    uint16_t name_len;
    uint16_t module_len;
  };

  class Builder;
  std::string_view name_of(const Symbol& symbol) const;
  std::string_view module_of(const Symbol& symbol) const;

  std::string arena_;            // every kept name and module name, back to back
  std::vector<Symbol> symbols_;  // sorted by address, one per address
  bool addresses_hidden_ = false;
  uint64_t text_address_ = 0;
};

}  // namespace stackmapd

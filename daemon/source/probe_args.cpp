// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/probe_args.h"

#include <asm/ptrace.h>

#include <cstddef>
#include <sstream>
#include <vector>

#include "daemon/sys/error.h"
#include "stackmapd/abi.h"

namespace stackmapd {
namespace {

constexpr size_t kMaxArgs = 6;  // passed in registers by the x86_64 SysV ABI

#if defined(__x86_64__)
// The registers of the x86_64 calling convention's integer arguments, in order.
constexpr size_t kArgRegs[kMaxArgs] = {offsetof(pt_regs, rdi), offsetof(pt_regs, rsi),
                                       offsetof(pt_regs, rdx), offsetof(pt_regs, rcx),
                                       offsetof(pt_regs, r8),  offsetof(pt_regs, r9)};

// A register as a USDT note names it (any width: %rax, %eax, %ax, %al, %r8d),
// by its 64-bit register's place in pt_regs; SIZE_MAX if it names none.
size_t register_offset(const std::string& name) {
  struct Reg {
    const char* names[4];
    size_t offset;
  };
  static const Reg regs[] = {
      {{"rax", "eax", "ax", "al"}, offsetof(pt_regs, rax)},
      {{"rbx", "ebx", "bx", "bl"}, offsetof(pt_regs, rbx)},
      {{"rcx", "ecx", "cx", "cl"}, offsetof(pt_regs, rcx)},
      {{"rdx", "edx", "dx", "dl"}, offsetof(pt_regs, rdx)},
      {{"rsi", "esi", "si", "sil"}, offsetof(pt_regs, rsi)},
      {{"rdi", "edi", "di", "dil"}, offsetof(pt_regs, rdi)},
      {{"rbp", "ebp", "bp", "bpl"}, offsetof(pt_regs, rbp)},
      {{"rsp", "esp", "sp", "spl"}, offsetof(pt_regs, rsp)},
      {{"r8", "r8d", "r8w", "r8b"}, offsetof(pt_regs, r8)},
      {{"r9", "r9d", "r9w", "r9b"}, offsetof(pt_regs, r9)},
      {{"r10", "r10d", "r10w", "r10b"}, offsetof(pt_regs, r10)},
      {{"r11", "r11d", "r11w", "r11b"}, offsetof(pt_regs, r11)},
      {{"r12", "r12d", "r12w", "r12b"}, offsetof(pt_regs, r12)},
      {{"r13", "r13d", "r13w", "r13b"}, offsetof(pt_regs, r13)},
      {{"r14", "r14d", "r14w", "r14b"}, offsetof(pt_regs, r14)},
      {{"r15", "r15d", "r15w", "r15b"}, offsetof(pt_regs, r15)},
  };
  for (const Reg& r : regs)
    for (const char* n : r.names)
      if (name == n) return r.offset;
  return SIZE_MAX;
}

// USDT argument `spec` (SIZE@LOCATION, SIZE negative when signed) as a
// weight field when LOCATION is a register.
uint32_t usdt_arg_field(const UprobeTarget& probe, size_t n, const std::string& spec) {
  const size_t at = spec.find('@');
  const std::string size_text = spec.substr(0, at == std::string::npos ? 0 : at);
  const bool is_signed = size_text.starts_with('-');
  const std::string digits = is_signed ? size_text.substr(1) : size_text;
  const std::string location = at == std::string::npos ? "" : spec.substr(at + 1);
  const unsigned size = digits == "1" || digits == "2" || digits == "4" || digits == "8"
                            ? static_cast<unsigned>(std::stoul(digits))
                            : 0;
  const size_t offset = location.starts_with('%') ? register_offset(location.substr(1)) : SIZE_MAX;
  if (!size || offset == SIZE_MAX)
    throw Error(probe.source + ": its argument arg" + std::to_string(n) + " is '" + spec + "' (" +
                (location.starts_with('$')                 ? "a constant"
                 : location.find('(') != std::string::npos ? "in memory"
                                                           : "not a register") +
                "): only arguments in registers are read; weigh by another argument");
  return SMT_WEIGHT_FIELD(static_cast<uint32_t>(offset), size, is_signed ? 1u : 0u);
}
#endif

}  // namespace

bool is_probe_arg(const std::string& field) {
  return field.size() == 4 && field.starts_with("arg") && field[3] >= '0' &&
         field[3] < static_cast<char>('0' + kMaxArgs);
}

uint32_t probe_arg_field(const UprobeTarget& probe, const std::string& field) {
  if (!is_probe_arg(field))
    throw Error("-u events are weighed by an argument, arg0 to arg" + std::to_string(kMaxArgs - 1) +
                " (as bpftrace names them), not by a field");
#if defined(__x86_64__)
  const auto n = static_cast<size_t>(field[3] - '0');
  if (probe.usdt) {
    std::istringstream in(probe.usdt_args);
    std::vector<std::string> specs;
    for (std::string s; in >> s;) specs.push_back(s);
    if (n >= specs.size())
      throw Error(probe.source + " has " + std::to_string(specs.size()) +
                  " argument(s) in its USDT note: there is no " + field);
    return usdt_arg_field(probe, n, specs[n]);
  }
  if (!probe.at_entry)
    throw Error(probe.source + " is inside its function: " + field +
                " is read at a function's entry, where the calling convention puts it; drop +OFF");
  return SMT_WEIGHT_FIELD(static_cast<uint32_t>(kArgRegs[n]), 8u, 0u);
#else
  (void)probe;
  throw Error(field + " is read from the registers x86_64 passes arguments in: this machine is " +
              "not x86_64");
#endif
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// libtraceevent prints a format file's pointer conversions unlike the kernel:
// %p as "0x..." (ftrace, with its hash-ptr option off, as the kernel's %px:
// zero-padded hex without 0x) and %pS without the symbol's "/0xsize [module]".
// ftrace_pointers() rewrites each of %p, %pS/%pF and %ps/%pf in the "print fmt:"
// line into %s of a print function the event printer registers
// (kPointerFunctions), which prints what the kernel's vsprintf does.
#pragma once

#include <string>
#include <string_view>

namespace stackmapd {

inline constexpr const char* kPrintPointer = "__smt_px";  // %p: %px's text
inline constexpr const char* kPrintSymOff = "__smt_pS";   // %pS, %pF: sym+0xoff/0xsize [mod]
inline constexpr const char* kPrintSymName = "__smt_ps";  // %ps, %pf: sym [mod]

// The format file's text with its print fmt rewritten; text without a print
// fmt line, or one this cannot split into format and arguments, unchanged.
std::string ftrace_pointers(std::string_view format_text);

}  // namespace stackmapd

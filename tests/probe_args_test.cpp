// SPDX-License-Identifier: GPL-2.0
// -u's --sum/--hist argN (daemon/source/probe_args.h): the register each
// argument is read from, as the kernel's pt_regs lays them out, and the
// cookie that carries it past SMT_COOKIE_AT_ENTRY.
#include "daemon/source/probe_args.h"

#include <asm/ptrace.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "daemon/sys/error.h"
#include "stackmapd/abi.h"

namespace stackmapd {
namespace {

UprobeTarget entry() {
  UprobeTarget t;
  t.source = "/bin/x:f";
  t.at_entry = true;
  return t;
}

UprobeTarget usdt(const std::string& args) {
  UprobeTarget t;
  t.source = "/bin/x:usdt:p:n";
  t.usdt = true;
  t.usdt_args = args;
  return t;
}

std::string error_of(const UprobeTarget& t, const std::string& field) {
  try {
    probe_arg_field(t, field);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ProbeArgs, AFunctionsArgumentsAreTheCallingConventionsRegisters) {
  const size_t regs[] = {offsetof(pt_regs, rdi), offsetof(pt_regs, rsi), offsetof(pt_regs, rdx),
                         offsetof(pt_regs, rcx), offsetof(pt_regs, r8),  offsetof(pt_regs, r9)};
  for (size_t n = 0; n < 6; ++n) {
    const uint32_t f = probe_arg_field(entry(), "arg" + std::to_string(n));
    EXPECT_EQ(SMT_WEIGHT_OFFSET(f), regs[n]) << "arg" << n;
    EXPECT_EQ(SMT_WEIGHT_SIZE(f), 8u);
    EXPECT_EQ(SMT_WEIGHT_SIGNED(f), 0u);
  }
  EXPECT_FALSE(is_probe_arg("arg6"));
  EXPECT_FALSE(is_probe_arg("bytes_alloc"));
}

TEST(ProbeArgs, AUsdtArgumentIsItsNotesRegisterOfAnyWidth) {
  const UprobeTarget t = usdt("-4@%edi 8@%r8 2@%ax -1@%r15b");
  uint32_t f = probe_arg_field(t, "arg0");
  EXPECT_EQ(SMT_WEIGHT_OFFSET(f), offsetof(pt_regs, rdi));
  EXPECT_EQ(SMT_WEIGHT_SIZE(f), 4u);
  EXPECT_EQ(SMT_WEIGHT_SIGNED(f), 1u);
  f = probe_arg_field(t, "arg1");
  EXPECT_EQ(SMT_WEIGHT_OFFSET(f), offsetof(pt_regs, r8));
  EXPECT_EQ(SMT_WEIGHT_SIZE(f), 8u);
  EXPECT_EQ(SMT_WEIGHT_SIGNED(f), 0u);
  f = probe_arg_field(t, "arg2");
  EXPECT_EQ(SMT_WEIGHT_OFFSET(f), offsetof(pt_regs, rax));
  EXPECT_EQ(SMT_WEIGHT_SIZE(f), 2u);
  f = probe_arg_field(t, "arg3");
  EXPECT_EQ(SMT_WEIGHT_OFFSET(f), offsetof(pt_regs, r15));
  EXPECT_EQ(SMT_WEIGHT_SIZE(f), 1u);
}

TEST(ProbeArgs, WhatCannotBeReadIsOneLine) {
  EXPECT_NE(error_of(usdt("8@-24(%rbp)"), "arg0").find("(in memory)"), std::string::npos);
  EXPECT_NE(error_of(usdt("4@$5"), "arg0").find("(a constant)"), std::string::npos);
  EXPECT_NE(error_of(usdt("8@%rax"), "arg1").find("has 1 argument(s)"), std::string::npos);
  EXPECT_NE(error_of(usdt(""), "arg0").find("has 0 argument(s)"), std::string::npos);
  UprobeTarget inside = entry();
  inside.at_entry = false;
  EXPECT_NE(error_of(inside, "arg0").find("is inside its function"), std::string::npos);
  EXPECT_NE(error_of(entry(), "size").find("arg0 to arg5"), std::string::npos);
}

TEST(ProbeArgs, TheCookieCarriesTheFieldPastTheEntryBit) {
  const uint32_t f = probe_arg_field(entry(), "arg5");
  const uint64_t cookie = SMT_COOKIE(7, 0, f) | SMT_COOKIE_AT_ENTRY;
  EXPECT_EQ(SMT_COOKIE_WEIGHT_FIELD(cookie), f);
  EXPECT_EQ(SMT_COOKIE_SOURCE(cookie), 7u);
}

}  // namespace
}  // namespace stackmapd

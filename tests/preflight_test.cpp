// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/preflight.h"

#include <gtest/gtest.h>

#include <functional>

#include "daemon/source/sources.h"
#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Preflight, MissingBtfNamesTheKernelOption) {
  std::string msg = error_of([] { check_btf("/nonexistent/btf/vmlinux"); });
  EXPECT_NE(msg.find("no kernel BTF at /nonexistent/btf/vmlinux"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CONFIG_DEBUG_INFO_BTF=y"), std::string::npos) << msg;
  EXPECT_EQ(error_of([] { check_btf("/sys/kernel/btf/vmlinux"); }), "");
}

TEST(Preflight, BitsOutsideTheRfcRangeAreRefused) {
  EXPECT_NE(error_of([] { check_bits(9); }).find("use 10..20"), std::string::npos);
  EXPECT_NE(error_of([] { check_bits(21); }).find("--bits 21"), std::string::npos);
  EXPECT_EQ(error_of([] { check_bits(10); }), "");
  EXPECT_EQ(error_of([] { check_bits(20); }), "");
}

TEST(Preflight, EventSpecsMustBeCategoryColonName) {
  Tracepoint tp = Tracepoint::parse("kmem:kmem_cache_alloc");
  EXPECT_EQ(tp.category, "kmem");
  EXPECT_EQ(tp.name, "kmem_cache_alloc");
  EXPECT_EQ(tp.str(), "kmem:kmem_cache_alloc");
  for (const char* bad : {"kmem", ":x", "x:", "a:b:c", "a/b:c", ""})
    EXPECT_NE(error_of([&] { Tracepoint::parse(bad); }).find("CATEGORY:NAME"), std::string::npos)
        << bad;
}

}  // namespace
}  // namespace stackmapd

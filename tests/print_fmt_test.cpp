// SPDX-License-Identifier: GPL-2.0
// ftrace_pointers() on print fmt lines, and EventPrinter on a raw record built
// as the kernel lays out kmem_cache_alloc, against the text ftrace prints.
#include "daemon/export/print_fmt.h"

#include <gtest/gtest.h>

#include <cstring>

#include "daemon/export/event_printer.h"

namespace stackmapd {
namespace {

std::string print_fmt(const std::string& line) {
  const std::string out = ftrace_pointers("name: x\nprint fmt: " + line + "\n");
  return out.substr(std::strlen("name: x\nprint fmt: "), out.size() - 20);
}

TEST(FtracePointers, RewritesPlainAndSymbolPointers) {
  EXPECT_EQ(
      print_fmt(R"("a=%pS b=%p c=%lu d=%ps", (void *)REC->a, REC->b, REC->c, REC->d)"),
      R"("a=%s b=%s c=%lu d=%s",__smt_pS( (void *)REC->a),__smt_px( REC->b), REC->c,__smt_ps( REC->d))");
}

TEST(FtracePointers, CountsStarArgumentsAndSkipsPercentAndExtensions) {
  EXPECT_EQ(print_fmt(R"("%% %*s %pI4 %p", REC->w, f(REC->s, 1), REC->ip, REC->p)"),
            R"("%% %*s %pI4 %s", REC->w, f(REC->s, 1), REC->ip,__smt_px( REC->p))");
}

TEST(FtracePointers, KeepsBracketsAndLiteralsInOneArgument) {
  EXPECT_EQ(print_fmt(R"("%s %p", __print_flags(REC->f, "|", {1, "A,B"}), REC->p)"),
            R"("%s %s", __print_flags(REC->f, "|", {1, "A,B"}),__smt_px( REC->p))");
}

TEST(FtracePointers, LeavesTextItCannotMatchUnchanged) {
  const std::string text = "print fmt: \"%p %p\", REC->a\n";
  EXPECT_EQ(ftrace_pointers(text), text);
  EXPECT_EQ(ftrace_pointers("no print fmt\n"), "no print fmt\n");
}

TEST(EventPrinter, PrintsKmemCacheAllocAsFtraceDoes) {
  const std::string dir = STACKMAPD_FIXTURES_DIR "/event_printer";
  EventPrinter printer({"kmem:kmem_cache_alloc", "fentry:x"}, dir,
                       STACKMAPD_FIXTURES_DIR "/kallsyms.txt");
  smt_trace_record r = {};
  r.event.source = 0;
  r.event.tid = 42;
  r.raw_len = 80;
  const uint64_t call_site = 0xffffffff8135c8d0 + 0x24, ptr = 0xffff888103544000;
  const uint64_t req = 4096, alloc = 4096, gfp = 0xcc0; /* GFP_KERNEL */
  const uint32_t name_loc = 12u << 16 | 64;             /* __data_loc: 12 bytes (NUL too) at 64 */
  const int32_t node = -1;
  std::memcpy(r.raw + 8, &call_site, 8);
  std::memcpy(r.raw + 16, &ptr, 8);
  std::memcpy(r.raw + 24, &name_loc, 4);
  std::memcpy(r.raw + 32, &req, 8);
  std::memcpy(r.raw + 40, &alloc, 8);
  std::memcpy(r.raw + 48, &gfp, 8);
  std::memcpy(r.raw + 56, &node, 4);
  std::memcpy(r.raw + 64, "names_cache", 11);
  EXPECT_EQ(printer.print(r),
            "kmem_cache_alloc: call_site=kmem_cache_alloc_noprof+0x24/0x2f0 "
            "ptr=ffff888103544000 name=names_cache bytes_req=4096 bytes_alloc=4096 "
            "gfp_flags=GFP_KERNEL node=-1 accounted=false");
  r.event.source = 1;  // no format file: printed by name
  EXPECT_EQ(printer.print(r), "");
}

}  // namespace
}  // namespace stackmapd

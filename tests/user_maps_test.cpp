// SPDX-License-Identifier: GPL-2.0
// --user-stacks' mappings and frame names (daemon/symbols/user_maps.h,
// daemon/model/user_stack.h), and the symbolizer against this test binary.
#include "daemon/symbols/user_maps.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "daemon/model/user_stack.h"
#include "daemon/resolve/user_capture.h"
#include "daemon/symbols/perf_map.h"
#include "daemon/symbols/user_symbolizer.h"

namespace stackmapd {
namespace {

TEST(UserMaps, KeepsExecutableFileMappingsSorted) {
  const ProcessMaps m = ProcessMaps::parse(
      "7f0000002000-7f0000003000 r-xp 00002000 08:01 12 /usr/lib/libc.so.6\n"
      "555555554000-555555555000 r--p 00000000 08:01 11 /usr/bin/prog\n"
      "555555555000-555555556000 r-xp 00001000 08:01 11 /usr/bin/prog\n"
      "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]\n"
      "7f0000010000-7f0000011000 rwxp 00000000 00:00 0 \n");
  ASSERT_EQ(m.files().size(), 2u);
  EXPECT_EQ(m.files()[0].path, "/usr/bin/prog");
  const MappedFile* f = m.find(0x555555555123);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(0x555555555123 - f->start + f->pgoff, 0x1123u) << "the file offset";
  EXPECT_EQ(m.find(0x555555554100), nullptr) << "not executable";
  EXPECT_EQ(m.find(0x7ffff7fc1100), nullptr) << "[vdso] has no file";
  EXPECT_NE(m.find(0x7f0000002fff), nullptr);
  EXPECT_EQ(m.find(0x7f0000003000), nullptr) << "end is exclusive";
}

TEST(UserMaps, ReadsThisProcessWithBuildIds) {
  auto m = ProcessMaps::read(getpid());
  ASSERT_TRUE(m);
  const MappedFile* self = m->find(reinterpret_cast<uint64_t>(&getpid));
  ASSERT_NE(self, nullptr) << "libc's getpid is in a file mapping";
  EXPECT_EQ(self->build_id.size(), 40u) << "Debian's libc has a 20-byte GNU build id";
  EXPECT_EQ(elf_build_id(self->path), self->build_id);
}

__attribute__((noinline)) int user_maps_test_marker_function() { return 42; }

TEST(UserSymbolizer, NamesAFunctionOfThisBinaryByFileOffset) {
  auto m = ProcessMaps::read(getpid());
  ASSERT_TRUE(m);
  const uint64_t addr = reinterpret_cast<uint64_t>(&user_maps_test_marker_function) + 1;
  const MappedFile* f = m->find(addr);
  ASSERT_NE(f, nullptr);
  UserSymbolizer sym(1);
  const auto r = sym.resolve(f->build_id, f->open_path, addr - f->start + f->pgoff, false);
  ASSERT_FALSE(r.symbols.empty());
  EXPECT_EQ(r.symbols.back(),
            "stackmapd::(anonymous namespace)::user_maps_test_marker_function()+0x1");
  // A second binary past the cap of 1 closes the first, counted. The same
  // file under another key stands for it: a static build (arm64) maps no
  // shared library.
  sym.resolve(f->build_id + "-other", f->open_path, addr - f->start + f->pgoff, false);
  EXPECT_EQ(sym.evictions(), 1u);
  EXPECT_EQ(sym.open_binaries(), 1u);
}

__attribute__((noinline)) int user_maps_test_other_function() { return 43; }

// libdwfl's session is closed when idle, and opened again for a frame not
// asked before from the descriptor the symbolizer keeps: the file may be
// gone by then. The frames asked already need no session.
TEST(UserSymbolizer, ClosesAnIdleBinaryAndReadsItAgainAfterItIsDeleted) {
  auto m = ProcessMaps::read(getpid());
  ASSERT_TRUE(m);
  const auto offset = [&](auto fn) {
    const uint64_t addr = reinterpret_cast<uint64_t>(fn) + 1;
    const MappedFile* f = m->find(addr);
    EXPECT_NE(f, nullptr);
    return f ? addr - f->start + f->pgoff : 0;
  };
  const MappedFile* self = m->find(reinterpret_cast<uint64_t>(&user_maps_test_marker_function));
  ASSERT_NE(self, nullptr);
  char copy[] = "/tmp/stackmapd-symbolizer-XXXXXX";
  const int fd = mkstemp(copy);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    // Its path from the maps, not /proc/self/exe: under qemu-user that is qemu.
    std::ifstream in(self->path, std::ios::binary);
    std::ofstream out(copy, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
    ASSERT_TRUE(in && out) << "copying " << self->path;
  }
  UserSymbolizer sym(4);
  const auto first = sym.resolve("copy", copy, offset(&user_maps_test_marker_function), false);
  ASSERT_FALSE(first.symbols.empty());
  EXPECT_EQ(sym.open_sessions(), 1u);
  std::filesystem::remove(copy);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(sym.close_idle(now), 0u) << "used just now";
  EXPECT_EQ(sym.close_idle(now + UserSymbolizer::kIdle), 1u);
  EXPECT_EQ(sym.open_sessions(), 0u);
  EXPECT_EQ(sym.resolve("copy", copy, offset(&user_maps_test_marker_function), false).symbols,
            first.symbols)
      << "asked before: no session needed";
  EXPECT_EQ(sym.open_sessions(), 0u);
  const auto other = sym.resolve("copy", copy, offset(&user_maps_test_other_function), false);
  ASSERT_FALSE(other.symbols.empty()) << "read again through the kept descriptor";
  EXPECT_EQ(other.symbols.back(),
            "stackmapd::(anonymous namespace)::user_maps_test_other_function()+0x1");
  EXPECT_EQ(sym.open_sessions(), 1u);
}

TEST(UserStack, FrameNamesAsPerfPrintsThem) {
  UserStackSet set;
  set.binaries.push_back({"/usr/bin/prog", "ab"});
  UserFrame resolved{0x1000, 0, 0x1000, 0x1000, {"inner", "outer+0x10"}, ""};
  EXPECT_EQ(user_frame_names(set, resolved, true),
            (std::vector<std::string>{"inner (inlined) (prog)", "outer+0x10 (prog)"}));
  EXPECT_EQ(user_frame_names(set, resolved, false),
            (std::vector<std::string>{"inner (inlined)", "outer"}));
  UserFrame unresolved{0x2000, 0, 0x1fff, 0, {}, ""};
  EXPECT_EQ(user_frame_names(set, unresolved, true), std::vector<std::string>{"[prog]+0x1fff"});
  UserFrame anonymous{0x7f00deadbeef, -1, 0, 0, {}, ""};
  EXPECT_EQ(user_frame_names(set, anonymous, true), std::vector<std::string>{"0x7f00deadbeef"});
}

// Whole or truncated, as perf's DWARF unwinding ends on Debian: glibc's
// versioned and underscored names, a stripped program's nameless _start.
TEST(UserStack, ReachesAnEntryPointAsGlibcNamesIt) {
  const auto stack = [](std::vector<std::vector<std::string>> names) {
    UserStack s;
    for (auto& n : names) s.frames.push_back(UserFrame{0x1000, 0, 0x1000, 0x1000, n, ""});
    return s;
  };
  EXPECT_TRUE(reaches_entry_point(stack({{"work+0x4"}, {"main+0x10"}, {"_start+0x25"}})));
  EXPECT_TRUE(
      reaches_entry_point(stack({{"work+0x4"}, {"start_thread+0x2f3"}, {"__clone3+0x2c"}})));
  EXPECT_TRUE(
      reaches_entry_point(stack({{"main+0x10"}, {"__libc_start_main@@GLIBC_2.34+0x85"}, {}})));
  EXPECT_TRUE(reaches_entry_point(stack({{"main+0x10"}, {"__libc_start_main@@GLIBC_2.34+0x85"}})));
  EXPECT_FALSE(reaches_entry_point(stack({{"work+0x4"}, {"main+0x10"}, {}})));
  EXPECT_FALSE(reaches_entry_point(stack({{"work+0x4"}, {"main+0x10"}})));
  EXPECT_FALSE(reaches_entry_point(stack({{"work+0x4"}, {"start_threads+0x1"}})));
  EXPECT_FALSE(reaches_entry_point(stack({})));
}

TEST(PerfMap, NamesJitCodeAsPerfReadsIt) {
  const PerfMap m = PerfMap::parse(
      "7f0000001000 40 jit_one\n"
      "7f0000000100 10 LazyCompile:*foo bar.js:3\n"
      "not a line\n"
      "7f0000002000 0 empty\n"
      "7f0000001000 20 jit_one_recompiled\n");
  EXPECT_EQ(m.size(), 2u) << "bad and empty lines skipped, one start kept";
  EXPECT_EQ(m.find(0x7f0000000104), "LazyCompile:*foo bar.js:3+0x4") << "names keep their spaces";
  EXPECT_EQ(m.find(0x7f0000001008), "jit_one_recompiled+0x8") << "the later line of a start wins";
  EXPECT_EQ(m.find(0x7f0000001020), std::nullopt) << "end is exclusive";
  EXPECT_EQ(m.find(0x7f0000001020, true), "jit_one_recompiled+0x20")
      << "a return address is in its call, its offset its own";
  EXPECT_EQ(m.find(0x7f00000000ff), std::nullopt);
}

TEST(PerfMap, ReadsThisProcessesMapThroughProc) {
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("1000 10 here\n", f);
  fclose(f);
  std::optional<PerfMap> m = PerfMap::read(getpid());
  unlink(path.c_str());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->find(0x1001), "here+0x1");
  EXPECT_FALSE(PerfMap::read(getpid())) << "no map: none";
}

}  // namespace
}  // namespace stackmapd

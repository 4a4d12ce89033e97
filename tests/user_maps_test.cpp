// SPDX-License-Identifier: GPL-2.0
// --user-stacks' mappings and frame names (daemon/symbols/user_maps.h,
// daemon/model/user_stack.h), and the symbolizer against this test binary.
#include "daemon/symbols/user_maps.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "daemon/model/user_stack.h"
#include "daemon/resolve/sandboxed_parser.h"
#include "daemon/resolve/user_capture.h"
#include "daemon/symbols/perf_map.h"
#include "daemon/symbols/user_symbolizer.h"
#include "daemon/sys/unique_fd.h"

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

// The opens of the file at `path` (inotify's IN_OPEN) while `read` runs.
template <typename Read>
int opens_of(const std::string& path, Read read) {
  UniqueFd in(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  EXPECT_TRUE(in);
  EXPECT_GE(inotify_add_watch(in.get(), path.c_str(), IN_OPEN), 0);
  read();
  int opens = 0;
  alignas(inotify_event) char buf[4096];
  for (ssize_t n; (n = ::read(in.get(), buf, sizeof(buf))) > 0;)
    for (char* p = buf; p < buf + n;
         p += sizeof(inotify_event) + reinterpret_cast<inotify_event*>(p)->len)
      opens += (reinterpret_cast<inotify_event*>(p)->mask & IN_OPEN) != 0;
  return opens;
}

// Exec churn: every new process maps the same files. One seen in another
// process (same dev, inode, size, mtime) is neither opened nor parsed again;
// rewritten, it is.
TEST(UserMaps, ReadsAFileSeenInAnotherProcessWithoutOpeningIt) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("stackmapd-maps-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  const std::filesystem::path bin = root / "prog";
  std::filesystem::create_directories(root);
  std::filesystem::copy_file("/bin/true", bin);  // a new inode: unknown to the cache
  const auto fake_process = [&](int pid) {
    const std::filesystem::path dir = root / std::to_string(pid);
    std::filesystem::create_directories(dir / "map_files");
    std::ofstream(dir / "maps") << "555555555000-555555556000 r-xp 00001000 08:01 11 "
                                << bin.string() << "\n";
    std::filesystem::create_symlink(bin, dir / "map_files" / "555555555000-555555556000");
  };
  for (int pid : {1, 2, 3}) fake_process(pid);
  int parses = 0;
  const BuildIdParser parse = [&](int) {
    ++parses;
    return std::string("ab") + std::to_string(parses);
  };
  std::optional<ProcessMaps> first, second;
  EXPECT_EQ(opens_of(bin, [&] { first = ProcessMaps::read(1, root.string(), nullptr, parse); }), 1);
  const BuildIdCacheCounts before = build_id_cache_counts();
  EXPECT_EQ(opens_of(bin, [&] { second = ProcessMaps::read(2, root.string(), nullptr, parse); }), 0)
      << "known by a stat of its /proc link";
  ASSERT_TRUE(first && second);
  ASSERT_EQ(second->files().size(), 1u);
  EXPECT_EQ(parses, 1);
  EXPECT_EQ(second->files()[0].build_id, "ab1");
  EXPECT_EQ(second->files()[0].identity, first->files()[0].identity);
  EXPECT_TRUE(second->files()[0].identity.known());
  EXPECT_EQ(build_id_cache_counts().hits, before.hits + 1);
  std::ofstream(bin, std::ios::app) << "rewritten";
  std::optional<ProcessMaps> third = ProcessMaps::read(3, root.string(), nullptr, parse);
  ASSERT_TRUE(third);
  EXPECT_EQ(parses, 2) << "a file rewritten in place is parsed again";
  EXPECT_EQ(third->files()[0].build_id, "ab2");
  std::filesystem::remove_all(root);
}

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

// Exec churn: each new process of a program has the same frames at the
// same file offsets. Named once, they are named again without the parser.
// A process living 50 ms exits while a new file of it is parsed (the parse
// takes longer): every file is looked at first, and the files the caller
// asked for (a stack's) are held open from that first look, known or not.
TEST(UserMaps, LooksAtEveryFileBeforeParsingAnyAndHoldsTheAskedOnesOpen) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("stackmapd-exits-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const std::filesystem::path prog = root / "prog", lib = root / "lib";
  std::filesystem::copy_file("/bin/true", prog);  // new inodes: unknown to the cache
  std::filesystem::copy_file("/bin/false", lib);
  const auto map = [&](int pid,
                       const std::vector<std::pair<std::string, std::filesystem::path>>& mappings) {
    const std::filesystem::path dir = root / std::to_string(pid);
    std::filesystem::create_directories(dir / "map_files");
    std::ofstream maps(dir / "maps");
    for (const auto& [range, file] : mappings) {
      maps << range << " r-xp 00001000 08:01 11 " << file.string() << "\n";
      std::filesystem::create_symlink(file, dir / "map_files" / range);
    }
  };
  map(1, {{"7f0000001000-7f0000002000", lib}});
  map(2, {{"555555555000-555555556000", prog}, {"7f0000001000-7f0000002000", lib}});
  ASSERT_TRUE(ProcessMaps::read(1, root.string(), nullptr, [](int) { return "11"; }));
  // The process exits during the first parse: its /proc links are gone.
  const BuildIdParser parse_and_exit = [&](int) {
    std::filesystem::remove_all(root / "2" / "map_files");
    return std::string("22");
  };
  ProcessMaps::OpenedFiles opened{{0x7f0000001100}, {}};
  std::optional<ProcessMaps> m =
      ProcessMaps::read(2, root.string(), nullptr, parse_and_exit, &opened);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->files().size(), 2u);
  EXPECT_EQ(m->files()[0].build_id, "22");
  EXPECT_EQ(m->files()[1].build_id, "11") << "known from process 1";
  for (const MappedFile& f : m->files()) EXPECT_TRUE(f.identity.known()) << f.path;
  ASSERT_EQ(opened.by_path.size(), 1u) << "the asked file only";
  ASSERT_TRUE(opened.by_path.count(lib.string()));
  struct stat st = {};
  ASSERT_EQ(fstat(opened.by_path[lib.string()]->get(), &st), 0);
  EXPECT_EQ(st.st_ino, m->files()[1].identity.ino) << "the file mapped, held open";
  std::filesystem::remove_all(root);
}

// A process gone before its files could be looked at still names the build
// id of a file another process mapped: by the (device, inode) of its maps
// line, so that the file is one binary, not a second one without an id.
TEST(UserMaps, AProcessGoneBeforeItsLookKeepsTheBuildIdItsMapsLineNames) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("stackmapd-gone-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  const std::filesystem::path lib = root / "lib";
  std::filesystem::create_directories(root / "1" / "map_files");
  std::filesystem::create_directories(root / "2");
  std::filesystem::copy_file("/bin/true", lib);
  const std::string line = "7f0000001000-7f0000002000 r-xp 00001000 fe:03 424242 " + lib.string();
  std::ofstream(root / "1" / "maps") << line << "\n";
  std::filesystem::create_symlink(lib, root / "1" / "map_files" / "7f0000001000-7f0000002000");
  std::ofstream(root / "2" / "maps") << line << "\n";  // its /proc links gone with it
  const BuildIdParser parse = [](int) { return std::string("ab12"); };
  std::optional<ProcessMaps> first = ProcessMaps::read(1, root.string(), nullptr, parse);
  std::optional<ProcessMaps> gone = ProcessMaps::read(2, root.string(), nullptr, parse);
  ASSERT_TRUE(first && gone);
  ASSERT_EQ(gone->files().size(), 1u);
  EXPECT_FALSE(gone->files()[0].identity.known()) << "never looked at";
  EXPECT_EQ(gone->files()[0].build_id, "ab12");
  std::filesystem::remove_all(root);
}

TEST(UserCapture, NamesAFrameSeenBeforeWithoutTheParser) {
  auto m = ProcessMaps::read(getpid());
  ASSERT_TRUE(m);
  const uint64_t addr = reinterpret_cast<uint64_t>(&user_maps_test_marker_function) + 1;
  UserCapture capture;
  const UserStackIps ips{static_cast<uint32_t>(getpid()), 1, {addr}};
  const UserStack first = capture.symbolize(capture.capture(ips));
  ASSERT_EQ(first.frames.size(), 1u);
  ASSERT_FALSE(first.frames[0].symbols.empty());
  EXPECT_EQ(capture.names_reused(), 0u);
  const UserStack again =
      capture.symbolize(capture.capture({ips.pid, 2, ips.ips}));  // as if another exec
  ASSERT_EQ(again.frames.size(), 1u);
  EXPECT_EQ(again.frames[0].symbols, first.frames[0].symbols);
  EXPECT_EQ(again.frames[0].elf_addr, first.frames[0].elf_addr);
  EXPECT_EQ(capture.names_reused(), 1u);
}

// The helper forgets the least recently used binary past its cap; a stack
// that brought the file anyway (the capture opened it) is named through it,
// not left unnamed because the daemon believed the helper still held it.
TEST(SandboxedParser, SendsTheFileAgainWhenTheHelperLetItGo) {
  auto m = ProcessMaps::read(getpid());
  ASSERT_TRUE(m);
  const uint64_t addr = reinterpret_cast<uint64_t>(&user_maps_test_marker_function);
  const MappedFile* self = m->find(addr);
  ASSERT_NE(self, nullptr);
  const std::vector<SandboxedParser::Frame> frames{{addr - self->start + self->pgoff, false}};
  UniqueFd exe(open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  UniqueFd other(open("/bin/true", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(exe && other);
  SandboxedParser parser("symbols");
  const auto named = [&] {
    std::optional<std::vector<UserSymbolizer::Result>> r =
        parser.symbolize("self", exe.get(), frames);
    return r && r->size() == 1 && !(*r)[0].symbols.empty() ? user_function_name((*r)[0].symbols[0])
                                                           : std::string();
  };
  EXPECT_EQ(named(), "stackmapd::(anonymous namespace)::user_maps_test_marker_function()");
  for (size_t i = 0; i < UserSymbolizer::kDefaultMaxBinaries; ++i)
    ASSERT_TRUE(parser.symbolize("other " + std::to_string(i), other.get(), {{0, false}}));
  EXPECT_TRUE(parser.holds("self")) << "as far as the daemon knows";
  EXPECT_EQ(named(), "stackmapd::(anonymous namespace)::user_maps_test_marker_function()");
  EXPECT_EQ(parser.let_go(), 1u);
}

// Go 1.19's stacks end in its runtime, in no C entry point: whole there.
TEST(UserStack, ReachesAGoRoot) {
  const auto stack = [](std::vector<std::vector<std::string>> names) {
    UserStack s;
    for (auto& n : names) s.frames.push_back(UserFrame{0x1000, 0, 0x1000, 0x1000, n, ""});
    return s;
  };
  EXPECT_TRUE(reaches_entry_point(stack({{"main.spin+0x2f"},
                                         {"main.main+0xd5"},
                                         {"runtime.main+0x212"},
                                         {"runtime.goexit.abi0+0x1"}})));
  EXPECT_TRUE(reaches_entry_point(
      stack({{"main.spin+0x2f"}, {"main.main.func1+0x5a"}, {"runtime.goexit.abi0+0x1"}})));
  EXPECT_TRUE(reaches_entry_point(stack({{"main.main+0xd5"}, {"runtime.main+0x212"}})));
  EXPECT_TRUE(reaches_entry_point(
      stack({{"runtime.schedule+0x2d"}, {"runtime.mstart0+0x6b"}, {"runtime.mstart.abi0+0x5"}})));
  EXPECT_TRUE(
      reaches_entry_point(stack({{"runtime.schedinit+0x1c"}, {"runtime.rt0_go.abi0+0x10c"}})));
  EXPECT_FALSE(reaches_entry_point(stack({{"main.spin+0x2f"}, {"main.main+0xd5"}})));
  EXPECT_FALSE(reaches_entry_point(stack({{"runtime.schedule+0x2d"}, {"runtime.mstart0+0x6b"}})))
      << "mstart0 is called by mstart";
  EXPECT_FALSE(reaches_entry_point(stack({{"main.spin+0x2f"}, {"runtime.goexit1.abi0+0x1"}})));
  EXPECT_FALSE(reaches_entry_point(stack({{"main.spin+0x2f"}, {"runtime.mainx+0x1"}})));
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

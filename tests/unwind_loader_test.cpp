// SPDX-License-Identifier: GPL-2.0
// The unwind loader (daemon/unwind/unwind_loader.h) in real BPF maps of the
// walker's shape, for real processes: a file's table is loaded once for every
// process that maps it, a file the kernel side asks for is loaded from the
// asking process, the least recently walked file makes room and is asked for
// again, files in use stay, and code the kernel side listed is kept.
// Root: the maps are the kernel's.
#include "daemon/unwind/unwind_loader.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/sys/unique_fd.h"
#include "daemon/unwind/cfi_table.h"
#include "unwind_test_maps.h"

extern char** environ;

namespace stackmapd {
namespace {

constexpr const char* kLibc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
// A child that waits in `argv[0]`'s code until killed.
struct Child {
  explicit Child(std::vector<const char*> argv) {
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/zero", O_RDONLY, 0);  // never EOF
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, const_cast<char**>(argv.data()), environ),
              0);
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() { end(); }
  void end() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  // Its maps once exec has replaced ours in it and ld.so has mapped libc.
  ProcessMaps maps(const std::string& binary) const {
    for (int i = 0; i < 200; ++i) {
      if (auto m = ProcessMaps::read(static_cast<uint32_t>(pid))) {
        bool exec = false, libc = false;
        for (const MappedFile& f : m->files()) {
          exec |= f.path == binary;
          libc |= f.path == kLibc;
        }
        if (exec && libc) return *m;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << binary << " and " << kLibc << " never mapped in " << pid;
    return {};
  }
  pid_t pid = -1;
};

size_t rows_of(const ProcessMaps& m) {
  size_t n = 0;
  for (const MappedFile& f : m.files()) n += build_cfi_table(f.open_path).rows.size();
  return n;
}

const MappedFile* file_of(const ProcessMaps& m, const std::string& path) {
  for (const MappedFile& f : m.files())
    if (f.path == path) return &f;
  return nullptr;
}

smt_unwind_file_key key_of(const MappedFile& f) {
  smt_unwind_file_key k{};
  k.ino = f.inode;
  k.dev = f.dev;
  return k;
}

std::optional<smt_unwind_file> file_entry(const TestUnwindMaps& maps, const MappedFile& f) {
  const smt_unwind_file_key k = key_of(f);
  smt_unwind_file out{};
  if (bpf_map_lookup_elem(maps.files.get(), &k, &out) != 0) return std::nullopt;
  return out;
}

// The rows map holds `path`'s table where its file entry says.
void expect_rows(const TestUnwindMaps& maps, const smt_unwind_file& f, const std::string& path) {
  const CfiTable t = build_cfi_table(path);
  ASSERT_EQ(f.nr_rows, t.rows.size()) << path;
  for (uint32_t i = 0; i < f.nr_rows; i += 97) {  // a sample through the whole run
    const uint32_t at = f.first_row + i;
    smt_unwind_row r{};
    ASSERT_EQ(bpf_map_lookup_elem(maps.rows.get(), &at, &r), 0);
    ASSERT_EQ(std::memcmp(&r, &t.rows[i], sizeof(r)), 0) << path << " row " << i;
  }
}

// Walks used the file's rows at `when` (what the BPF walker writes).
void walked(const TestUnwindMaps& maps, const smt_unwind_file_key& k, uint64_t when) {
  smt_unwind_file e{};
  ASSERT_EQ(bpf_map_lookup_elem(maps.files.get(), &k, &e), 0) << k.ino;
  e.used = when;
  ASSERT_EQ(bpf_map_update_elem(maps.files.get(), &k, &e, BPF_ANY), 0);
}

UnwindLoader loader_of(const TestUnwindMaps& maps, uint32_t max_rows, const uint64_t& now) {
  return UnwindLoader(
      maps.fds(), max_rows, [](const std::string& p) { return build_cfi_table(p); }, "/proc",
      [&now] { return now; });
}

TEST(UnwindLoaderRoot, AFileIsLoadedOnceForEveryProcessMappingIt) {
  const std::string sleep_bin = "/usr/bin/sleep", cat_bin = "/usr/bin/cat";
  Child sleeper({sleep_bin.c_str(), "60"}), cat({cat_bin.c_str()});
  const ProcessMaps sleep_maps = sleeper.maps(sleep_bin), cat_maps = cat.maps(cat_bin);
  const TestUnwindMaps maps(1u << 18);
  ASSERT_TRUE(maps.ok()) << "bpf_map_create: " << strerror(errno) << " (root?)";
  const uint64_t now = 1000;
  UnwindLoader loader = loader_of(maps, 1u << 18, now);
  ASSERT_TRUE(loader.load(static_cast<uint32_t>(sleeper.pid), 1, sleep_maps));
  const uint64_t tables = loader.counts().tables, rows = loader.counts().rows;
  ASSERT_TRUE(loader.load(static_cast<uint32_t>(cat.pid), 1, cat_maps));
  EXPECT_EQ(loader.counts().tables, tables + 1) << "cat's own table only: libc, ld.so shared";
  EXPECT_EQ(loader.counts().rows, rows + build_cfi_table(cat_bin).rows.size());

  const MappedFile* libc = file_of(cat_maps, kLibc);
  ASSERT_NE(libc, nullptr);
  const std::optional<smt_unwind_file> f = file_entry(maps, *libc);
  ASSERT_TRUE(f);
  expect_rows(maps, *f, kLibc);
  EXPECT_EQ(f->used, now) << "counted as used when loaded";
  // Both entries name libc by its file, and list its code where it is mapped.
  for (const Child* c : {&sleeper, &cat}) {
    const auto pid = static_cast<uint32_t>(c->pid);
    smt_unwind_process p{};
    ASSERT_EQ(bpf_map_lookup_elem(maps.procs.get(), &pid, &p), 0);
    const ProcessMaps& m = c == &cat ? cat_maps : sleep_maps;
    const MappedFile* l = file_of(m, kLibc);
    const smt_unwind_mapping* found = nullptr;
    for (uint32_t i = 0; i < p.nr; ++i)
      if (p.mappings[i].start == l->start) found = &p.mappings[i];
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->ino, libc->inode);
    EXPECT_EQ(found->dev, libc->dev);
    EXPECT_EQ(uint64_t{found->pgoff} << SMT_UNWIND_PAGE_SHIFT, l->pgoff);
  }
}

TEST(UnwindLoaderRoot, TheLeastRecentlyWalkedFileMakesRoomAndIsAskedForAgain) {
  const std::string sleep_bin = "/usr/bin/sleep", cat_bin = "/usr/bin/cat";
  Child sleeper({sleep_bin.c_str(), "60"});
  const ProcessMaps sleep_maps = sleeper.maps(sleep_bin);
  const size_t cat_rows = build_cfi_table(cat_bin).rows.size();
  constexpr size_t kVdsoRoom = 256;  // the vdso's table: a few dozen rows
  ASSERT_GT(cat_rows, kVdsoRoom) << "cat's table must not fit in the room left";
  const auto max_rows = static_cast<uint32_t>(rows_of(sleep_maps) + kVdsoRoom);
  const TestUnwindMaps maps(max_rows);
  ASSERT_TRUE(maps.ok()) << "bpf_map_create: " << strerror(errno) << " (root?)";
  uint64_t now = 1000;
  UnwindLoader loader = loader_of(maps, max_rows, now);
  ASSERT_TRUE(loader.load(static_cast<uint32_t>(sleeper.pid), 1, sleep_maps));
  const MappedFile* sleep_code = file_of(sleep_maps, sleep_bin);
  const MappedFile* libc = file_of(sleep_maps, kLibc);
  ASSERT_TRUE(sleep_code && libc);
  const smt_unwind_file libc_before = *file_entry(maps, *libc);
  // The kernel side asked for sleep's file once.
  const smt_unwind_file_key sleep_key = key_of(*sleep_code);
  const uint8_t one = 1;
  ASSERT_EQ(bpf_map_update_elem(maps.asked.get(), &sleep_key, &one, BPF_ANY), 0);

  Child cat({cat_bin.c_str()});
  const ProcessMaps cat_maps = cat.maps(cat_bin);
  const MappedFile* cat_code = file_of(cat_maps, cat_bin);
  ASSERT_NE(cat_code, nullptr);
  // Everything walked just now: cat does not fit, nothing is evicted.
  ASSERT_TRUE(loader.load(static_cast<uint32_t>(cat.pid), 1, cat_maps));
  EXPECT_EQ(loader.counts().rows_full, 1u);
  EXPECT_FALSE(file_entry(maps, *cat_code)) << "cat left to frame pointers";
  EXPECT_TRUE(file_entry(maps, *sleep_code)) << "sleep's table in use stays";

  // Later: everything walked but sleep's code. Its table goes, cat's comes in.
  now += 3 * RowAllocator::kInUseTicks;
  for (const MappedFile& f : cat_maps.files())
    if (f.path != cat_bin) walked(maps, key_of(f), now);
  walked(maps, {SMT_UNWIND_VDSO_INO, 0}, now);
  ASSERT_TRUE(loader.load(static_cast<uint32_t>(cat.pid), 1, cat_maps));
  EXPECT_EQ(loader.counts().tables_evicted, 1u) << "sleep's own table, no other";
  EXPECT_FALSE(file_entry(maps, *sleep_code)) << "its walks stopped";
  uint8_t asked = 0;
  EXPECT_NE(bpf_map_lookup_elem(maps.asked.get(), &sleep_key, &asked), 0)
      << "to be asked for again when met";
  const std::optional<smt_unwind_file> cat_file = file_entry(maps, *cat_code);
  ASSERT_TRUE(cat_file) << "cat placed in sleep's rows";
  expect_rows(maps, *cat_file, cat_bin);
  EXPECT_EQ(file_entry(maps, *libc)->first_row, libc_before.first_row) << "rows in use stay put";
}

TEST(UnwindLoaderRoot, AFileAskedForIsLoadedFromTheAskingProcess) {
  const std::string cat_bin = "/usr/bin/cat";
  Child cat({cat_bin.c_str()});
  const ProcessMaps cat_maps = cat.maps(cat_bin);
  const MappedFile* code = file_of(cat_maps, cat_bin);
  ASSERT_NE(code, nullptr);
  const TestUnwindMaps maps(1u << 16);
  ASSERT_TRUE(maps.ok()) << "bpf_map_create: " << strerror(errno) << " (root?)";
  const uint64_t now = 1000;
  UnwindLoader loader = loader_of(maps, 1u << 16, now);
  smt_unwind_wanted w{};
  w.tgid = static_cast<uint32_t>(cat.pid);
  w.mapping = {code->start, code->end, code->inode, code->dev,
               static_cast<uint32_t>(code->pgoff >> SMT_UNWIND_PAGE_SHIFT)};
  loader.want(w);
  const std::optional<smt_unwind_file> f = file_entry(maps, *code);
  ASSERT_TRUE(f);
  expect_rows(maps, *f, cat_bin);
  EXPECT_EQ(loader.counts().asked, 1u);
  // A range the process does not map (it exited, or unmapped it): not the
  // file's fault; its asked mark goes, so the next process that meets it asks.
  w.mapping.start = 4096;
  w.mapping.end = 8192;
  w.mapping.ino = 12345;
  const smt_unwind_file_key gone_key = {12345, code->dev};
  const uint8_t one = 1;
  ASSERT_EQ(bpf_map_update_elem(maps.asked.get(), &gone_key, &one, BPF_ANY), 0);
  loader.want(w);
  uint8_t asked = 0;
  EXPECT_NE(bpf_map_lookup_elem(maps.asked.get(), &gone_key, &asked), 0);
  EXPECT_EQ(loader.counts().asked_gone, 1u);
  EXPECT_EQ(loader.counts().no_table, 0u);
  EXPECT_EQ(loader.counts().asked, 2u);
}

TEST(UnwindLoaderRoot, KeepsTheCodeTheKernelSideListedSinceTheMapsWereRead) {
  const std::string cat_bin = "/usr/bin/cat";
  Child cat({cat_bin.c_str()});
  const ProcessMaps cat_maps = cat.maps(cat_bin);
  const TestUnwindMaps maps(1u << 18);
  ASSERT_TRUE(maps.ok()) << "bpf_map_create: " << strerror(errno) << " (root?)";
  const uint64_t now = 1000;
  UnwindLoader loader = loader_of(maps, 1u << 18, now);
  const auto pid = static_cast<uint32_t>(cat.pid);
  // A library mapped after the maps were read, listed by the kernel side.
  const smt_unwind_mapping later = {0x10000, 0x20000, 777, 8, 0};
  smt_unwind_process listed{};
  listed.nr = 1;
  listed.exec_id = 5;
  listed.mappings[0] = later;
  ASSERT_EQ(bpf_map_update_elem(maps.procs.get(), &pid, &listed, BPF_ANY), 0);
  auto listed_now = [&] {
    smt_unwind_process p{};
    EXPECT_EQ(bpf_map_lookup_elem(maps.procs.get(), &pid, &p), 0);
    bool found = false;
    for (uint32_t i = 0; i < p.nr; ++i) found |= p.mappings[i].ino == later.ino;
    EXPECT_GE(p.nr, cat_maps.files().size());
    for (uint32_t i = 1; i < p.nr; ++i) EXPECT_LT(p.mappings[i - 1].start, p.mappings[i].start);
    return found;
  };
  ASSERT_TRUE(loader.load(pid, 5, cat_maps));
  EXPECT_TRUE(listed_now()) << "the same exec: kept, in order";
  ASSERT_EQ(bpf_map_update_elem(maps.procs.get(), &pid, &listed, BPF_ANY), 0);
  ASSERT_TRUE(loader.load(pid, 6, cat_maps));
  EXPECT_FALSE(listed_now()) << "an entry of the image before an exec is not";
}

}  // namespace
}  // namespace stackmapd

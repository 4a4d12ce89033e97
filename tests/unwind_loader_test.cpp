// SPDX-License-Identifier: GPL-2.0
// The unwind loader's rows (daemon/unwind/unwind_loader.h) in real BPF maps
// of the walker's shape, for real processes: a file's rows are shared and
// stay put while a process listed with them lives, and the rows of files
// only exited processes used are given back when a new file needs room.
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

// The walker's two maps, of its shapes: rows (mmapable) and processes.
struct WalkerMaps {
  explicit WalkerMaps(uint32_t max_rows) {
    LIBBPF_OPTS(bpf_map_create_opts, mmapable, .map_flags = BPF_F_MMAPABLE);
    rows = UniqueFd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "t_unwind_rows", 4, sizeof(smt_unwind_row),
                                   max_rows, &mmapable));
    procs = UniqueFd(bpf_map_create(BPF_MAP_TYPE_HASH, "t_unwind_procs", 4,
                                    sizeof(smt_unwind_process), 16, nullptr));
  }
  UniqueFd rows, procs;
};

size_t rows_of(const ProcessMaps& m) {
  size_t n = 0;
  for (const MappedFile& f : m.files()) n += build_cfi_table(f.open_path).rows.size();
  return n;
}

const smt_unwind_mapping* mapping_of(const smt_unwind_process& p, const ProcessMaps& m,
                                     const std::string& path) {
  for (const MappedFile& f : m.files())
    if (f.path == path)
      for (uint32_t i = 0; i < p.nr; ++i)
        if (p.mappings[i].start == f.start) return &p.mappings[i];
  return nullptr;
}

TEST(UnwindLoaderRoot, RowsOfExitedProcessesMakeRoomForNewFiles) {
  const std::string sleep_bin = "/usr/bin/sleep", cat_bin = "/usr/bin/cat";
  Child sleeper({sleep_bin.c_str(), "60"});
  const ProcessMaps sleep_maps = sleeper.maps(sleep_bin);
  const size_t cat_rows = build_cfi_table(cat_bin).rows.size();
  constexpr size_t kVdsoRoom = 256;  // the vdso's table: a few dozen rows
  ASSERT_GT(cat_rows, kVdsoRoom) << "cat's table must not fit in the room left";
  // Room for sleep, libc, ld.so and the vdso: not for cat's own rows too.
  const auto max_rows = static_cast<uint32_t>(rows_of(sleep_maps) + kVdsoRoom);

  const WalkerMaps maps(max_rows);
  const int rows = maps.rows.get(), procs = maps.procs.get();
  ASSERT_TRUE(maps.rows && maps.procs) << "bpf_map_create: " << strerror(errno) << " (root?)";
  UnwindLoader loader(rows, max_rows, procs,
                      [](const std::string& p) { return build_cfi_table(p); });

  ASSERT_TRUE(loader.load(static_cast<uint32_t>(sleeper.pid), 1, sleep_maps));
  EXPECT_EQ(loader.counts().rows_full, 0u);
  const uint64_t sleep_tables = loader.counts().tables;

  Child cat({cat_bin.c_str()});
  const ProcessMaps cat_maps = cat.maps(cat_bin);
  const auto cat_pid = static_cast<uint32_t>(cat.pid);
  smt_unwind_process p = {};
  ASSERT_TRUE(loader.load(cat_pid, 1, cat_maps));
  ASSERT_EQ(bpf_map_lookup_elem(procs, &cat_pid, &p), 0);
  EXPECT_EQ(loader.counts().rows_full, 1u) << "sleep lives: no room for cat";
  ASSERT_NE(mapping_of(p, cat_maps, cat_bin), nullptr);
  EXPECT_EQ(mapping_of(p, cat_maps, cat_bin)->nr_rows, 0u) << "cat left to frame pointers";
  const std::string libc = kLibc;
  ASSERT_NE(mapping_of(p, cat_maps, libc), nullptr);
  const smt_unwind_mapping libc_before = *mapping_of(p, cat_maps, libc);
  EXPECT_GT(libc_before.nr_rows, 0u) << "libc's rows shared with sleep";

  sleeper.end();  // exited and reaped: its rows are free to go
  ASSERT_TRUE(loader.load(cat_pid, 2, cat_maps));
  ASSERT_EQ(bpf_map_lookup_elem(procs, &cat_pid, &p), 0);
  const smt_unwind_mapping* cat_code = mapping_of(p, cat_maps, cat_bin);
  ASSERT_NE(cat_code, nullptr);
  EXPECT_EQ(cat_code->nr_rows, cat_rows) << "cat placed in sleep's rows";
  EXPECT_EQ(loader.counts().tables_freed, 1u) << "sleep's own table, no other";
  EXPECT_EQ(loader.counts().tables, sleep_tables) << "sleep's table out, cat's in";
  const smt_unwind_mapping* libc_after = mapping_of(p, cat_maps, libc);
  ASSERT_NE(libc_after, nullptr);
  EXPECT_EQ(libc_after->first_row, libc_before.first_row) << "a living process's rows stay put";
  const auto pid = static_cast<uint32_t>(sleeper.pid);
  EXPECT_NE(bpf_map_lookup_elem(procs, &pid, &p), 0) << "the exited process's entry went";

  // The map holds cat's rows where its entry says.
  Mapping view(rows, size_t{max_rows} * sizeof(smt_unwind_row), PROT_READ, 0, "rows");
  const CfiTable cat_table = build_cfi_table(cat_bin);
  ASSERT_LE(size_t{cat_code->first_row} + cat_rows, max_rows);
  EXPECT_EQ(std::memcmp(view.as<smt_unwind_row>() + cat_code->first_row, cat_table.rows.data(),
                        cat_rows * sizeof(smt_unwind_row)),
            0);
}

// A file placed early in a process's load is its own: a later file of the
// same load that needs the rows of exited processes never takes its rows.
TEST(UnwindLoaderRoot, ALoadNeverGivesAwayTheRowsItJustPlaced) {
  const std::string cat_bin = "/usr/bin/cat", ld = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
  Child cat({cat_bin.c_str()});
  const ProcessMaps real = cat.maps(cat_bin);
  // An exited process (forked and reaped) listed with libc; then one listing
  // cat (fits in the room left) below ld.so (fits only in libc's rows).
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  waitpid(gone, nullptr, 0);
  const uint32_t next = 1u << 22;  // above pid_max: no such process
  char dir_template[] = "/tmp/stackmapd-unwind-loader.XXXXXX";
  const std::string root = mkdtemp(dir_template);
  auto fake = [&](uint32_t pid, const std::vector<std::string>& paths) {
    const std::string dir = root + "/" + std::to_string(pid);
    ASSERT_EQ(system(("mkdir -p " + dir + "/map_files").c_str()), 0);
    std::string maps;
    for (const MappedFile& f : real.files()) {
      if (std::find(paths.begin(), paths.end(), f.path) == paths.end()) continue;
      char range[64], line[512];
      snprintf(range, sizeof(range), "%lx-%lx", static_cast<unsigned long>(f.start),
               static_cast<unsigned long>(f.end));
      snprintf(line, sizeof(line), "%s r-xp %08lx 00:00 0 %s\n", range,
               static_cast<unsigned long>(f.pgoff), f.path.c_str());
      maps += line;
      ASSERT_EQ(symlink(f.path.c_str(), (dir + "/map_files/" + range).c_str()), 0);
    }
    std::FILE* out = std::fopen((dir + "/maps").c_str(), "w");
    ASSERT_NE(out, nullptr);
    std::fputs(maps.c_str(), out);
    std::fclose(out);
  };
  fake(static_cast<uint32_t>(gone), {kLibc});
  fake(next, {cat_bin, ld});
  const std::optional<ProcessMaps> gone_maps = ProcessMaps::read(static_cast<uint32_t>(gone), root);
  const std::optional<ProcessMaps> next_maps = ProcessMaps::read(next, root);
  ASSERT_TRUE(gone_maps && next_maps);
  ASSERT_EQ(next_maps->files().size(), 2u);
  const size_t libc_rows = rows_of(*gone_maps), cat_rows = build_cfi_table(cat_bin).rows.size(),
               ld_rows = build_cfi_table(ld).rows.size();
  const size_t room = cat_rows + ld_rows / 2;
  ASSERT_LE(ld_rows, libc_rows) << "ld.so fits in libc's rows";
  const auto max_rows = static_cast<uint32_t>(libc_rows + room);

  const WalkerMaps maps(max_rows);
  const int rows = maps.rows.get(), procs = maps.procs.get();
  ASSERT_TRUE(maps.rows && maps.procs) << "bpf_map_create: " << strerror(errno) << " (root?)";
  UnwindLoader loader(rows, max_rows, procs,
                      [](const std::string& p) { return build_cfi_table(p); });
  ASSERT_TRUE(loader.load(static_cast<uint32_t>(gone), 1, *gone_maps));
  ASSERT_TRUE(loader.load(next, 1, *next_maps));
  smt_unwind_process p = {};
  ASSERT_EQ(bpf_map_lookup_elem(procs, &next, &p), 0);
  const smt_unwind_mapping* c = mapping_of(p, *next_maps, cat_bin);
  const smt_unwind_mapping* l = mapping_of(p, *next_maps, ld);
  ASSERT_TRUE(c && l);
  EXPECT_EQ(c->nr_rows, cat_rows);
  EXPECT_EQ(l->nr_rows, ld_rows) << "ld.so placed in the exited process's rows";
  EXPECT_TRUE(c->first_row + c->nr_rows <= l->first_row ||
              l->first_row + l->nr_rows <= c->first_row)
      << "cat's rows [" << c->first_row << ", +" << c->nr_rows << ") and ld.so's [" << l->first_row
      << ", +" << l->nr_rows << ") overlap";
  EXPECT_EQ(loader.counts().tables_freed, 1u) << "libc's, not cat's";
  ASSERT_EQ(system(("rm -rf " + root).c_str()), 0);
}

}  // namespace
}  // namespace stackmapd

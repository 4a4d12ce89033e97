// SPDX-License-Identifier: GPL-2.0
// The BPF walker's searches (include/stackmapd/unwind_find.h) over tables
// laid out as the maps hold them, for this very process's mappings: every
// row of libc found at its ip, and libc's pcs are its ELF addresses.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/symbols/user_maps.h"
#include "daemon/sys/error.h"
#include "daemon/unwind/cfi_cache.h"
#include "daemon/unwind/cfi_table.h"

namespace {

struct HostRows {
  std::vector<smt_unwind_row> rows;  // every table one after another, as in the BPF map
};

}  // namespace

static const smt_unwind_row* smt_unwind_row_at(void* rows, __u32 idx) {
  auto& r = static_cast<HostRows*>(rows)->rows;
  return idx < r.size() ? &r[idx] : nullptr;
}

#include "stackmapd/unwind_find.h"

namespace stackmapd {
namespace {

#if defined(__x86_64__)

// This process's executable mappings that have a table, laid out as the maps
// hold them: the rows of each file once, its file entry, the process's entry.
struct Loaded {
  HostRows rows;
  smt_unwind_process proc{};
  std::vector<smt_unwind_file> files;                   // by mapping
  std::vector<std::shared_ptr<const CfiTable>> tables;  // by mapping
};

Loaded load_self() {
  Loaded l;
  CfiCache cache([](const std::string& path) { return build_cfi_table(path); });
  std::map<const CfiTable*, uint32_t> first_rows;  // a file's rows once
  const auto maps = ProcessMaps::read(static_cast<uint32_t>(getpid()));
  EXPECT_TRUE(maps);
  for (const MappedFile& f : maps->files()) {
    std::shared_ptr<const CfiTable> t;
    try {
      t = cache.get(f.open_path);
    } catch (const Error&) {
      continue;  // no CFI: frame pointers there
    }
    const auto pc_off = t->pc_off(f.pgoff);
    if (!pc_off || l.proc.nr == SMT_UNWIND_MAPPINGS_MAX) continue;
    auto [at, added] = first_rows.emplace(t.get(), static_cast<uint32_t>(l.rows.rows.size()));
    if (added) l.rows.rows.insert(l.rows.rows.end(), t->rows.begin(), t->rows.end());
    l.proc.mappings[l.proc.nr++] = {f.start, f.end, f.inode, f.dev,
                                    static_cast<uint32_t>(f.pgoff >> SMT_UNWIND_PAGE_SHIFT)};
    l.files.push_back({*pc_off, at->second, static_cast<uint32_t>(t->rows.size()), 0});
    l.tables.push_back(t);
  }
  return l;
}

// The row the walker finds at ip, in the table of the mapping that holds it.
const smt_unwind_row* row_at(Loaded& l, uint64_t ip) {
  const smt_unwind_mapping* m = smt_unwind_mapping_of(&l.proc, ip);
  if (!m) return nullptr;
  const smt_unwind_file& f = l.files[m - l.proc.mappings];
  __u32 pc = 0;
  return smt_unwind_pc(m, &f, ip, &pc) ? smt_unwind_row_of(&l.rows, &f, pc) : nullptr;
}

TEST(UnwindFind, LibcPcIsItsElfAddress) {
  Loaded l = load_self();
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  const auto ip = reinterpret_cast<uint64_t>(dlsym(libc, "qsort"));
  Dl_info info;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(ip), &info), 0);
  dlclose(libc);
  const smt_unwind_mapping* m = smt_unwind_mapping_of(&l.proc, ip);
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m->ino, 0u) << "libc's inode, as the kernel names it";
  const smt_unwind_file& f = l.files[m - l.proc.mappings];
  __u32 pc = 0;
  ASSERT_TRUE(smt_unwind_pc(m, &f, ip, &pc));
  const uint64_t vaddr = ip - reinterpret_cast<uint64_t>(info.dli_fbase);  // libc's start at 0
  EXPECT_EQ(pc, vaddr - l.tables[m - l.proc.mappings]->base);
  const CfiTable& t = *l.tables[m - l.proc.mappings];
  const smt_unwind_row* want = t.find(vaddr);
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(row_at(l, ip), &l.rows.rows[f.first_row + (want - t.rows.data())]);
}

TEST(UnwindFind, EveryRowOfEveryMappingAtItsIp) {
  Loaded l = load_self();
  ASSERT_GE(l.proc.nr, 2u);  // the test itself, libc, ...
  size_t checked = 0;
  for (uint32_t i = 0; i < l.proc.nr; ++i) {
    const smt_unwind_mapping& m = l.proc.mappings[i];
    const smt_unwind_file& f = l.files[i];
    EXPECT_EQ(smt_unwind_mapping_of(&l.proc, m.start), &m);
    EXPECT_EQ(smt_unwind_mapping_of(&l.proc, m.end - 1), &m);
    if (i + 1 == l.proc.nr || l.proc.mappings[i + 1].start != m.end) {
      EXPECT_EQ(smt_unwind_mapping_of(&l.proc, m.end), nullptr);
    }
    // A row's ip: its pc back to a file offset, then to where m maps it.
    const uint64_t bias = m.start - (uint64_t{m.pgoff} << SMT_UNWIND_PAGE_SHIFT) - f.pc_off;
    for (uint32_t r = 0; r < f.nr_rows; ++r) {
      const uint64_t ip = l.rows.rows[f.first_row + r].pc + bias;
      if (ip <= m.start || ip >= m.end) continue;  // rows of another segment's mapping
      ASSERT_EQ(row_at(l, ip), &l.rows.rows[f.first_row + r]) << i << " " << r;
      if (r > 0) ASSERT_EQ(row_at(l, ip - 1), &l.rows.rows[f.first_row + r - 1]);
      else ASSERT_EQ(row_at(l, ip - 1), nullptr);  // below the first row
      ++checked;
    }
  }
  EXPECT_GT(checked, 20000u);  // libc's alone has 28 k
}

#endif  // __x86_64__

}  // namespace
}  // namespace stackmapd

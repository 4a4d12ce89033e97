// SPDX-License-Identifier: GPL-2.0
// -u's reading of ELF files (daemon/symbols/elf_probes.h) and of its specs
// (daemon/source/uprobe_sources.h), on tests/workloads/uprobe_workload.c as
// built, a copy of it "prelinked" by objcopy, and this machine's libc.
#include "daemon/symbols/elf_probes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "daemon/source/uprobe_sources.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

const std::string kWorkload = std::string(WORKLOAD_DIR) + "/uprobe_workload";

const ElfFunction* function(const ElfProbes& p, const std::string& name) {
  auto it = std::find_if(p.functions.begin(), p.functions.end(),
                         [&](const ElfFunction& f) { return f.name == name; });
  return it == p.functions.end() ? nullptr : &*it;
}

std::string error_of(const std::vector<std::string>& specs) {
  try {
    resolve_uprobes(specs, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ElfProbes, ReadsTheWorkloadsFunctionsAndItsUsdtProbe) {
  const ElfProbes p = read_elf_probes(kWorkload);
  const ElfFunction* target = function(p, "uprobe_target");
  ASSERT_NE(target, nullptr);
  EXPECT_GT(target->offset, 0u);
  EXPECT_GT(target->size, 0u);
  EXPECT_NE(function(p, "main"), nullptr);
  ASSERT_EQ(p.usdt.size(), 1u);
  EXPECT_EQ(p.usdt[0].provider, "stackmapd_test");
  EXPECT_EQ(p.usdt[0].name, "tick");
  EXPECT_FALSE(p.usdt[0].args.empty());  // STAP_PROBE1: one argument
  EXPECT_GT(p.usdt[0].offset, 0u);
  EXPECT_GT(p.usdt[0].semaphore_offset, 0u);
}

// prelink moves .stapsdt.base but leaves the notes: the difference applies to
// the probe's pc and its semaphore. objcopy moves the section alone, so the
// same notes now read 0x10 further on.
TEST(ElfProbes, AppliesTheStapsdtBaseSlideToPcAndSemaphore) {
  char dir[] = "/tmp/elf_probes_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string moved = std::string(dir) + "/prelinked";
  const std::string cmd = "objcopy --change-section-address .stapsdt.base+0x10 " + kWorkload + " " +
                          moved + " 2> /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const ElfProbes before = read_elf_probes(kWorkload);
  const ElfProbes after = read_elf_probes(moved);
  unlink(moved.c_str());
  rmdir(dir);
  ASSERT_EQ(before.usdt.size(), 1u);
  ASSERT_EQ(after.usdt.size(), 1u);
  EXPECT_EQ(after.usdt[0].offset, before.usdt[0].offset + 0x10);
  EXPECT_EQ(after.usdt[0].semaphore_offset, before.usdt[0].semaphore_offset + 0x10);
}

TEST(ElfProbes, KeepsIndirectFunctionsApart) {
  // This process's own libc, as its maps name it.
  std::string libc;
  const std::optional<ProcessMaps> maps = ProcessMaps::read(getpid());
  ASSERT_TRUE(maps);
  for (const MappedFile& f : maps->files())
    if (f.path.find("/libc.so") != std::string::npos) libc = f.path;
  ASSERT_FALSE(libc.empty());
  const ElfProbes p = read_elf_probes(libc);
  EXPECT_TRUE(std::binary_search(p.ifuncs.begin(), p.ifuncs.end(), "strlen"));
  EXPECT_EQ(function(p, "strlen"), nullptr);
  EXPECT_NE(function(p, "malloc"), nullptr);
  EXPECT_EQ(elf_soname(libc), "libc.so.6");
}

TEST(ElfProbes, RefusesWhatIsNoElfFile) {
  EXPECT_THROW(read_elf_probes(std::string(STACKMAPD_SOURCE_DIR) + "/README.md"), Error);
  EXPECT_THROW(read_elf_probes("/nonexistent"), Error);
}

TEST(UprobeSources, ResolvesAFunctionAGlobAndAUsdtProbeOncePerSite) {
  const ElfProbes p = read_elf_probes(kWorkload);
  const auto targets =
      resolve_uprobes({kWorkload + ":uprobe_call_?", kWorkload + ":uprobe_call_a",
                       kWorkload + ":uprobe_target+1", kWorkload + ":usdt:stackmapd_*:tick"},
                      {});
  ASSERT_EQ(targets.size(), 4u);
  EXPECT_EQ(targets[0].source, kWorkload + ":uprobe_call_a");
  EXPECT_EQ(targets[0].offset, function(p, "uprobe_call_a")->offset);
  EXPECT_EQ(targets[1].source, kWorkload + ":uprobe_call_b");
  EXPECT_EQ(targets[2].source, kWorkload + ":uprobe_target+0x1");
  EXPECT_EQ(targets[2].offset, function(p, "uprobe_target")->offset + 1);
  EXPECT_EQ(targets[3].source, kWorkload + ":usdt:stackmapd_test:tick");
  EXPECT_EQ(targets[3].ref_ctr_offset, p.usdt[0].semaphore_offset);
}

// Without --pid a library is found as the dynamic linker would: this
// machine's libc, not another architecture's that multiarch installed.
TEST(UprobeSources, FindsALibraryByNameInTheLinkersDirectories) {
  const auto targets = resolve_uprobes({"libc:getppid"}, {});
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_NE(targets[0].binary.find("/libc.so"), std::string::npos) << targets[0].binary;
  EXPECT_EQ(elf_soname(targets[0].binary), "libc.so.6");
  EXPECT_NE(function(read_elf_probes(targets[0].binary), "getppid"), nullptr);
  std::string ours;
  const std::optional<ProcessMaps> maps = ProcessMaps::read(getpid());
  ASSERT_TRUE(maps);
  for (const MappedFile& f : maps->files())
    if (f.path.find("/libc.so") != std::string::npos) ours = f.path;
  char* a = realpath(ours.c_str(), nullptr);
  char* b = realpath(targets[0].binary.c_str(), nullptr);
  ASSERT_TRUE(a && b);
  EXPECT_STREQ(a, b);  // the one this process runs on
  free(a);
  free(b);
}

TEST(UprobeSources, SaysWhatIsWrongInOneLine) {
  EXPECT_NE(error_of({kWorkload}).find("use BINARY:SYMBOL[+OFFSET]"), std::string::npos);
  EXPECT_NE(error_of({":main"}).find("use BINARY:SYMBOL"), std::string::npos);
  EXPECT_NE(error_of({kWorkload + ":usdt:a"}).find("a USDT probe is PROVIDER:NAME"),
            std::string::npos);
  EXPECT_NE(error_of({kWorkload + ":uprobe_*+4"}).find("not a glob"), std::string::npos);
  EXPECT_NE(error_of({kWorkload + ":nope"}).find("has no function nope"), std::string::npos);
  EXPECT_NE(error_of({kWorkload + ":nope*"}).find("has no function matching 'nope*'"),
            std::string::npos);
  EXPECT_NE(
      error_of({kWorkload + ":usdt:x:y"}).find("its probes (PROVIDER:NAME): stackmapd_test:tick"),
      std::string::npos);
  EXPECT_NE(error_of({"/nonexistent/x:main"}).find("no such binary"), std::string::npos);
  for (const std::string& e : {error_of({kWorkload}), error_of({kWorkload + ":nope"}),
                               error_of({kWorkload + ":usdt:x:y"})})
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace
}  // namespace stackmapd

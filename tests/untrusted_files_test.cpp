// SPDX-License-Identifier: GPL-2.0
// Files a traced user controls, read by the root daemon (daemon/sys/
// untrusted_file.h): a FIFO, a symbolic link, a 1 GiB sparse file, a 10 MB
// line, a file owned by someone else, a binary replaced at its path. Each is
// refused or bounded at once and said in one line; nothing waits on it. The
// files belong to nobody (uid 65534), as an unprivileged user's would.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include "daemon/export/user_binaries.h"
#include "daemon/model/user_stack.h"
#include "daemon/symbols/perf_map.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/sys/file_io.h"
#include "daemon/sys/untrusted_file.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
constexpr uid_t kNobody = 65534;
constexpr uint32_t kPid = 4242;

// Runs `fn` on a thread and fails, instead of hanging the suite, when it does
// not return within 5 s (a blocking open of a FIFO never would).
template <typename Fn>
auto within_seconds(Fn fn) {
  auto result = std::async(std::launch::async, fn);
  if (result.wait_for(5s) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on the file: still waiting after 5 s";
    std::quick_exit(1);  // the blocked thread cannot be joined
  }
  return result.get();
}

class UntrustedFilesRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "chowns files to nobody: run as root";
    dir_ = fs::temp_directory_path() / ("stackmapd-untrusted-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    // A fake /proc for PerfMap::read: PID/status and PID/root/tmp.
    proc_ = dir_ / "proc";
    tmp_ = proc_ / std::to_string(kPid) / "root" / "tmp";
    fs::create_directories(tmp_);
    std::ofstream(proc_ / std::to_string(kPid) / "status")
        << "Name:\tjit\nUid:\t" << kNobody << "\t" << kNobody << "\t" << kNobody << "\t" << kNobody
        << "\nNSpid:\t" << kPid << "\n";
    map_ = tmp_ / ("perf-" + std::to_string(kPid) + ".map");
    // A root-only secret, in perf map form, that a link must never reveal.
    secret_ = dir_ / "root-only" / "secret";
    fs::create_directories(secret_.parent_path());
    fs::permissions(secret_.parent_path(), fs::perms::owner_all);
    std::ofstream(secret_) << "1000 100 root_only_secret\n";
    fs::permissions(secret_, fs::perms::owner_read | fs::perms::owner_write);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void give_to_nobody(const fs::path& p) { ASSERT_EQ(lchown(p.c_str(), kNobody, kNobody), 0) << p; }
  std::optional<PerfMap> read_map(std::string* refused) {
    return within_seconds([&] { return PerfMap::read(kPid, proc_.string(), refused); });
  }

  fs::path dir_, proc_, tmp_, map_, secret_;
};

TEST_F(UntrustedFilesRoot, OpenRegularSaysWhatIsThereInstead) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  std::string why;
  EXPECT_FALSE(within_seconds([&] { return open_regular(fifo, Links::refused, &why); }));
  EXPECT_EQ(why, "a FIFO, not a regular file");
  EXPECT_FALSE(open_regular("/dev/zero", Links::kernel, &why));
  EXPECT_EQ(why, "a character device, not a regular file");
  const fs::path link = dir_ / "link";
  fs::create_symlink(secret_, link);
  EXPECT_FALSE(open_regular(link, Links::refused, &why));
  EXPECT_EQ(why, "a symbolic link (not followed)");
  std::optional<OpenedFile> f = open_regular(secret_, Links::refused, &why);
  ASSERT_TRUE(f);
  EXPECT_FALSE(open_regular(secret_, Links::refused, &why, FileIdentity{f->identity().dev, 1}));
  EXPECT_EQ(why, "another file than the one mapped (replaced since)");
  EXPECT_TRUE(open_regular(secret_, Links::refused, &why, f->identity()));
}

TEST_F(UntrustedFilesRoot, PerfMapOfTheProcesssUserIsRead) {
  std::ofstream(map_) << "1000 10 jit_fn\n";
  give_to_nobody(map_);
  std::string refused;
  std::optional<PerfMap> m = read_map(&refused);
  ASSERT_TRUE(m) << refused;
  EXPECT_EQ(m->find(0x1004), "jit_fn+0x4");
  ASSERT_EQ(chown(map_.c_str(), 0, 0), 0);
  EXPECT_TRUE(read_map(&refused)) << "root's map is read too: " << refused;
}

TEST_F(UntrustedFilesRoot, PerfMapOfAnotherUserIsRefused) {
  std::ofstream(map_) << "1000 10 planted\n";
  ASSERT_EQ(chown(map_.c_str(), 1234, 1234), 0);
  std::string refused;
  EXPECT_FALSE(read_map(&refused));
  EXPECT_NE(refused.find("owned by uid 1234, neither the process's user nor root"),
            std::string::npos)
      << refused;
}

TEST_F(UntrustedFilesRoot, PerfMapFifoIsRefusedWithoutWaiting) {
  ASSERT_EQ(mkfifo(map_.c_str(), 0666), 0);
  give_to_nobody(map_);
  std::string refused;
  EXPECT_FALSE(read_map(&refused));
  EXPECT_NE(refused.find("a FIFO, not a regular file"), std::string::npos) << refused;
}

TEST_F(UntrustedFilesRoot, PerfMapSymlinkToARootOnlyFileIsNotFollowed) {
  fs::create_symlink(secret_, map_);
  give_to_nobody(map_);
  std::string refused;
  EXPECT_FALSE(read_map(&refused)) << "a root-only file's lines became JIT names";
  EXPECT_NE(refused.find("symbolic link"), std::string::npos) << refused;
  // A link on the way (the process's own /tmp, in its own mount namespace)
  // is not followed either.
  fs::remove(map_);
  fs::remove(tmp_);
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::copy_file(secret_, elsewhere / map_.filename());  // root-owned: only a link leads there
  fs::create_symlink(elsewhere, tmp_);
  refused.clear();
  EXPECT_FALSE(read_map(&refused)) << "followed a link to the map's directory";
  EXPECT_FALSE(refused.empty());
}

// Kernels before 5.6 (Android's 4.19 and 5.4) and qemu-user have no
// openat2: the map is then opened a component at a time, and a link on the
// way is still refused. Tried in a child whose openat2 answers ENOSYS.
TEST_F(UntrustedFilesRoot, WithoutOpenat2NoLinkIsFollowedEither) {
  std::ofstream(map_) << "1000 10 jit_fn\n";
  give_to_nobody(map_);
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::copy_file(secret_, elsewhere / map_.filename());  // root-owned: only a link leads there
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{4, filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
      _exit(3);
    std::string refused;
    std::optional<PerfMap> m = PerfMap::read(kPid, proc_.string(), &refused);
    if (!m || m->find(0x1004) != "jit_fn+0x4") _exit(4);  // the map itself is read
    fs::rename(tmp_, dir_ / "tmp.real");
    fs::create_symlink(elsewhere, tmp_);  // the process's tmp now a link to a root-only map
    if (PerfMap::read(kPid, proc_.string(), &refused) || refused.empty()) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "3: seccomp, 4: the map not read, 5: a link followed (status " << status << ")";
}

TEST_F(UntrustedFilesRoot, HugeSparsePerfMapIsRefusedBySize) {
  { std::ofstream(map_) << "1000 10 first\n"; }
  fs::resize_file(map_, 1ull << 30);  // 1 GiB, sparse
  give_to_nobody(map_);
  std::string refused;
  EXPECT_FALSE(read_map(&refused));
  EXPECT_NE(refused.find("1024 MiB, over the 64 MiB"), std::string::npos) << refused;
}

TEST_F(UntrustedFilesRoot, LongPerfMapLinesAreCut) {
  {
    std::ofstream out(map_);
    out << "1000 10 " << std::string(10 << 20, 'n') << "\n2000 10 after\n";
  }
  give_to_nobody(map_);
  std::string refused;
  std::optional<PerfMap> m = read_map(&refused);
  ASSERT_TRUE(m) << refused;
  ASSERT_TRUE(m->find(0x1000));
  EXPECT_EQ(m->find(0x1000)->size(), PerfMap::kMaxName + 4) << "name cut at 1 KiB, then +0x0";
  EXPECT_EQ(m->find(0x2001), "after+0x1") << "the line after a long one is read";
  EXPECT_LT(m->bytes(), 4096u);
}

// The export copies a traced binary only once its path holds it no more,
// and only from where a process maps it (here a second link to its inode,
// as /proc/PID/map_files is). Whatever a user puts at the path is never
// taken for it: a FIFO (the binary moved away) is refused at once, and so
// are another file with the same build id and a link to the binary; with
// no process mapping it, nothing is copied.
TEST_F(UntrustedFilesRoot, SavedBinaryMustBeTheFileMapped) {
  const fs::path bin = dir_ / "q4";
  fs::copy_file(fs::read_symlink("/proc/self/exe"), bin);  // qemu-user: the test, not qemu
  give_to_nobody(bin);
  FileIdentity mapped;
  const std::string id = elf_build_id(bin.string(), &mapped);
  ASSERT_FALSE(id.empty());
  UserStackSet set;
  set.enabled = true;
  set.binaries.push_back({bin.string(), id, mapped});  // its processes gone
  const fs::path out = dir_ / "out";
  prepare_output_dir(out);

  fs::rename(bin, dir_ / "q4.moved");
  ASSERT_EQ(mkfifo(bin.c_str(), 0666), 0);
  within_seconds([&] {
    save_user_binaries(out, set, kNoGroup, 1ull << 30);
    return 0;
  });
  EXPECT_FALSE(fs::exists(out / "binaries" / id)) << "a FIFO was copied";

  fs::remove(bin);
  fs::copy_file(dir_ / "q4.moved", bin);  // same bytes and build id, another inode
  save_user_binaries(out, set, kNoGroup, 1ull << 30);
  EXPECT_FALSE(fs::exists(out / "binaries" / id)) << "another inode with the same build id";

  fs::remove(bin);
  fs::create_symlink(dir_ / "q4.moved", bin);
  save_user_binaries(out, set, kNoGroup, 1ull << 30);
  EXPECT_FALSE(fs::exists(out / "binaries" / id)) << "a link was followed";

  fs::remove(bin);
  fs::rename(dir_ / "q4.moved", bin);
  save_user_binaries(out, set, kNoGroup, 1ull << 30);
  EXPECT_FALSE(fs::exists(out / "binaries" / id)) << "the binary mapped, at its path, was copied";

  // A process maps it still: once a FIFO replaced it at its path, the
  // mapped file is copied, and only that inode.
  fs::copy_file(bin, dir_ / "q4.other");
  set.binaries[0].open_path = (dir_ / "q4.other").string();
  fs::rename(bin, dir_ / "q4.mapped");
  ASSERT_EQ(mkfifo(bin.c_str(), 0666), 0);
  save_user_binaries(out, set, kNoGroup, 1ull << 30);
  EXPECT_FALSE(fs::exists(out / "binaries" / id)) << "copied from another inode than the mapped";
  set.binaries[0].open_path = (dir_ / "q4.mapped").string();
  within_seconds([&] {
    save_user_binaries(out, set, kNoGroup, 1ull << 30);
    return 0;
  });
  EXPECT_TRUE(fs::exists(out / "binaries" / id)) << "the mapped file, replaced at its path";
  EXPECT_EQ(fs::file_size(out / "binaries" / id), fs::file_size(dir_ / "q4.mapped"));
}

}  // namespace
}  // namespace stackmapd

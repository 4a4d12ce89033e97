// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/kallsyms.h"

#include <gtest/gtest.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Kallsyms load_fixture() { return Kallsyms::load(STACKMAPD_FIXTURES_DIR "/kallsyms.txt"); }

// The message of the Error that parse() throws, or "" if it does not throw.
std::string parse_error(std::string_view text) {
  try {
    Kallsyms::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KallsymsTest, KeepsOnlyTextSymbolsWithoutAliases) {
  // 38 t/T/w/W lines minus the aliases _stext and __pfx_set_reset_devices; A, R, D, B, d dropped.
  EXPECT_EQ(load_fixture().size(), 36u);
}

TEST(KallsymsTest, FormatsExactStartAsOffsetZero) {
  EXPECT_EQ(load_fixture().format(0xffffffff821f94a0), "schedule+0x0/0xc0");
}

TEST(KallsymsTest, FormatsMidSymbolLikePercentPS) {
  const Kallsyms kallsyms = load_fixture();
  EXPECT_EQ(kallsyms.format(0xffffffff821f94e8), "schedule+0x48/0xc0");
  EXPECT_EQ(kallsyms.format(0xffffffff8135cb00), "kmem_cache_alloc_noprof+0x230/0x2f0");
  // Listed before schedule in the file: the order of lines does not matter.
  EXPECT_EQ(kallsyms.format(0xffffffff821fd10c), "schedule_timeout+0x1c/0x100");
  EXPECT_EQ(kallsyms.format(0xffffffff810b8d54), "arch_cpu_idle_dead+0x4/0x10");
  EXPECT_EQ(kallsyms.format(0xffffffff810b8d64), "__pfx_arch_post_acpi_subsys_init+0x4/0x10");
}

TEST(KallsymsTest, FormatsModuleSymbolWithModuleName) {
  const Kallsyms kallsyms = load_fixture();
  EXPECT_EQ(kallsyms.format(0xffffffffc0a0215c), "ext4_claim_free_clusters+0x1c/0x40 [ext4]");
  // The module after a space instead of a tab.
  EXPECT_EQ(kallsyms.format(0xffffffffc0a3f010), "crc32c_intel_le_hw+0x10/0x1a0 [crc32c_intel]");

  const std::optional<Kallsyms::Match> match = kallsyms.lookup(0xffffffffc0a0215c);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->name, "ext4_claim_free_clusters");
  EXPECT_EQ(match->module, "ext4");
  EXPECT_EQ(match->offset, 0x1cu);
  EXPECT_EQ(match->size, 0x40u);
}

TEST(KallsymsTest, AliasKeepsTheFirstNameInTheFile) {
  const Kallsyms kallsyms = load_fixture();
  EXPECT_EQ(kallsyms.format(0xffffffff81000000), "_text+0x0/0x40");
  EXPECT_EQ(kallsyms.format(0xffffffff83783000), "_sinittext+0x0/0x10");
}

TEST(KallsymsTest, AddressBelowFirstSymbolIsUnresolved) {
  const Kallsyms kallsyms = load_fixture();
  EXPECT_EQ(kallsyms.format(0xffffffff80ffffff), "0xffffffff80ffffff");
  EXPECT_EQ(kallsyms.format(0), "0x0");
  EXPECT_FALSE(kallsyms.lookup(0xffffffff80ffffff).has_value());
}

TEST(KallsymsTest, AddressPastGapGuardIsUnresolved) {
  const Kallsyms kallsyms = load_fixture();
  EXPECT_EQ(kallsyms.format(0xffffffff8220996c), "__x86_return_thunk+0x2c/0x48");
  // _etext is followed by _sinittext 21 MiB later: past _etext is no function of ours.
  EXPECT_EQ(kallsyms.format(0xffffffff82209998), "0xffffffff82209998");
  // A data symbol is not kept, so its address stays unresolved too.
  EXPECT_EQ(kallsyms.format(0xffffffff82a0f940), "0xffffffff82a0f940");
}

TEST(KallsymsTest, LastSymbolOfAModuleIsUnresolved) {
  const Kallsyms kallsyms = load_fixture();
  // ext4_exit_fs is followed by crc32c_intel's first symbol, closer than the gap guard.
  EXPECT_EQ(kallsyms.format(0xffffffffc0a30d44), "0xffffffffc0a30d44");
  // The last symbol overall has no end at all.
  EXPECT_EQ(kallsyms.format(0xffffffffc0a3f2c0), "0xffffffffc0a3f2c0");
}

TEST(KallsymsTest, MalformedLineErrorNamesTheLineNumber) {
  const std::string good = "ffffffff81000000 T _text\nffffffff81000040 T startup_64\n";
  const char* malformed[] = {
      "ffffffff81000080 T",                   // no name
      "xyz T foo",                            // address not hex
      "ffffffff81000080T foo",                // no space after the address
      "1ffffffff81000080 T foo",              // address wider than 64 bits
      "ffffffff81000080 T foo [ext4",         // module not closed
      "ffffffff81000080 T foo [ext4] junk",   // text after the module
      "ffffffff81000080 T foo [ext4] [bpf]",  // two modules
      "",                                     // empty line
  };
  for (const char* line : malformed) {
    const std::string message = parse_error(good + line + "\nffffffff81000100 T bar\n");
    EXPECT_NE(message.find("kallsyms line 3 is malformed"), std::string::npos)
        << "line \"" << line << "\" gave \"" << message << "\"";
  }
}

TEST(KallsymsTest, LoadNamesThePathInErrors) {
  const std::string missing = STACKMAPD_FIXTURES_DIR "/no_such_kallsyms.txt";
  try {
    Kallsyms::load(missing);
    FAIL() << "load of a missing file did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read " + missing +
                  ": No such file or directory: check the path (/proc/kallsyms needs a kernel "
                  "built with CONFIG_KALLSYMS)");
  }
}

TEST(KallsymsTest, NoTextSymbolsIsAnError) {
  EXPECT_NE(parse_error("ffffffff82a0f940 D init_task\n").find("has no text symbols"),
            std::string::npos);
}

TEST(KallsymsTest, AllZeroAddressesAreHidden) {
  const Kallsyms hidden = Kallsyms::parse(
      "0000000000000000 T _text\n"
      "0000000000000000 T schedule\n"
      "0000000000000000 D init_task\n"
      "0000000000000000 t ext4_has_free_clusters\t[ext4]\n");
  EXPECT_TRUE(hidden.addresses_hidden());
  EXPECT_EQ(hidden.format(0xffffffff821f94a0), "0xffffffff821f94a0");
  EXPECT_FALSE(load_fixture().addresses_hidden());
}

// load() reads in 64 KiB chunks: lines cut by a chunk's end, a last line
// without its newline and a line longer than a chunk read as parse() reads
// the whole text.
TEST(KallsymsTest, LoadInChunksReadsAsParseOfTheWholeText) {
  std::string text = "ffffffff81000000 T _text\n";
  for (int i = 0; i < 20000; ++i) {
    char addr[17];
    *std::to_chars(addr, addr + 16, 0xffffffff81001000ull + 64ull * i, 16).ptr = 0;
    text += std::string(addr) + (i % 3 ? " t " : " T ") + "fn_" + std::string(i % 37, 'x') +
            std::to_string(i) + (i >= 15000 ? "\t[mod" + std::to_string(i / 1000) + "]" : "") +
            "\n";
  }
  text += "ffffffffc0000000 t last_without_newline\t[mod99]";
  const std::string path = ::testing::TempDir() + "kallsyms_chunks.txt";
  std::ofstream(path) << text;
  const Kallsyms loaded = Kallsyms::load(path);
  const Kallsyms parsed = Kallsyms::parse(text);
  ASSERT_EQ(loaded.size(), parsed.size());
  ASSERT_EQ(loaded.size(), 20002u);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t ip = 0xffffffff81001000ull + 64ull * i + 5;
    ASSERT_EQ(loaded.format(ip), parsed.format(ip)) << i;
  }
  EXPECT_EQ(loaded.text_address(), 0xffffffff81000000ull);

  // A line longer than a chunk is read whole, then refused with its number.
  std::ofstream(path) << text.substr(0, text.rfind('\n') + 1) << "ffffffffc0000000 t "
                      << std::string(70000, 'y') << "\n";
  try {
    Kallsyms::load(path);
    FAIL() << "a 70000-character name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + " line 20002 is malformed"), std::string::npos)
        << e.what();
  }
}

// Tests run as root: the real kernel's addresses are visible, and schedule exists in every kernel.
TEST(KallsymsTest, FormatsScheduleFromRealProcKallsyms) {
  const Kallsyms kallsyms = Kallsyms::load();
  ASSERT_FALSE(kallsyms.addresses_hidden()) << "run the tests as root";

  const std::string text = read_file("/proc/kallsyms");
  const size_t end = text.find(" T schedule\n");
  ASSERT_NE(end, std::string::npos);
  const size_t begin = text.rfind('\n', end) + 1;  // npos + 1 == 0 for the first line
  uint64_t addr = 0;
  const auto result = std::from_chars(text.data() + begin, text.data() + end, addr, 16);
  ASSERT_EQ(result.ptr, text.data() + end);

  const std::string formatted = kallsyms.format(addr);
  EXPECT_EQ(formatted.rfind("schedule+0x0/0x", 0), 0u) << formatted;
  EXPECT_EQ(kallsyms.format(addr + 4).rfind("schedule+0x4/0x", 0), 0u);
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// `stackmapd decode` as the library runs it: an FSMB file or a stack_map.json
// export to text, JSON or flame graphs, symbolized offline from a saved
// kallsyms moved by the KASLR slide that stack_map.kernel recorded.
#include "daemon/export/decode.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "daemon/export/exports.h"
#include "daemon/model/fsmb.h"
#include "daemon/symbols/kernel_probe.h"
#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

constexpr const char* kKallsyms = STACKMAPD_FIXTURES_DIR "/kallsyms.txt";
constexpr uint64_t kText = 0xffffffff81000000;  // _text in the fixture
constexpr uint64_t kSlide = 0x2a00000;          // this "device boot"'s KASLR slide

class Decode : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/decode_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    spdlog::set_level(spdlog::level::off);  // the slide's log lines are not under test
  }
  void TearDown() override {
    fs::remove_all(dir_);
    spdlog::set_level(spdlog::level::info);
  }

  // schedule+0x48 and kmem_cache_alloc_noprof+0x230 as recorded on a boot
  // whose kernel sat `slide` above the fixture's addresses.
  std::string write_bin(uint64_t slide = 0) {
    std::vector<StackRecord> stacks = {
        {5, 3, {0xffffffff821f94e8 + slide}},
        {9, 40, {0xffffffff8135cb00 + slide, 0xffffffff821f94e8 + slide}},
    };
    write(dir_ + "/stack_map_bin", fsmb_encode(stacks));
    return dir_ + "/stack_map_bin";
  }
  void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::string decode_to_string(const DecodeOptions& o) {
    std::ostringstream out;
    decode(o, out);
    return out.str();
  }
  std::string error_of(const DecodeOptions& o) {
    try {
      decode_to_string(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::string dir_;
};

TEST_F(Decode, PrintsRawFramesWithoutSymbols) {
  DecodeOptions o;
  o.file = write_bin();
  EXPECT_EQ(decode_to_string(o),
            "stack_id 5 [ref 3, depth 1]\n  [0] 0xffffffff821f94e8\n\n"
            "stack_id 9 [ref 40, depth 2]\n  [0] 0xffffffff8135cb00\n  [1] 0xffffffff821f94e8\n\n");
}

TEST_F(Decode, TopKeepsTheMostFrequentAsJson) {
  DecodeOptions o;
  o.file = write_bin();
  o.top = 1;
  o.json = true;
  o.symbols.kallsyms = kKallsyms;
  const std::string out = decode_to_string(o);
  EXPECT_NE(out.find("\"stack_id\": 9"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"stack_id\": 5"), std::string::npos) << out;
  EXPECT_NE(out.find("kmem_cache_alloc_noprof+0x230/0x2f0"), std::string::npos) << out;
}

TEST_F(Decode, TopZeroIsAllInFileOrderAsTheRfcReader) {
  DecodeOptions o;
  o.file = write_bin();
  const std::string all = decode_to_string(o);
  o.top = 0;
  EXPECT_EQ(decode_to_string(o), all);
  o.top = 2;  // sorted by ref_count: 9 (40) before 5 (3)
  EXPECT_EQ(decode_to_string(o).rfind("stack_id 9 [ref 40", 0), 0u);
}

TEST_F(Decode, RfcMagicVersion1Decodes) {
  std::string bytes = fsmb_encode({{5, 3, {0xffffffff821f94e8}}});
  bytes[4] = 1;  // version 1 under the RFC's magic
  DecodeOptions o;
  o.file = dir_ + "/v1.bin";
  write(o.file, bytes);
  EXPECT_EQ(decode_to_string(o), "stack_id 5 [ref 3, depth 1]\n  [0] 0xffffffff821f94e8\n\n");
}

// A damaged file: every complete record is written, then the one line is thrown.
TEST_F(Decode, TruncatedFileWritesItsCompleteRecordsThenFails) {
  const std::string whole = fsmb_encode({{5, 3, {0xffffffff821f94e8}}, {9, 40, {0x1, 0x2}}});
  DecodeOptions o;
  o.file = dir_ + "/cut.bin";
  write(o.file, whole.substr(0, whole.size() - 3));
  for (bool json : {false, true}) {
    o.json = json;
    std::ostringstream out;
    try {
      decode(o, out);
      ADD_FAILURE() << "a truncated file decoded without error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(o.file + ": truncated FSMB v2", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("record 2 of 2"), std::string::npos) << e.what();
    }
    if (json) {
      const nlohmann::json doc = nlohmann::json::parse(out.str());
      ASSERT_EQ(doc.size(), 1u) << out.str();
      EXPECT_EQ(doc[0]["stack_id"], 5);
    } else {
      EXPECT_EQ(out.str(), "stack_id 5 [ref 3, depth 1]\n  [0] 0xffffffff821f94e8\n\n");
    }
  }
}

TEST_F(Decode, OverLongFileWritesEveryRecordThenFails) {
  DecodeOptions o;
  o.file = write_bin();
  const std::string all = decode_to_string(o);
  std::ofstream(o.file, std::ios::binary | std::ios::app) << "xx";
  std::ostringstream out;
  try {
    decode(o, out);
    ADD_FAILURE() << "an over-long file decoded without error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 trailing bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out.str(), all);
}

TEST_F(Decode, KallsymsOfTheSameBootNeedsNoKernelInfo) {
  DecodeOptions o;
  o.file = write_bin();
  o.symbols.kallsyms = kKallsyms;
  EXPECT_EQ(decode_to_string(o).rfind("stack_id 5 [ref 3, depth 1]\n  [0] schedule+0x48/0xc0\n", 0),
            0u);
}

TEST_F(Decode, StackMapKernelBesideTheFileGivesTheSlide) {
  DecodeOptions o;
  o.file = write_bin(kSlide);
  o.symbols.kallsyms = kKallsyms;
  write(dir_ + "/stack_map.kernel", "release r\nbuild_id -\ntext 0x" +
                                        (std::ostringstream() << std::hex << kText + kSlide).str() +
                                        "\n");
  o.folded = "-";
  // Root first (schedule called kmem_cache_alloc_noprof), function names only.
  EXPECT_EQ(decode_to_string(o), "schedule 3\nschedule;kmem_cache_alloc_noprof 40\n");
}

TEST_F(Decode, KernelInfoOptionWinsOverTheOneBeside) {
  DecodeOptions o;
  o.file = write_bin(kSlide);
  o.symbols.kallsyms = kKallsyms;
  write(dir_ + "/stack_map.kernel", "text 0x0\n");  // would mean: not recorded, no slide
  o.symbols.kernel_info = dir_ + "/other.kernel";
  write(o.symbols.kernel_info, "text 0xffffffff83a00000\n");
  EXPECT_NE(decode_to_string(o).find("[0] schedule+0x48/0xc0\n"), std::string::npos);
}

TEST_F(Decode, UnrecordedTextMeansNoSlide) {
  DecodeOptions o;
  o.file = write_bin();
  o.symbols.kallsyms = kKallsyms;
  write(dir_ + "/stack_map.kernel", "release r\nbuild_id -\ntext 0x0\n");
  EXPECT_NE(decode_to_string(o).find("[0] schedule+0x48/0xc0\n"), std::string::npos);
}

// A file recorded on this very boot (its stack_map.kernel has the running
// kernel's build id and _text) is symbolized from /proc/kallsyms; one from
// another boot or kernel stays raw. Runs on the real kernel, as root.
TEST_F(Decode, SameBootAsTheRunningKernelSymbolizesFromIt) {
  const Kallsyms host = Kallsyms::load();
  const std::string build_id = running_kernel_build_id();
  if (host.addresses_hidden() || build_id.empty() || !host.text_address())
    GTEST_SKIP() << "needs root and a kernel with a build id";
  const auto schedule = host.ranges_of([](std::string_view n) { return n == "schedule"; });
  ASSERT_FALSE(schedule.empty());
  const uint64_t ip = schedule[0].start + 0x10;
  write(dir_ + "/stack_map_bin", fsmb_encode({{5, 3, {ip}}}));
  DecodeOptions o;
  o.file = dir_ + "/stack_map_bin";
  const auto kernel_file = [&](const std::string& id, uint64_t text) {
    write(dir_ + "/stack_map.kernel", "release r\nbuild_id " + id + "\ntext 0x" +
                                          (std::ostringstream() << std::hex << text).str() + "\n");
  };
  kernel_file(build_id, host.text_address());
  EXPECT_NE(decode_to_string(o).find("[0] schedule+0x10/"), std::string::npos);
  const std::string raw = "[0] " + (std::ostringstream() << "0x" << std::hex << ip).str() + "\n";
  kernel_file(build_id, host.text_address() + 0x200000);  // another boot: another slide
  EXPECT_NE(decode_to_string(o).find(raw), std::string::npos);
  kernel_file(std::string(build_id.size(), '0'), host.text_address());  // another kernel
  EXPECT_NE(decode_to_string(o).find(raw), std::string::npos);
  fs::remove(dir_ + "/stack_map.kernel");  // nothing says which boot
  EXPECT_NE(decode_to_string(o).find(raw), std::string::npos);
}

TEST_F(Decode, SlideDropsModuleSymbols) {
  Kallsyms k = Kallsyms::load(kKallsyms);
  KernelInfo info;
  info.text_address = kText + kSlide;
  Kallsyms slid = apply_kaslr_slide(std::move(k), info, "info", "table");
  EXPECT_EQ(slid.format(0xffffffff821f94e8 + kSlide), "schedule+0x48/0xc0");
  EXPECT_EQ(slid.format(0xffffffffc0a0215c), "0xffffffffc0a0215c");  // ext4 moved on its own
}

TEST_F(Decode, JsonExportGivesFlameGraphsAndPprofOnly) {
  DecodeOptions o;
  o.file = dir_ + "/stack_map.json";
  write(o.file, R"({"stacks": [{"ref_count": 7, "symbols": ["leaf+0x1/0x2", "root+0x3/0x4"]}]})");
  EXPECT_EQ(error_of(o), o.file +
                             " is a JSON export: decode reads it for --folded, --svg, --pprof and "
                             "--otlp only; for text, decode its stack_map_bin");
  o.folded = dir_ + "/out.folded";
  o.svg = dir_ + "/out.svg";
  EXPECT_EQ(decode_to_string(o), "");
  std::ifstream folded(o.folded);
  std::string line;
  std::getline(folded, line);
  EXPECT_EQ(line, "root;leaf 7");
  EXPECT_GT(fs::file_size(o.svg), 100u);
  EXPECT_EQ(fs::status(o.svg).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST_F(Decode, BadCombinationsAreOneLineErrors) {
  DecodeOptions o;
  o.file = write_bin();
  o.symbols.kernel_info = dir_ + "/k";
  EXPECT_EQ(error_of(o), "--kernel-info needs --kallsyms or --vmlinux to symbolize with");
  o.symbols.kallsyms = kKallsyms;
  o.symbols.vmlinux = kKallsyms;
  EXPECT_EQ(error_of(o), "give --kallsyms or --vmlinux, not both");
  o.symbols.vmlinux.clear();
  EXPECT_EQ(error_of(o).rfind("cannot read " + dir_ + "/k: ", 0), 0u) << error_of(o);
  o.symbols = {};
  o.svg = "/proc/nope/f.svg";
  EXPECT_EQ(error_of(o).rfind("--svg /proc/nope/f.svg: cannot write in /proc/nope", 0), 0u);
}

// --diff A B: two exports (here FSMB files in export directories) become
// one differential graph of B against A, by shares: kmem_cache_alloc_noprof
// under schedule went from 40 of 43 events to 10 of 60 (blue), the same
// function as a root of its own from none to 20 of 60 (red).
class DecodeDiff : public Decode {
 protected:
  std::string export_dir(const std::string& name, const std::vector<StackRecord>& stacks) {
    fs::create_directory(dir_ + "/" + name);
    write(dir_ + "/" + name + "/stack_map_bin", fsmb_encode(stacks));
    return dir_ + "/" + name;
  }
  DecodeOptions diff_options() {
    DecodeOptions o;
    o.diff = {
        export_dir("a", {{5, 3, {kSchedule}}, {9, 40, {kKmem, kSchedule}}}),
        export_dir("b", {{5, 30, {kSchedule}}, {9, 10, {kKmem, kSchedule}}, {11, 20, {kKmem}}})};
    o.symbols.kallsyms = kKallsyms;
    return o;
  }
  std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static constexpr uint64_t kSchedule = 0xffffffff821f94e8;
  static constexpr uint64_t kKmem = 0xffffffff8135cb00;
};

TEST_F(DecodeDiff, FoldedHasDifffoldedsThreeColumns) {
  DecodeOptions o = diff_options();
  o.folded = "-";
  EXPECT_EQ(decode_to_string(o),
            "kmem_cache_alloc_noprof 0 20\n"
            "schedule 3 30\n"
            "schedule;kmem_cache_alloc_noprof 40 10\n");
}

TEST_F(DecodeDiff, SvgIsRedWhereAShareGrewBlueWhereItShrank) {
  DecodeOptions o = diff_options();
  o.svg = dir_ + "/diff.svg";
  o.folded = dir_ + "/diff.folded";
  EXPECT_EQ(decode_to_string(o), "");
  const std::string svg = read(o.svg);
  auto fill = [&](const std::string& title_start) {
    const size_t at = svg.find("<title>" + title_start);
    if (at == std::string::npos) return std::string("(none)");
    const size_t f = svg.find("fill=\"", at) + 6;
    return svg.substr(f, svg.find('"', f) - f);
  };
  // Root level: 0% -> 33%; under schedule 93% -> 17%, the largest change (deepest).
  EXPECT_EQ(
      fill("kmem_cache_alloc_noprof (0 events \u2192 20 events, 0.00% \u2192 33.33%, +33.33%)"),
      "rgb(255,118,118)")
      << svg;
  EXPECT_EQ(
      fill("kmem_cache_alloc_noprof (40 events \u2192 10 events, 93.02% \u2192 16.67%, -76.36%)"),
      "rgb(0,0,255)");
  EXPECT_NE(svg.find("b against "), std::string::npos);
  EXPECT_EQ(read(o.folded).substr(0, 27), "kmem_cache_alloc_noprof 0 2");
}

TEST_F(DecodeDiff, BadInputIsOneLineAndWritesNothing) {
  DecodeOptions o = diff_options();
  EXPECT_EQ(error_of(o),
            "--diff has nothing to write: decode --diff A B --svg FILE and/or --folded FILE");
  o.svg = dir_ + "/diff.svg";
  o.json = true;
  EXPECT_EQ(error_of(o).rfind("--diff writes --folded and --svg only", 0), 0u) << error_of(o);
  o.json = false;
  o.diff.pop_back();
  EXPECT_EQ(error_of(o).rfind("--diff takes two exports, A then B", 0), 0u) << error_of(o);
  o.diff.push_back(dir_ + "/nowhere");
  fs::create_directory(o.diff[1]);
  EXPECT_EQ(error_of(o).rfind("--diff: " + dir_ + "/nowhere holds neither", 0), 0u) << error_of(o);
  // A truncated B: nothing written, not a graph of part of it.
  std::string bytes = fsmb_encode({{5, 3, {kSchedule}}, {9, 40, {kKmem, kSchedule}}});
  write(o.diff[1] + "/stack_map_bin", bytes.substr(0, bytes.size() - 4));
  o.folded = dir_ + "/diff.folded";
  EXPECT_NE(error_of(o), "");
  EXPECT_FALSE(fs::exists(o.svg));
  EXPECT_FALSE(fs::exists(o.folded));
  // Exports of two kinds of weight: no comparison.
  write(o.diff[1] + "/stack_map.json",
        R"({"weight": "ns", "stacks": [{"ref_count": 7, "sum": 9, "symbols": ["leaf+0x1/0x2"]}]})");
  EXPECT_NE(error_of(o).find("counts events, " + o.diff[1] +
                             "/stack_map.json ns: compare two exports that count the same thing"),
            std::string::npos)
      << error_of(o);
  // Nor two --by: the roots of one are keys, of the other functions.
  write(o.diff[1] + "/stack_map.json",
        R"({"keys": ["comm"], "stacks": [{"ref_count": 7, "symbols": ["leaf+0x1/0x2"]}]})");
  EXPECT_NE(error_of(o).find("is --by none, " + o.diff[1] +
                             "/stack_map.json --by comm: compare two exports recorded with the "
                             "same --by"),
            std::string::npos)
      << error_of(o);
  EXPECT_FALSE(fs::exists(o.svg));
  EXPECT_EQ(error_of({}), "decode: name a file (stack_map_bin, stack_map.json), or --diff A B");
}

// Each of these once aborted decode (an exception that was not an
// Error: 1e400) or read out of bounds (user_stacks without its arrays).
TEST_F(Decode, MalformedJsonExportsAreOneLineErrors) {
  const std::string deep = "{\"stacks\": [{\"stack_id\": 1, \"ref_count\": 1, \"ips\": [" + [] {
    std::string ips = "\"0x1\"";
    for (uint32_t i = 0; i < kFsmbMaxFrames; ++i) ips += ", \"0x1\"";
    return ips;
  }() + "]}]}";
  // Each document, its problem, and the outputs whose reader meets it:
  // f --folded -, s --svg, p --pprof, t --top (the user_stacks reader only).
  struct Bad {
    std::string doc, problem, outputs;
  };
  const Bad bad[] = {
      {R"({"stacks":[{"stack_id":1,"ref_count":1e400,"ips":[]}]})", "number overflow", "fsp"},
      {R"({"stacks":[],"user_stacks":{}})", "user_stacks has no \"binaries\" array", "fspt"},
      {R"({"stacks":[],"user_stacks":{"binaries":7,"stacks":[]}})", "no \"binaries\" array",
       "fspt"},
      {R"({"stacks":[],"user_stacks":{"binaries":[],"stacks":[{"user_stack_id":1,"pid":1}]}})",
       "user_stacks.stacks[0] has no \"frames\" array", "fspt"},
      {R"({"stacks":[],"user_stacks":{"binaries":[{"path":"/x","build_id":"../../etc"}],)"
       R"("stacks":[]}})",
       "build_id is not a hex build id", "fspt"},
      {R"({"stacks":[],"user_stacks":{"binaries":[],"stacks":[{"user_stack_id":1,"pid":1,)"
       R"("frames":[{"address":"0x1","binary":4294967296,"file_offset":"0x0"}]}]}})",
       "names no binary", "fspt"},
      {R"({"keys":[1],"stacks":[]})", "wrong type", "p"},
      {R"({"stacks":[{"stack_id":1,"ref_count":1,"ips":["zz"]}]})", "not a hex address", "p"},
      {R"({"stacks":[{"stack_id":1,"ref_count":1,"ips":["0x1"],"symbols":[""]}]})",
       "not a non-empty string", "fs"},
      {"{\"stacks\":[{\"ref_count\":1,\"symbols\":[\"\xff\"]}]}", "invalid", "fsp"},
      {std::string(100000, '['), "not valid JSON", "fsp"},
      {deep, "more than 4096", "fsp"},
  };
  DecodeOptions o;
  o.file = dir_ + "/stack_map.json";
  for (const Bad& b : bad) {
    write(o.file, b.doc);
    for (char output : b.outputs) {
      o.folded = output == 'f' ? "-" : "";
      o.svg = output == 's' ? dir_ + "/out.svg" : "";
      o.pprof = output == 'p' ? dir_ + "/out.pb.gz" : "";
      o.top = output == 't' ? std::optional<size_t>(5) : std::nullopt;
      const std::string e = error_of(o);
      EXPECT_NE(e.find(b.problem), std::string::npos) << output << ": " << e;
      EXPECT_EQ(e.rfind(o.file, 0), 0u) << e;
      EXPECT_EQ(e.find('\n'), std::string::npos) << e;
      EXPECT_FALSE(fs::exists(o.svg) || fs::exists(o.pprof)) << b.doc;
    }
  }
}

TEST_F(Decode, CorruptFileNamesItself) {
  DecodeOptions o;
  o.file = dir_ + "/short.bin";
  write(o.file, "FSMB");
  EXPECT_NE(error_of(o).find(o.file), std::string::npos) << error_of(o);
}

}  // namespace
}  // namespace stackmapd

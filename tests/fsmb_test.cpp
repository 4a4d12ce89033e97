// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/fsmb.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/sys/error.h"

#ifndef STACKMAPD_SOURCE_DIR
#error "STACKMAPD_SOURCE_DIR must name the source tree, to find tests/rfc/stackmap_dump.py"
#endif

namespace stackmapd {
namespace {

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

std::string bytes_of(std::initializer_list<uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// Built independently of fsmb_encode, so a bug there cannot hide in both sides of a test.
std::string le32(uint32_t value) {
  return bytes_of({static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8),
                   static_cast<uint8_t>(value >> 16), static_cast<uint8_t>(value >> 24)});
}

std::string le64(uint64_t value) {
  return le32(static_cast<uint32_t>(value)) + le32(static_cast<uint32_t>(value >> 32));
}

std::string header(uint32_t magic, uint32_t version, uint32_t nr_stacks, uint32_t reserved = 0) {
  return le32(magic) + le32(version) + le32(nr_stacks) + le32(reserved);
}

std::string record(uint32_t stack_id, uint32_t nr, uint32_t ref_count) {
  return le32(stack_id) + le32(nr) + le32(ref_count) + le32(0);
}

std::vector<StackRecord> sample_stacks() {
  return {
      {4097, 12, {0xffffffff81a0c3d8, 0xffffffff81a0d1c0, 0xffffffff810b2f44}},
      {13, kU32Max + 5, {0xffffffffc0a81234}},
      {32767, 0, {}},
      {0, 1, {0, 0xffffffffffffffff}},
  };
}

void expect_same_stacks(const std::vector<StackRecord>& actual,
                        const std::vector<StackRecord>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].stack_id, expected[i].stack_id) << "stack " << i;
    EXPECT_EQ(actual[i].ref_count, std::min(expected[i].ref_count, kU32Max)) << "stack " << i;
    EXPECT_EQ(actual[i].ips, expected[i].ips) << "stack " << i;
  }
}

std::string decode_error(const std::string& bytes) {
  try {
    fsmb_decode(bytes, "trace.bin");
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "fsmb_decode accepted bad input";
  return "";
}

// The user-facing contract: one line, naming the file, with the words that say what went wrong.
void expect_message(const std::string& message, const std::string& file,
                    std::initializer_list<const char*> words) {
  EXPECT_EQ(message.rfind(file + ": ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const char* word : words) {
    EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' missing in: " << message;
  }
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fsmb_test.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string file = (path_ / name).string();
    std::ofstream out(file, std::ios::binary);
    out << bytes;
    if (!out.flush()) throw std::runtime_error("cannot write " + file);
    return file;
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(FsmbEncode, TwoStacksMatchHandWrittenBytes) {
  const std::vector<StackRecord> stacks = {
      {7, 3, {0xffffffff81000010, 0xffffffff81234567}},
      {0x1234, 0x01020304, {0x0102030405060708}},
  };
  const std::string expected = bytes_of({
      0x42, 0x53, 0x4d, 0x46,                          // magic 0x464D5342
      0x02, 0x00, 0x00, 0x00,                          // version 2
      0x02, 0x00, 0x00, 0x00,                          // nr_stacks
      0x00, 0x00, 0x00, 0x00,                          // reserved
      0x07, 0x00, 0x00, 0x00,                          // stack_id 7
      0x02, 0x00, 0x00, 0x00,                          // nr 2
      0x03, 0x00, 0x00, 0x00,                          // ref_count 3
      0x00, 0x00, 0x00, 0x00,                          // reserved
      0x10, 0x00, 0x00, 0x81, 0xff, 0xff, 0xff, 0xff,  // ips[0]
      0x67, 0x45, 0x23, 0x81, 0xff, 0xff, 0xff, 0xff,  // ips[1]
      0x34, 0x12, 0x00, 0x00,                          // stack_id 0x1234
      0x01, 0x00, 0x00, 0x00,                          // nr 1
      0x04, 0x03, 0x02, 0x01,                          // ref_count 0x01020304
      0x00, 0x00, 0x00, 0x00,                          // reserved
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // ips[0]
  });
  EXPECT_EQ(fsmb_encode(stacks), expected);
}

TEST(FsmbEncode, ZeroStacksIsABareHeader) {
  const std::string encoded = fsmb_encode({});
  EXPECT_EQ(encoded, bytes_of({0x42, 0x53, 0x4d, 0x46, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  const FsmbFile decoded = fsmb_decode(encoded, "empty.bin");
  EXPECT_EQ(decoded.revision, FsmbRevision::kV2);
  EXPECT_TRUE(decoded.stacks.empty());
}

TEST(FsmbEncode, RefCountSaturatesInsteadOfWrapping) {
  const std::string encoded = fsmb_encode({{1, kU32Max + 5, {0x1}}, {2, kU32Max, {0x2}}});
  const size_t second_record = 16 + 16 + 8;
  EXPECT_EQ(encoded.substr(16 + 8, 4), bytes_of({0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(encoded.substr(second_record + 8, 4), bytes_of({0xff, 0xff, 0xff, 0xff}));
  const FsmbFile decoded = fsmb_decode(encoded, "hot.bin");
  ASSERT_EQ(decoded.stacks.size(), 2u);
  EXPECT_EQ(decoded.stacks[0].ref_count, kU32Max);
  EXPECT_EQ(decoded.stacks[1].ref_count, kU32Max);
}

TEST(FsmbEncode, RefusesMoreFramesThanAnyReaderAccepts) {
  const StackRecord deepest{5, 1, std::vector<uint64_t>(kFsmbMaxFrames, 0xffffffff81000000)};
  EXPECT_EQ(fsmb_decode(fsmb_encode({deepest}), "deep.bin").stacks.at(0).ips.size(),
            kFsmbMaxFrames);

  StackRecord too_deep = deepest;
  too_deep.ips.push_back(0xffffffff81000000);
  try {
    fsmb_encode({too_deep});
    ADD_FAILURE() << "fsmb_encode accepted a stack of " << too_deep.ips.size() << " frames";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("stack_id 5 has 4097 frames"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(FsmbDecode, RoundTrip) {
  const std::vector<StackRecord> stacks = sample_stacks();
  const FsmbFile decoded = fsmb_decode(fsmb_encode(stacks), "round.bin");
  EXPECT_EQ(decoded.revision, FsmbRevision::kV2);
  expect_same_stacks(decoded.stacks, stacks);
}

TEST(FsmbDecode, LaterRevisionMagicDecodesAsV1) {
  const std::string bytes = header(0x46534D42, 1, 1) + record(99, 2, 42) +
                            le64(0xffffffff81000010) + le64(0xffffffff81000020);
  EXPECT_EQ(bytes.substr(0, 4), "BMSF");
  const FsmbFile decoded = fsmb_decode(bytes, "v1.bin");
  EXPECT_EQ(decoded.revision, FsmbRevision::kV1);
  expect_same_stacks(decoded.stacks, {{99, 42, {0xffffffff81000010, 0xffffffff81000020}}});
}

TEST(FsmbDecode, RfcMagicWithVersion1DecodesAsTheRfcReaderTakesIt) {
  const std::string bytes = header(0x464D5342, 1, 1) + record(7, 1, 3) + le64(0xffffffff81000010);
  const FsmbFile decoded = fsmb_decode(bytes, "rfc-v1.bin");
  EXPECT_EQ(decoded.revision, FsmbRevision::kV1RfcMagic);
  EXPECT_EQ(decoded.damage, "");
  expect_same_stacks(decoded.stacks, {{7, 3, {0xffffffff81000010}}});
}

TEST(FsmbDecode, RevisionNamesSayWhichFormatWasRead) {
  EXPECT_STREQ(fsmb_revision_name(FsmbRevision::kV2), "FSMB v2 (magic 0x464d5342)");
  EXPECT_STREQ(fsmb_revision_name(FsmbRevision::kV1), "FSMB v1 (magic 0x46534d42)");
  EXPECT_STREQ(fsmb_revision_name(FsmbRevision::kV1RfcMagic), "FSMB v1 (magic 0x464d5342)");
}

// A damaged file gives what the RFC's reader prints of it (every complete record) and one
// line, naming the file and its revision, that says what is wrong and what to do.
FsmbFile decode_damaged(const std::string& bytes) {
  FsmbFile file = fsmb_decode(bytes, "trace.bin");
  EXPECT_NE(file.damage, "") << "no damage reported";
  return file;
}

TEST(FsmbDecodeDamage, NrStacksMoreThanTheFileHolds) {
  // One complete record, but the header claims two.
  const FsmbFile file = decode_damaged(header(0x464D5342, 2, 2) + record(1, 0, 1));
  expect_same_stacks(file.stacks, {{1, 1, {}}});
  expect_message(
      file.damage, "trace.bin",
      {"truncated FSMB v2 (magic 0x464d5342) file", "record 2 of 2 at byte 32",
       "needs 16 bytes, 0 left", "kept the 1 record before it", "copy the whole file again"});
}

TEST(FsmbDecodeDamage, TruncatedRecordHeader) {
  const std::string bytes =
      header(0x464D5342, 2, 2) + record(1, 1, 1) + le64(0xffffffff81000000) + le32(2) + le32(0);
  const FsmbFile file = decode_damaged(bytes);
  expect_same_stacks(file.stacks, {{1, 1, {0xffffffff81000000}}});
  expect_message(file.damage, "trace.bin",
                 {"truncated FSMB v2", "record 2 of 2 at byte 40", "needs 16 bytes, 8 left"});
}

TEST(FsmbDecodeDamage, TruncatedFrames) {
  const std::string bytes = header(0x464D5342, 2, 1) + record(3, 3, 1) + le64(0xffffffff81000000) +
                            le64(0xffffffff81000008);
  const FsmbFile file = decode_damaged(bytes);
  EXPECT_TRUE(file.stacks.empty());
  expect_message(file.damage, "trace.bin",
                 {"record 1 of 1 at byte 16", "needs 40 bytes, 32 left", "kept the 0 records"});
}

TEST(FsmbDecodeDamage, TruncatedV1NamesItsRevision) {
  const std::string bytes = header(0x46534D42, 1, 2) + record(3, 0, 1);
  EXPECT_NE(decode_damaged(bytes).damage.find("truncated FSMB v1 (magic 0x46534d42) file"),
            std::string::npos);
  const std::string rfc = header(0x464D5342, 1, 2) + record(3, 0, 1);
  EXPECT_NE(decode_damaged(rfc).damage.find("truncated FSMB v1 (magic 0x464d5342) file"),
            std::string::npos);
}

TEST(FsmbDecodeDamage, TrailingBytes) {
  const FsmbFile file = decode_damaged(fsmb_encode({{1, 1, {0xffffffff81000000}}}) + "junk");
  expect_same_stacks(file.stacks, {{1, 1, {0xffffffff81000000}}});
  expect_message(file.damage, "trace.bin",
                 {"over-long FSMB v2 (magic 0x464d5342) file", "4 trailing bytes at byte 40",
                  "after the header's 1 record;", "kept every record"});
}

TEST(FsmbDecodeDamage, EveryTruncationKeepsTheRecordsBeforeTheCut) {
  const std::vector<StackRecord> stacks = sample_stacks();
  const std::string full = fsmb_encode(stacks);
  std::vector<size_t> ends;  // where each record ends
  size_t end = 16;
  for (const StackRecord& stack : stacks) ends.push_back(end += 16 + 8 * stack.ips.size());
  for (size_t size = 16; size < full.size(); ++size) {
    const FsmbFile file = fsmb_decode(std::string_view(full).substr(0, size), "cut.bin");
    const size_t whole =
        std::count_if(ends.begin(), ends.end(), [&](size_t e) { return e <= size; });
    EXPECT_NE(file.damage, "") << "a " << size << "-byte prefix of " << full.size() << " bytes";
    expect_same_stacks(file.stacks, {stacks.begin(), stacks.begin() + whole});
  }
}

TEST(FsmbDecodeErrors, EmptyFile) {
  expect_message(decode_error(""), "trace.bin", {"empty FSMB file", "copy it again"});
}

TEST(FsmbDecodeErrors, ShorterThanHeader) {
  expect_message(decode_error(header(0x464D5342, 2, 0).substr(0, 10)), "trace.bin",
                 {"truncated FSMB file", "10 bytes", "header", "16", "copy the whole file"});
}

TEST(FsmbDecodeErrors, ForeignMagicShowsTheFirstBytes) {
  const std::string elf = bytes_of({0x7f, 'E', 'L', 'F', 2, 1, 1, 0}) + std::string(8, '\0');
  expect_message(decode_error(elf), "trace.bin",
                 {"not a stack_map_bin file", "7f 45 4c 46", "\".ELF\"", "0x464d5342"});

  // The text export is the likeliest wrong file to be handed to the reader.
  expect_message(decode_error("stack_id 42 [ref 1337, depth 8]\n"), "trace.bin",
                 {"not a stack_map_bin file", "73 74 61 63", "\"stac\"", "text stack_map"});
}

TEST(FsmbDecodeErrors, UnknownVersions) {
  expect_message(decode_error(header(0x464D5342, 3, 0)), "trace.bin",
                 {"unsupported FSMB version 3", "0x464d5342", "expected version 2 or 1"});
  expect_message(decode_error(header(0x464D5342, 0, 0)), "trace.bin",
                 {"unsupported FSMB version 0", "expected version 2 or 1"});
  // The later revision's magic came with version 1 only, and the RFC's reader knows neither.
  expect_message(decode_error(header(0x46534D42, 2, 0)), "trace.bin",
                 {"unsupported FSMB version 2", "0x46534d42", "expected version 1)"});
}

TEST(FsmbDecodeErrors, NonZeroReservedInHeader) {
  expect_message(decode_error(header(0x464D5342, 2, 0, 0x80)), "trace.bin",
                 {"reserved", "0x00000080", "must be 0"});
}

TEST(FsmbDecodeErrors, AbsurdNrStacksFailsOnTheHeader) {
  // More than any table holds: not a truncated export, though the RFC's reader would print
  // what records follow.
  expect_message(decode_error(header(0x464D5342, 2, 0xffffffff) + record(1, 0, 1)), "trace.bin",
                 {"corrupt FSMB header", "nr_stacks 4294967295", "more than 1048576"});
  expect_message(decode_error(header(0x464D5342, 2, kFsmbMaxStacks + 1)), "trace.bin",
                 {"nr_stacks 1048577"});
  // The largest table's count with the file cut short is a truncation.
  EXPECT_NE(fsmb_decode(header(0x464D5342, 2, kFsmbMaxStacks), "t").damage, "");
}

TEST(FsmbDecodeErrors, AbsurdFrameCount) {
  const std::string bytes = header(0x464D5342, 2, 1) + record(3, kFsmbMaxFrames + 1, 1);
  expect_message(decode_error(bytes), "trace.bin",
                 {"record 1 of 1 at byte 16", "4097 frames", "at most 4096"});
  // Refused even after a good record: a file that lies about a record's size is corrupt, not cut.
  const std::string later = header(0x464D5342, 2, 2) + record(1, 0, 1) + record(2, 5000, 1);
  expect_message(decode_error(later), "trace.bin", {"record 2 of 2 at byte 32", "5000 frames"});
  // A count whose byte size would overflow 32-bit arithmetic must still be called absurd.
  const std::string huge = header(0x464D5342, 2, 1) + record(3, 0xffffffff, 1);
  expect_message(decode_error(huge), "trace.bin", {"4294967295 frames", "at most 4096"});
}

TEST(FsmbDecodeErrors, CorruptBytesGiveErrorOrData) {
  // Only Error may escape: a bad_alloc or length_error would mean a lying field drove allocation.
  const std::string full = fsmb_encode(sample_stacks());
  for (size_t position = 0; position < full.size(); ++position) {
    for (uint8_t value : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
      std::string corrupt = full;
      corrupt[position] = static_cast<char>(value);
      try {
        fsmb_decode(corrupt, "corrupt.bin");
      } catch (const Error&) {
      } catch (const std::exception& other) {
        ADD_FAILURE() << "byte " << position << " = " << int{value} << ": " << other.what();
      }
    }
  }
}

TEST(FsmbReadFile, ReadsAWrittenFile) {
  const TempDir dir;
  const std::vector<StackRecord> stacks = sample_stacks();
  const FsmbFile decoded = fsmb_read_file(dir.write("stack_map_bin", fsmb_encode(stacks)));
  expect_same_stacks(decoded.stacks, stacks);
}

TEST(FsmbReadFile, DecodeErrorsNameThePath) {
  const TempDir dir;
  const std::string path = dir.write("short.bin", "FSMB");
  try {
    fsmb_read_file(path);
    ADD_FAILURE() << "read a 4-byte file";
  } catch (const Error& error) {
    expect_message(error.what(), path, {"truncated FSMB file"});
  }
}

TEST(FsmbReadFile, UnreadableFileNamesErrno) {
  const TempDir dir;
  const std::string missing = dir.path() + "/missing.bin";
  try {
    fsmb_read_file(missing);
    ADD_FAILURE() << "read a missing file";
  } catch (const Error& error) {
    expect_message(error.what(), missing, {"cannot open", "No such file or directory"});
  }
  try {
    fsmb_read_file(dir.path());
    ADD_FAILURE() << "read a directory";
  } catch (const Error& error) {
    expect_message(error.what(), dir.path(), {"cannot read", "Is a directory"});
  }
}

std::string hex_ip(uint64_t ip) {
  std::ostringstream out;
  out << "0x" << std::hex << ip;
  return out.str();
}

// The contract is that the RFC's own script reads our files unchanged.
TEST(FsmbCompat, RfcStackmapDumpReadsOurFile) {
  const TempDir dir;
  const std::vector<StackRecord> stacks = sample_stacks();
  const std::string path = dir.write("stack_map_bin", fsmb_encode(stacks));
  const std::string stderr_path = dir.path() + "/stderr";
  const std::string command = "python3 '" STACKMAPD_SOURCE_DIR "/tests/rfc/stackmap_dump.py' '" +
                              path + "' --json 2>'" + stderr_path + "'";

  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  std::string output;
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  const int status = pclose(pipe);
  std::ifstream stderr_file(stderr_path);
  const std::string errors{std::istreambuf_iterator<char>(stderr_file),
                           std::istreambuf_iterator<char>()};
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command << "\n" << errors;
  EXPECT_EQ(errors, "Total: 4 unique stacks\n");

  const nlohmann::json parsed = nlohmann::json::parse(output);
  ASSERT_TRUE(parsed.is_array()) << output;
  ASSERT_EQ(parsed.size(), stacks.size()) << output;
  for (size_t i = 0; i < stacks.size(); ++i) {
    EXPECT_EQ(parsed[i].at("stack_id").get<uint32_t>(), stacks[i].stack_id) << i;
    EXPECT_EQ(parsed[i].at("ref_count").get<uint64_t>(), std::min(stacks[i].ref_count, kU32Max))
        << i;
    std::vector<std::string> expected_ips;
    for (uint64_t ip : stacks[i].ips) expected_ips.push_back(hex_ip(ip));
    EXPECT_EQ(parsed[i].at("ips").get<std::vector<std::string>>(), expected_ips) << i;
  }
}

}  // namespace
}  // namespace stackmapd

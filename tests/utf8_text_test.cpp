// SPDX-License-Identifier: GPL-2.0
// Bytes made text (daemon/export/utf8_text.h, json_text.h): valid UTF-8 as
// it is, each byte of an invalid sequence as "\xNN", and the outputs built on
// it (JSON, pprof, folded, SVG) taking any name.
#include "daemon/export/utf8_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/export/exports.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/json_snapshot.h"
#include "daemon/export/json_text.h"
#include "tests/snapshot_outputs.h"

namespace stackmapd {
namespace {

using namespace std::string_literals;

TEST(Utf8Text, ValidTextPassesUnchanged) {
  for (const std::string& s :
       {""s, "nginx"s, "caf\xc3\xa9"s, "\xe2\x82\xac 5"s, "\xf0\x9f\x94\xa5"s,
        "\xed\x9f\xbf"s /* U+D7FF */, "\xee\x80\x80"s /* U+E000 */,
        "\xf4\x8f\xbf\xbf"s /* U+10FFFF */, "a\0b"s /* NUL */, "\x7f\x01\n"s}) {
    EXPECT_TRUE(is_utf8(s)) << s;
    EXPECT_EQ(utf8_text(s), s);
  }
}

TEST(Utf8Text, EachByteOfAnInvalidSequenceIsEscaped) {
  const std::pair<std::string, std::string> cases[] = {
      {"\xff-x", "\\xff-x"},                              // a prctl'd thread name
      {"\xff\xfe", "\\xff\\xfe"},                         // never in UTF-8
      {"\x80\x61", "\\x80a"},                             // stray continuation
      {"\xc0\xaf", "\\xc0\\xaf"},                         // overlong '/'
      {"\xc1\xbf", "\\xc1\\xbf"},                         // overlong
      {"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},                // overlong, 3 bytes
      {"\xf0\x80\x80\xaf", "\\xf0\\x80\\x80\\xaf"},       // overlong, 4 bytes
      {"\xc0\x80", "\\xc0\\x80"},                         // overlong NUL
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},                // surrogate U+D800
      {"\xed\xbf\xbf", "\\xed\\xbf\\xbf"},                // surrogate U+DFFF
      {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},       // U+110000
      {"\xf5\x80\x80\x80", "\\xf5\\x80\\x80\\x80"},       // lead above F4
      {"\xe2\x82", "\\xe2\\x82"},                         // truncated at the end
      {"\xe2\x82\x41", "\\xe2\\x82A"},                    // truncated mid-string
      {"\xf0\x9f\x94", "\\xf0\\x9f\\x94"},                // 3 of 4
      {"ok\xc3", "ok\\xc3"},                              // lead alone
      {"\xc3\xa9\xff\xc3\xa9", "\xc3\xa9\\xff\xc3\xa9"},  // valid around invalid
      {"\0\xff"s, "\0\\xff"s},                            // NUL kept, length-safe
  };
  for (const auto& [in, want] : cases) {
    EXPECT_FALSE(is_utf8(in));
    const std::string got = utf8_text(in);
    EXPECT_EQ(got, want);
    EXPECT_TRUE(is_utf8(got));
    EXPECT_EQ(utf8_text(got), got) << "idempotent";
  }
}

TEST(Utf8Text, EveryByteValueComesOutAsText) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string text = utf8_text(all);
  EXPECT_TRUE(is_utf8(text));
  EXPECT_EQ(text.substr(0, 128), all.substr(0, 128));
  EXPECT_EQ(text.substr(128), [] {
    std::string s;
    char buf[8];
    for (int b = 128; b < 256; ++b) s += (snprintf(buf, sizeof(buf), "\\x%02x", b), buf);
    return s;
  }());
}

TEST(Utf8Text, MarkupEscapesSpecialsAndWhatXmlForbids) {
  EXPECT_EQ(markup_text("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
  EXPECT_EQ(markup_text("t\tn\nr\r"), "t\tn\nr\r");
  EXPECT_EQ(markup_text("\x01\x1f\0"s), "\\x01\\x1f\\x00");
  EXPECT_EQ(markup_text("\xef\xbf\xbe\xef\xbf\xbd"),
            "\\xef\\xbf\\xbe\xef\xbf\xbd");  // U+FFFE, U+FFFD
  EXPECT_EQ(markup_text("\xff<"), "\\xff&lt;");
}

TEST(Utf8Text, LineTextKeepsANameOnItsLine) {
  EXPECT_EQ(line_text("nl\nx"), "nl\\x0ax");
  EXPECT_EQ(line_text("t\tr\r\x1b[2J\x7f\0"s), "t\tr\\x0d\\x1b[2J\\x7f\\x00");
  EXPECT_EQ(line_text("caf\xc3\xa9 \xff"), "caf\xc3\xa9 \\xff");
  const std::string twice = line_text(line_text("a\nb\xff"));
  EXPECT_EQ(twice, line_text("a\nb\xff")) << "idempotent";
}

TEST(Utf8Text, JsonOfAnyBytesDumps) {
  nlohmann::json doc = {{"comm", "\xff-x"}, {"nested", {{"path", {"/tmp/\xff\xfe/w", "ok"}}}}};
  EXPECT_THROW(doc.dump(), nlohmann::json::type_error);  // what broke every export
  const std::string text = dump_json(doc);
  const nlohmann::json back = nlohmann::json::parse(text);
  EXPECT_EQ(back["comm"], "\\xff-x");
  EXPECT_EQ(back["nested"]["path"][0], "/tmp/\\xff\\xfe/w");
  EXPECT_EQ(back["nested"]["path"][1], "ok");
}

// The export of a snapshot whose names are bytes: the JSON parses and reads
// back, folded lines and the SVG carry the escaped name.
TEST(Utf8Text, ExportsOfNonUtf8NamesAreText) {
  Snapshot snap;
  snap.keys = KeySpec::parse("comm,cgroup");
  snap.keys_requested = true;
  KeyCount k;
  k.key.comm = "\xff-x";
  k.key.cgroup = "/sys\xc0\xaf";
  k.count = 3;
  k.weight = 3;
  snap.stacks.push_back({7, 3, {0xffffffff81000010}, 3, {k}});
  snap.user.enabled = true;
  snap.user.binaries.push_back({"/tmp/\xff\xfe/ustack_workload", "abcd"});
  const std::string json = json_of(snap, nullptr);
  EXPECT_TRUE(is_utf8(json));
  EXPECT_NE(json.find(R"("comm": "\\xff-x")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("/tmp/\\xff\\xfe/ustack_workload")"), std::string::npos) << json;
  const JsonExport back = read_json_export(json, "t.json");
  ASSERT_EQ(back.snap.stacks.size(), 1u);
  EXPECT_EQ(back.snap.stacks[0].by[0].key.comm, "\\xff-x");

  const std::vector<SymbolizedStack> stacks = {{3, {"fn", "\xff-x"}}};
  EXPECT_EQ(format_folded(stacks), "\\xff-x;fn 3\n");
  EXPECT_NE(render_flamegraph_svg(stacks).find("<title>\\xff-x (3 events"), std::string::npos);
}

}  // namespace
}  // namespace stackmapd

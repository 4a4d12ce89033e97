// SPDX-License-Identifier: GPL-2.0
// --filter: the compiler (daemon/source/event_filter.h) and the interpreter
// the BPF event path runs (include/stackmapd/event_filter.h), here on records
// laid out as a tracepoint's format file says. What a filter must match is
// what ftrace's own filter gives (checked on a 6.18 kernel, quirks included);
// tests/filter_test.sh compares the two on live events.
#include "daemon/source/event_filter.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "daemon/sys/error.h"

namespace {

char g_comm[16];
__u32 g_pid, g_cpu;

}  // namespace

#define SMT_LOOP_CB static long
#define smt_loop(n, cb, ctx)           \
  do {                                 \
    for (__u32 i_ = 0; i_ < (n); i_++) \
      if ((cb)(i_, (ctx))) break;      \
  } while (0)

static int smt_filter_read_num(__u64* v, __u32 size, __u64 addr) {
  if (size > 8) return -1;
  std::memcpy(v, reinterpret_cast<const void*>(addr), size);
  return 0;
}

static int smt_filter_read_str(char* dst, __u32 size, __u64 addr) {
  if (size > SMT_FILTER_STR_MAX) return -1;
  std::memcpy(dst, reinterpret_cast<const void*>(addr), size);
  return 0;
}

static void smt_filter_comm(char comm[16]) { std::memcpy(comm, g_comm, sizeof(g_comm)); }
static __u32 smt_filter_pid() { return g_pid; }
static __u32 smt_filter_cpu() { return g_cpu; }

#include "stackmapd/event_filter.h"

namespace stackmapd {
namespace {

// A record of every kind of field the interpreter reads.
constexpr const char* kFormat = R"(name: fake
ID: 1
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc char[] filename;	offset:8;	size:4;	signed:0;
	field:__rel_loc char[] rel;	offset:12;	size:4;	signed:0;
	field:char name[16];	offset:16;	size:16;	signed:0;
	field:s8 s1;	offset:32;	size:1;	signed:1;
	field:u8 u1;	offset:33;	size:1;	signed:0;
	field:short s2;	offset:34;	size:2;	signed:1;
	field:int s4;	offset:36;	size:4;	signed:1;
	field:unsigned int u4;	offset:40;	size:4;	signed:0;
	field:long s8;	offset:48;	size:8;	signed:1;
	field:unsigned long u8;	offset:56;	size:8;	signed:0;
	field:const char * ptr;	offset:64;	size:8;	signed:0;
	field:int arr[4];	offset:72;	size:16;	signed:1;
	field:int a;	offset:88;	size:4;	signed:1;
	field:int b;	offset:92;	size:4;	signed:1;
	field:int c;	offset:96;	size:4;	signed:1;
	field:int d;	offset:100;	size:4;	signed:1;
	field:int e;	offset:104;	size:4;	signed:1;
	field:int f;	offset:108;	size:4;	signed:1;
	field:int g;	offset:112;	size:4;	signed:1;
	field:int h;	offset:116;	size:4;	signed:1;

print fmt: "x"
)";

const EventFormat& format() {
  static const EventFormat f = [] {
    EventFormat e = parse_event_format(kFormat);
    e.system = "fake";
    return e;
  }();
  return f;
}

struct Record {
  alignas(8) unsigned char bytes[2048] = {};

  template <typename T>
  Record& set(uint32_t offset, T v) {
    std::memcpy(bytes + offset, &v, sizeof(v));
    return *this;
  }
  // A __data_loc string at `at` (its length counts the NUL, as __string()'s).
  Record& dyn(const std::string& s, uint32_t at = 200) {
    std::memcpy(bytes + at, s.c_str(), s.size() + 1);
    return set<uint32_t>(8, static_cast<uint32_t>(s.size() + 1) << 16 | at);
  }
  // A __rel_loc string: its offset counts from the end of the u32 at 12.
  Record& rel(const std::string& s, uint32_t at = 1200) {
    std::memcpy(bytes + at, s.c_str(), s.size() + 1);
    return set<uint32_t>(12, static_cast<uint32_t>(s.size() + 1) << 16 | (at - 16));
  }
  Record& name(const std::string& s) {
    std::memset(bytes + 16, 0, 16);
    std::memcpy(bytes + 16, s.data(), std::min<size_t>(s.size(), 16));
    return *this;
  }
};

bool matches(const std::string& expr, const Record& r) {
  const smt_filter f = compile_filter(expr, format());
  char str[SMT_FILTER_STR_MAX + 1];
  return smt_filter_match(&f, reinterpret_cast<__u64>(r.bytes), str);
}

std::string error_of(const std::string& expr) {
  try {
    compile_filter(expr, format());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// a..h are 0 or 1 as the bits of `bits` say.
Record bits_record(unsigned bits) {
  Record r;
  for (unsigned k = 0; k < 8; ++k) r.set<int32_t>(88 + 4 * k, (bits >> k) & 1);
  return r;
}

TEST(EventFilter, LogicMatchesCPrecedenceForEveryAssignment) {
  struct Case {
    std::string expr;
    std::function<bool(bool, bool, bool, bool, bool, bool, bool, bool)> want;
  };
  const std::vector<Case> cases = {
      {"a == 1 || b == 1 && c == 1",
       [](bool a, bool b, bool c, bool, bool, bool, bool, bool) { return a || (b && c); }},
      {"a == 1 && b == 1 || c == 1 && d == 1",
       [](bool a, bool b, bool c, bool d, bool, bool, bool, bool) { return (a && b) || (c && d); }},
      {"(a == 1 || b == 1) && (c == 1 || d == 1) && !(e == 1 && f == 1)",
       [](bool a, bool b, bool c, bool d, bool e, bool f, bool, bool) {
         return (a || b) && (c || d) && !(e && f);
       }},
      {"a == 1 && !(!b == 1 || (c == 1 && g == 1)) || d == 1 || e == 1 && !f == 1",
       [](bool a, bool b, bool c, bool d, bool e, bool f, bool g, bool) {
         return (a && !(!b || (c && g))) || d || (e && !f);
       }},
      {"((((((((a == 1) && (b == 1)) || (c == 1)) && (d == 1)) || (e == 1)) && (f == 1)) || "
       "(g == 1)) && (h == 1))",
       [](bool a, bool b, bool c, bool d, bool e, bool f, bool g, bool h) {
         return ((((((a && b) || c) && d) || e) && f) || g) && h;
       }},
      {"!!(a != 0) && !(h == 0 || g != 1)",
       [](bool a, bool, bool, bool, bool, bool, bool g, bool h) { return a && !(!h || !g); }},
  };
  for (const Case& c : cases)
    for (unsigned bits = 0; bits < 256; ++bits) {
      auto bit = [&](unsigned k) { return ((bits >> k) & 1) != 0; };
      EXPECT_EQ(matches(c.expr, bits_record(bits)),
                c.want(bit(0), bit(1), bit(2), bit(3), bit(4), bit(5), bit(6), bit(7)))
          << c.expr << " with a..h = " << bits;
    }
}

TEST(EventFilter, JumpsOnlyForward) {
  const smt_filter f =
      compile_filter("a == 1 && (b == 1 || !(c == 1 && d == 1)) || e == 1", format());
  ASSERT_EQ(f.nr, 5u);
  for (__u32 k = 0; k < f.nr; ++k) {
    EXPECT_GT(f.preds[k].on_true, k);
    EXPECT_GT(f.preds[k].on_false, k);
  }
}

TEST(EventFilter, SignedFieldsCompareSigned) {
  Record r;
  r.set<int32_t>(36, -5).set<uint32_t>(40, 0xfffffffb).set<int8_t>(32, -1).set<uint8_t>(33, 0xff);
  r.set<int16_t>(34, -300).set<int64_t>(48, INT64_MIN).set<uint64_t>(56, UINT64_MAX);
  EXPECT_TRUE(matches("s4 < 0", r));
  EXPECT_TRUE(matches("s4 == -5", r));
  EXPECT_TRUE(matches("s4 >= -5 && s4 <= -5 && s4 > -6", r));
  EXPECT_FALSE(matches("u4 < 0x10", r));  // the same bits, unsigned
  EXPECT_TRUE(matches("u4 == 0xfffffffb && u4 > 5", r));
  EXPECT_TRUE(matches("s1 == -1 && s1 < 0 && u1 == 255 && u1 > 127", r));
  EXPECT_TRUE(matches("s2 == -300 && s2 < -299", r));
  EXPECT_TRUE(matches("s8 == -9223372036854775808 && s8 < -1", r));
  EXPECT_TRUE(matches("u8 == 0xffffffffffffffff && u8 > 1", r));
  // A constant wider than the field compares as the field's type holds it (ftrace casts it).
  EXPECT_TRUE(matches("u1 == 0x1ff", r));
  EXPECT_TRUE(matches("s1 == 0xff", r));
}

TEST(EventFilter, NumbersAreDecimalHexOrOctal) {
  Record r;
  r.set<uint32_t>(40, 4096).set<uint64_t>(56, 0x400 | 0x10);
  EXPECT_TRUE(matches("u4 == 4096", r));
  EXPECT_TRUE(matches("u4 == 0x1000", r));
  EXPECT_TRUE(matches("u4 == 0X1000", r));
  EXPECT_TRUE(matches("u4 == 010000", r));
  EXPECT_TRUE(matches("u8 & 0x400", r));
  EXPECT_FALSE(matches("u8 & 0x20", r));
  EXPECT_TRUE(matches("u4 >= 4096 && u8 & 0x400", r));
}

TEST(EventFilter, StringsMatchAsFtraceDoes) {
  Record r;
  r.name("sleep").dyn("/usr/bin/sleep").rel("relative");
  EXPECT_TRUE(matches("name == \"sleep\"", r));
  EXPECT_TRUE(matches("name == 'sleep'", r));
  EXPECT_FALSE(matches("name == \"slee\"", r));
  EXPECT_FALSE(matches("name == \"sleeper\"", r));
  EXPECT_TRUE(matches("name != \"bash\"", r));
  EXPECT_TRUE(matches("name ~ \"sle*\"", r));
  EXPECT_TRUE(matches("name ~ \"*lee*\"", r));
  EXPECT_TRUE(matches("name ~ \"*\"", r));
  EXPECT_FALSE(matches("name ~ \"*lex*\"", r));
  // ftrace's "*x" on a char array compares the bytes before the array's last
  // one, not the string's end: a short name never matches (as on 6.18).
  EXPECT_FALSE(matches("name ~ \"*eep\"", r));
  EXPECT_TRUE(matches("name ~ \"*s-x\"", Record().name("fifteen-bytes-x")));
  EXPECT_TRUE(matches("name ~ \"*s-x\"", Record().name("sixteen-bytes-xy")));
  // A __data_loc string's length ends at its NUL: "*x" is its real end.
  EXPECT_TRUE(matches("filename ~ \"*/sleep\"", r));
  EXPECT_TRUE(matches("filename == \"/usr/bin/sleep\"", r));
  EXPECT_FALSE(matches("filename == \"/usr/bin/slee\"", r));
  EXPECT_TRUE(matches("filename ~ \"/usr/*\"", r));
  EXPECT_TRUE(matches("filename ~ \"*bin*\"", r));
  EXPECT_TRUE(matches("rel == \"relative\" && rel ~ \"*tive\"", r));
  // Full globs: * inside, ?, classes, ranges, inversion, escapes.
  EXPECT_TRUE(matches("filename ~ \"/usr/*/sl?ep\"", r));
  EXPECT_TRUE(matches("name ~ \"s[a-m]eep\"", r));
  EXPECT_FALSE(matches("name ~ \"s[!a-m]eep\"", r));
  EXPECT_TRUE(matches("name ~ \"[]s]leep\"", r));
  EXPECT_TRUE(matches("name ~ \"s*e*p\"", r));
  EXPECT_FALSE(matches("name ~ \"s*e*q\"", r));
  EXPECT_TRUE(matches("name ~ \"sle\\ep\"", r));
  EXPECT_TRUE(matches("name ~ \"s?e*\"", r));
  EXPECT_FALSE(matches("name ~ \"sleep?\"", r));
  // lib/glob.c's reading: backtracking over several '*', an unclosed '[' is
  // literal, a range, a trailing backslash.
  EXPECT_TRUE(matches("name ~ \"*a*b*c\"", Record().name("xaxbxc")));
  EXPECT_FALSE(matches("name ~ \"*a*b*c\"", Record().name("xaxbxcx")));
  EXPECT_TRUE(matches("name ~ \"*a*b*c\"", Record().name("abcabc")));
  EXPECT_TRUE(matches("name ~ \"a[b*\"", Record().name("a[bcd")));
  EXPECT_FALSE(matches("name ~ \"a[b*\"", Record().name("abcd")));
  EXPECT_TRUE(matches("name ~ \"v[0-9][0-9]?\"", Record().name("v42x")));
  EXPECT_FALSE(matches("name ~ \"v[0-9][0-9]?\"", Record().name("v4xx")));
  EXPECT_TRUE(matches("name ~ \"sl?ep\\\"", r));
  EXPECT_FALSE(matches("name ~ \"sl?ep\\\\\"", r));  // an escaped backslash is a byte
  // "!x" negates; a pattern starting with a digit is matched whole.
  EXPECT_TRUE(matches("name ~ \"!bash*\"", r));
  EXPECT_FALSE(matches("name ~ \"!sl*\"", r));
  EXPECT_TRUE(matches("name ~ \"5*\"", Record().name("5*")));
  EXPECT_FALSE(matches("name ~ \"5*\"", Record().name("55")));
}

TEST(EventFilter, LongStringsReadWhatEachMatchNeeds) {
  const std::string path = std::string(300, 'd') + "/tail";
  Record r;
  r.dyn(path);
  EXPECT_TRUE(matches("filename ~ \"*/tail\"", r));  // the end, past 255 bytes
  EXPECT_TRUE(matches("filename ~ \"ddd*\"", r));
  EXPECT_FALSE(matches("filename == \"ddd\"", r));
  EXPECT_FALSE(matches("filename ~ \"*tail*\"", r));  // documented: "*x*" sees 255 bytes
}

TEST(EventFilter, TaskFieldsComeFromTheTask) {
  std::memcpy(g_comm, "stress-ng\0\0\0\0\0\0", 16);
  g_pid = 4242;
  g_cpu = 3;
  Record r;
  EXPECT_TRUE(matches("comm == \"stress-ng\" && common_pid == 4242", r));
  EXPECT_TRUE(matches("COMM ~ \"stress*\" && cpu == 3 && CPU > 2 && common_cpu & 1", r));
  EXPECT_FALSE(matches("comm ~ \"*-ng\"", r));  // a char array: the quirk above
  EXPECT_FALSE(matches("common_pid != 4242 || cpu < 3", r));
}

TEST(EventFilter, ErrorsNameTheProblemAndTheColumn) {
  EXPECT_EQ(error_of("nosuch == 1"),
            "--filter: field not found: 'nosuch' (fake:fake has: filename, rel, name, s1, u1, "
            "s2, s4, u4, s8, u8, ptr, arr, a, b, c, d, e, f, g, h, common_pid, comm, cpu) at "
            "column 1: nosuch == 1");
  EXPECT_EQ(error_of("u4 ~ 3"),
            "--filter: illegal operation for field type: ~ takes strings at column 4: u4 ~ 3");
  EXPECT_EQ(error_of("u4 == \"3\""),
            "--filter: expecting numeric field: u4 is a number at column 7: u4 == \"3\"");
  EXPECT_EQ(error_of("name == 3"),
            "--filter: expecting string field: name is a string: quote the value at column 9: "
            "name == 3");
  EXPECT_EQ(error_of("name > \"a\""),
            "--filter: illegal operation for field type: strings take ==, != or ~, not > at "
            "column 8: name > \"a\"");
  EXPECT_EQ(
      error_of("u4 = 1"),
      "--filter: invalid operator: expected ==, !=, <, <=, >, >=, & or ~ at column 4: u4 = 1");
  EXPECT_EQ(error_of("u4 == abc"),
            "--filter: invalid value (did you forget quotes?) at column 7: u4 == abc");
  EXPECT_EQ(error_of("u4 == 08"),
            "--filter: illegal integer value '08' for an unsigned field at column 7: u4 == 08");
  EXPECT_EQ(error_of("u4 == -1"),
            "--filter: illegal integer value '-1' for an unsigned field at column 7: u4 == -1");
  EXPECT_EQ(error_of("s8 == 9223372036854775808"),
            "--filter: illegal integer value '9223372036854775808' for a signed field at column "
            "7: s8 == 9223372036854775808");
  EXPECT_EQ(error_of("u4 == 0x"),
            "--filter: illegal integer value '0x' for an unsigned field at column 7: u4 == 0x");
  EXPECT_EQ(error_of("name == \"abc"),
            "--filter: missing matching quote at column 9: name == \"abc");
  EXPECT_EQ(error_of("(u4 == 1"),
            "--filter: too many '(': this one is not closed at column 1: (u4 == 1");
  EXPECT_EQ(error_of("u4 == 1)"), "--filter: too few '(' at column 8: u4 == 1)");
  EXPECT_EQ(error_of("u4 == 1 &&"),
            "--filter: expected a predicate after this at column 11: u4 == 1 &&");
  EXPECT_EQ(error_of("u4 == 1 u4"), "--filter: expected &&, || or the end at column 9: u4 == 1 u4");
  EXPECT_EQ(error_of("u4 == 1 & u4"),
            "--filter: expected &&, || or the end at column 9: u4 == 1 & u4");
  EXPECT_EQ(
      error_of("   "),
      "--filter: empty filter: give predicates such as 'bytes_alloc >= 4096' at column 4:    ");
  EXPECT_EQ(error_of("common_flags & 1"),
            "--filter: common_flags is not in the record a BPF program sees (the kernel puts a "
            "pointer over the common fields): use --backend tracefs at column 1: common_flags & 1");
  EXPECT_EQ(error_of("ptr == \"x\""),
            "--filter: ptr is a const char *: --filter reads no strings through pointers "
            "(--backend tracefs does) at column 1: ptr == \"x\"");
  EXPECT_EQ(error_of("arr == 1"),
            "--filter: illegal operation for field type: arr is int[4] at column 1: arr == 1");
}

TEST(EventFilter, HostileInputGetsOneLine) {
  const std::string huge(100 * 1024, 'a');
  EXPECT_EQ(error_of(huge), "--filter is 102400 bytes long, more than 4096");
  const std::string deep = std::string(1000, '(') + "u4 == 1" + std::string(1000, ')');
  EXPECT_EQ(error_of(deep).substr(0, 64),
            "--filter: nested too deep: at most 32 '(' and '!' at column 33: ");
  const std::string nested = std::string(40, '(') + "u4 == 1" + std::string(40, ')');
  EXPECT_EQ(error_of(nested),
            "--filter: nested too deep: at most 32 '(' and '!' at column 33: "
            "...((((((((((((((((((((((((((((((((((((((u4 == 1)))))))))))))))...");
  const std::string nots = std::string(33, '!') + "u4 == 1";
  EXPECT_NE(error_of(nots).find("nested too deep"), std::string::npos);
  EXPECT_EQ(error_of(std::string("name == \"a\0b\"", 13)),
            "--filter: a NUL byte in a string at column 9: name == \"a?b\"");
  EXPECT_EQ(error_of(std::string("u4 == 1 \0", 9)),
            "--filter: expected &&, || or the end at column 9: u4 == 1 ?");
  std::string many;
  for (int k = 0; k < 17; ++k)
    many += (k ? " || " : "") + std::string("u4 == ") + std::to_string(k);
  EXPECT_EQ(error_of(many).substr(0, 52), "--filter: too many terms: at most 16 predicates at c");
  std::string strings;
  for (int k = 0; k < 9; ++k) strings += (k ? " || " : "") + std::string("name == \"x\"");
  EXPECT_NE(error_of(strings).find("too many strings: at most 8"), std::string::npos);
  EXPECT_NE(
      error_of("name == \"" + std::string(64, 'x') + "\"").find("string of 64 bytes: at most 63"),
      std::string::npos);
  EXPECT_EQ(error_of("name == \"" + std::string(63, 'x') + "\""), "");
  EXPECT_NE(error_of("name ~ \"[a][b][c][d][e]*\"").find("too many [classes]: at most 4"),
            std::string::npos);
  EXPECT_NE(error_of("name ~ \"a?\x01\"").find("a control byte in a glob"), std::string::npos);
}

}  // namespace
}  // namespace stackmapd

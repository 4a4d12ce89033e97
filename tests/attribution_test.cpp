// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/attribution.h"

#include <gtest/gtest.h>

#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

TEST(KeySpec, ParsesInTheUsersOrder) {
  KeySpec k = KeySpec::parse("comm,pid");
  EXPECT_EQ(k.fields, (std::vector<KeyField>{KeyField::comm, KeyField::pid}));
  EXPECT_EQ(k.str(), "comm,pid");
  EXPECT_TRUE(k.has(KeyField::pid));
  EXPECT_FALSE(k.has(KeyField::tid));
  EXPECT_FALSE(k.empty());
  EXPECT_EQ(KeySpec::parse(" unit , cpu").str(), "unit,cpu") << "spaces around items";
  EXPECT_EQ(KeySpec::parse("pid,tid,comm,cgroup,unit,source,cpu").fields.size(), 7u);
  EXPECT_TRUE(KeySpec{}.empty());
}

TEST(KeySpec, KeyNamesRoundTrip) {
  for (auto f : {KeyField::pid, KeyField::tid, KeyField::comm, KeyField::cgroup, KeyField::unit,
                 KeyField::source, KeyField::cpu})
    EXPECT_EQ(KeySpec::parse(key_name(f)).fields, std::vector<KeyField>{f}) << key_name(f);
}

std::string error_of(std::string_view list) {
  try {
    KeySpec::parse(list);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(KeySpec, RejectsUnknownEmptyAndDuplicateKeysNamingTheFix) {
  const std::string fix = ": use a comma list of pid, tid, comm, cgroup, unit, source, cpu";
  EXPECT_EQ(error_of("pid,user"), "unknown --by key 'user'" + fix);
  EXPECT_EQ(error_of("PID"), "unknown --by key 'PID'" + fix);
  EXPECT_EQ(error_of("pid,,comm"), "empty --by key in 'pid,,comm'" + fix);
  EXPECT_EQ(error_of("pid,"), "empty --by key in 'pid,'" + fix);
  EXPECT_EQ(error_of(""), "empty --by key in ''" + fix);
  EXPECT_EQ(error_of("pid,comm,pid"), "--by key 'pid' given twice" + fix);
}

TEST(StringTable, InternsOnceAndZeroIsEmpty) {
  StringTable t;
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.str(0), "");
  EXPECT_EQ(t.intern(""), 0u);
  uint32_t a = t.intern("bash");
  uint32_t b = t.intern("sshd");
  EXPECT_NE(a, b);
  EXPECT_NE(a, 0u);
  EXPECT_EQ(t.intern(std::string("bash")), a);
  EXPECT_EQ(t.str(b), "sshd");
  EXPECT_EQ(t.size(), 3u);
}

TEST(StringTable, ReferencesSurviveGrowth) {
  StringTable t;
  const std::string& first = t.str(t.intern("a string longer than the small-string buffer"));
  for (int i = 0; i < 10000; ++i) t.intern("name" + std::to_string(i));
  EXPECT_EQ(first, "a string longer than the small-string buffer");
  EXPECT_EQ(t.intern("name9999"), 10001u) << "ids in order: \"\", the first, name0...";
  EXPECT_EQ(t.str(t.intern("name42")), "name42");
}

}  // namespace
}  // namespace stackmapd

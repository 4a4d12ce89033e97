// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/attribution.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

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

// The exports iterate the table and name no field: a field that lacks a
// column would be written wrong, or not at all, by one of them.
TEST(KeyFieldTable, EveryFieldHasEveryColumn) {
  std::set<std::string> names, attributes;
  size_t i = 0;
  for (const KeyFieldInfo& f : key_fields()) {
    ASSERT_TRUE(f.name && *f.name) << "field " << i;
    SCOPED_TRACE(f.name);
    EXPECT_EQ(static_cast<size_t>(f.field), i++) << "in KeyField's order";
    EXPECT_EQ(&key_field(f.field), &f);
    EXPECT_TRUE(names.insert(f.name).second) << "a second field named so";
    ASSERT_TRUE(f.otlp_attribute && *f.otlp_attribute);
    EXPECT_TRUE(attributes.insert(f.otlp_attribute).second) << "a second field's attribute";
    EXPECT_TRUE(f.read && f.write && f.frame);
    EXPECT_NE(f.number == nullptr, f.text == nullptr) << "exactly one KeyValues member";
    EXPECT_EQ(f.numeric(), f.exported && f.imported) << "a number's exported form, both ways";
    EXPECT_EQ(f.numeric(), f.unit != KeyFieldInfo::Unit::none) << "a number's pprof unit";
    EXPECT_EQ(KeySpec::parse_exported(f.name).fields, std::vector<KeyField>{f.field});
    if (!f.frame) continue;
    KeyValues k;
    k.comm = k.cgroup = k.unit = k.source = "x";
    EXPECT_FALSE(f.frame(k).empty());
    if (!f.numeric() || !f.exported || !f.imported) continue;
    k.*f.number = 11;
    EXPECT_EQ(f.imported(f.exported(11)), 11u) << "the JSON export reads back";
    EXPECT_NE(f.frame(k), f.frame(KeyValues{})) << "the frame shows the value";
  }
  EXPECT_EQ(i, static_cast<size_t>(KeyField::bucket) + 1);
}

// --hist's bucket: a histogram's line as a frame, its lowest value in the
// JSON and pprof, which count it in the weight's unit; OTLP's attribute
// holds the bucket.
TEST(KeyFieldTable, BucketIsWrittenAsItsLowestValueInTheWeightsUnit) {
  const KeyFieldInfo& b = key_field(KeyField::bucket);
  KeyValues k;
  k.bucket = 11;
  EXPECT_EQ(b.frame(k), "[1K, 2K)");
  EXPECT_EQ(b.exported(11), 1024u);
  EXPECT_EQ(b.imported(1500), 11u);
  EXPECT_EQ(b.label_unit("nanoseconds"), "nanoseconds");
  EXPECT_TRUE(b.hist_buckets);
  EXPECT_STREQ(b.otlp_attribute, "stackmapd.hist_bucket");
  EXPECT_EQ(key_field(KeyField::pid).label_unit("nanoseconds"), "pid");
  EXPECT_EQ(key_field(KeyField::comm).label_unit("nanoseconds"), "");
  EXPECT_EQ(key_field(KeyField::unit).frame(KeyValues{}), "[no unit]");
  EXPECT_EQ(KeySpec::parse_exported("pid,bucket").fields,
            (std::vector<KeyField>{KeyField::pid, KeyField::bucket}));
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

// SPDX-License-Identifier: GPL-2.0
// Tracepoint formats (real ones copied from a 6.18 kernel into
// tests/fixtures/event_format/), --sum's field checks, and -e globs against a
// fake events directory; EventFormatRoot reads the running kernel's tracefs.
#include "daemon/source/event_format.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "daemon/sys/error.h"
#include "stackmapd/abi.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string fixture(const std::string& name) {
  const std::string path =
      std::string(STACKMAPD_FIXTURES_DIR) + "/event_format/" + name + ".format";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing fixture " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

EventFormat parsed(const std::string& name) { return parse_event_format(fixture(name)); }

std::vector<std::string> names_of(const std::vector<Tracepoint>& tps) {
  std::vector<std::string> out;
  for (const auto& tp : tps) out.push_back(tp.str());
  return out;
}

constexpr const char* kHeader = "name: e\nID: 7\nformat:\n";

TEST(EventFormat, ReadsOffsetsSizesAndSignedness) {
  const EventFormat f = parsed("kmem_cache_alloc");
  EXPECT_EQ(f.name, "kmem_cache_alloc");
  EXPECT_EQ(f.id, 659u);
  EXPECT_EQ(f.system, "");  // the text does not say; read_event_format sets it
  std::vector<std::string> names;
  for (const auto& field : f.fields) names.push_back(field.name);
  EXPECT_EQ(names, (std::vector<std::string>{"call_site", "ptr", "name", "bytes_req", "bytes_alloc",
                                             "gfp_flags", "node", "accounted"}));
  const EventField* b = f.find("bytes_alloc");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, "size_t");
  EXPECT_EQ(b->offset, 40u);
  EXPECT_EQ(b->size, 8u);
  EXPECT_FALSE(b->is_signed);
  const EventField* node = f.find("node");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->type, "int");
  EXPECT_EQ(node->offset, 56u);
  EXPECT_EQ(node->size, 4u);
  EXPECT_TRUE(node->is_signed);
  EXPECT_EQ(f.find("accounted")->size, 1u);
  EXPECT_EQ(f.find("name")->type, "__data_loc char[]");
  EXPECT_EQ(f.find("name")->offset, 24u);
  EXPECT_EQ(f.find("ptr")->type, "const void *");
  // kmalloc has the same fields at other offsets.
  EXPECT_EQ(parsed("kmalloc").find("bytes_alloc")->offset, 32u);
}

TEST(EventFormat, ArraysKeepTheirBoundsInTheType) {
  const EventFormat s = parsed("sched_switch");
  EXPECT_EQ(s.id, 372u);
  EXPECT_EQ(s.find("prev_comm")->type, "char[16]");
  EXPECT_EQ(s.find("prev_comm")->size, 16u);
  EXPECT_EQ(s.find("next_comm")->offset, 40u);
  EXPECT_EQ(s.find("prev_pid")->type, "pid_t");
  EXPECT_EQ(s.find("prev_state")->type, "long");
  const EventFormat p = parsed("print");
  EXPECT_EQ(p.find("buf")->type, "char[]");
  EXPECT_EQ(p.find("buf")->size, 0u);
  EXPECT_EQ(parsed("irq_handler_entry").find("name")->type, "__data_loc char[]");
}

TEST(EventFormat, SizeIsTheRecordsNotTheTypes) {
  // Syscall arguments are 8 bytes in the record whatever their C type.
  const EventFormat f = parsed("sys_enter_openat");
  EXPECT_EQ(f.find("dfd")->type, "int");
  EXPECT_EQ(f.find("dfd")->size, 8u);
  EXPECT_EQ(f.find("filename")->type, "const char *");
  EXPECT_EQ(f.find("__syscall_nr")->size, 4u);
}

TEST(EventFormat, FindSkipsTheCommonFields) {
  const EventFormat f = parsed("kfree");
  EXPECT_EQ(f.fields.size(), 2u);
  EXPECT_EQ(f.find("call_site"), &f.fields[0]);
  EXPECT_EQ(f.find("ptr"), &f.fields[1]);
  EXPECT_EQ(f.find("common_pid"), nullptr);
  EXPECT_EQ(f.find("bytes_alloc"), nullptr);
  EXPECT_EQ(f.find("call_sit"), nullptr);
}

TEST(EventFormat, NumericMeansAnIntegerOfOneTwoFourOrEightBytes) {
  const EventFormat k = parsed("kmem_cache_alloc");
  for (const char* yes :
       {"call_site", "bytes_req", "bytes_alloc", "gfp_flags", "node", "accounted"})
    EXPECT_TRUE(k.find(yes)->numeric()) << yes;
  for (const char* no : {"ptr", "name"}) EXPECT_FALSE(k.find(no)->numeric()) << no;
  const EventFormat s = parsed("sched_switch");
  EXPECT_FALSE(s.find("prev_comm")->numeric());
  EXPECT_TRUE(s.find("prev_pid")->numeric());
  EXPECT_FALSE(parsed("sys_enter_openat").find("filename")->numeric());
  EXPECT_FALSE(parsed("print").find("buf")->numeric());
  EXPECT_TRUE(parsed("sys_enter_openat").find("flags")->numeric());
  for (uint32_t size : {1u, 2u, 4u, 8u}) EXPECT_TRUE((EventField{"x", "u64", 0, size}.numeric()));
  for (uint32_t size : {0u, 3u, 16u}) EXPECT_FALSE((EventField{"x", "u64", 0, size}.numeric()));
  EXPECT_FALSE((EventField{"x", "u8[8]", 0, 8}.numeric()));
  EXPECT_FALSE((EventField{"x", "struct pair", 0, 8}.numeric()));
  EXPECT_FALSE((EventField{"x", "union bits", 0, 4}.numeric()));
  EXPECT_FALSE((EventField{"x", "__rel_loc char[]", 0, 4}.numeric()));
}

TEST(EventFormat, OlderAndOddLinesParse) {
  // Kernels before 2.6.31 wrote no signed:; print fmt may span lines of C.
  const EventFormat f = parse_event_format(std::string(kHeader) +
                                           "\tfield:unsigned long long  v ;\toffset:8;\tsize:8;\n"
                                           "\nprint fmt: \"v=%llu\n\", REC->v\nfield: junk\n");
  ASSERT_EQ(f.fields.size(), 1u);
  EXPECT_EQ(f.fields[0].name, "v");
  EXPECT_EQ(f.fields[0].type, "unsigned long long");
  EXPECT_FALSE(f.fields[0].is_signed);
  // Events may have no fields of their own.
  EXPECT_EQ(parse_event_format(kHeader).fields.size(), 0u);
}

TEST(EventFormat, UnparsableTextIsRefusedNamingWhat) {
  const std::string h = kHeader;
  const std::pair<std::string, std::string> cases[] = {
      {"", "not a tracepoint format: no 'name:' line"},
      {"name: e\nformat:\n", "not a tracepoint format: no 'ID:' line"},
      {"name: e\nID: 7\n", "not a tracepoint format: no 'format:' line"},
      {"name: e\nID: seven\nformat:\n", "bad number 'seven' in tracepoint format line 'ID: seven'"},
      {"name: e\nbogus\n", "unexpected line 'bogus' before a tracepoint's format:"},
      {h + "\tbogus;\n", "unexpected line 'bogus;' among a tracepoint's fields"},
      {h + "\tfield:int x;\tsize:4;\n",
       "no offset: or size: in tracepoint format line 'field:int x;\tsize:4;'"},
      {h + "\tfield:int x;\toffset:8;\n",
       "no offset: or size: in tracepoint format line 'field:int x;\toffset:8;'"},
      {h + "\tfield:int x;\toffset:8x;\tsize:4;\n",
       "bad number '8x' in tracepoint format line 'field:int x;\toffset:8x;\tsize:4;'"},
      {h + "\tfield:int x;\toffset:8;\tsize:4\n",
       "no ';' after 'size:4' in tracepoint format line 'field:int x;\toffset:8;\tsize:4'"},
      {h + "\tfield:x;\toffset:8;\tsize:4;\n",
       "cannot tell the type from the name in tracepoint format line "
       "'field:x;\toffset:8;\tsize:4;'"},
      {h + "\tfield:int *;\toffset:8;\tsize:8;\n",
       "cannot tell the type from the name in tracepoint format line 'field:int "
       "*;\toffset:8;\tsize:8;'"},
      {h + "\tfield:int x];\toffset:8;\tsize:4;\n",
       "cannot tell the type from the name in tracepoint format line 'field:int "
       "x];\toffset:8;\tsize:4;'"},
  };
  for (const auto& [text, message] : cases)
    EXPECT_EQ(error_of([&] { parse_event_format(text); }), message) << text;
}

TEST(EventFormat, TraceRawLenEndsAtTheLastFieldOrTakesTheMaxForDynamicData) {
  EXPECT_EQ(trace_raw_len(parsed("sched_switch")), 64u);
  EXPECT_EQ(trace_raw_len(parsed("kmem_cache_alloc")), uint32_t{SMT_TRACE_RAW_MAX});  // __data_loc
  EXPECT_EQ(trace_raw_len(parse_event_format(kHeader)), 8u);  // the common fields alone
}

TEST(EventFormat, WeightFieldNamesTheFieldsThereAre) {
  EventFormat kmalloc = parsed("kmalloc");
  kmalloc.system = "kmem";
  EXPECT_EQ(error_of([&] { weight_field(kmalloc, "size", "--hist "); }),
            "--hist size: kmem:kmalloc has no field 'size': numeric fields are call_site, "
            "bytes_req, bytes_alloc, gfp_flags, node");
  EventFormat kfree = parsed("kfree");
  kfree.system = "kmem";
  EXPECT_EQ(
      error_of([&] { weight_field(kfree, "bytes_alloc"); }),
      "--sum bytes_alloc: kmem:kfree has no field 'bytes_alloc': numeric fields are call_site");
  // A pointer is an 8-byte integer in the record, but no quantity.
  EXPECT_EQ(error_of([&] { weight_field(kfree, "ptr"); }),
            "--sum ptr: kmem:kfree field 'ptr' is const void *, not a number: numeric fields are "
            "call_site");
  EventFormat sw = parsed("sched_switch");
  sw.system = "sched";
  EXPECT_EQ(
      error_of([&] { weight_field(sw, "prev_comm"); }),
      "--sum prev_comm: sched:sched_switch field 'prev_comm' is char[16], not a number: numeric "
      "fields are "
      "prev_pid, prev_prio, prev_state, next_pid, next_prio");
  EventFormat bare = parse_event_format(kHeader);
  EXPECT_EQ(error_of([&] { weight_field(bare, "x"); }),
            "--sum x: e has no field 'x': it has no fields of its own");
  EventFormat print = parsed("print");
  print.system = "ftrace";
  print.fields.erase(print.fields.begin());  // buf alone
  EXPECT_EQ(
      error_of([&] { weight_field(print, "buf"); }),
      "--sum buf: ftrace:print field 'buf' is char[], not a number: it has no numeric fields");
  const EventField b = weight_field(parsed("kmem_cache_alloc"), "bytes_alloc");
  EXPECT_EQ(b.name, "bytes_alloc");
  EXPECT_EQ(b.offset, 40u);
  EXPECT_EQ(b.size, 8u);
}

// A fake tracefs: <dir>/events/<category>/<event>/{id,format}.
class EventFormatGlobs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("stackmapd-events-" + std::to_string(getpid()));
    fs::remove_all(root_);
    events_ = (root_ / "events").string();
    for (const char* e : {"kfree", "kmalloc", "kmem_cache_alloc", "kmem_cache_free"})
      add("kmem", e);
    for (const char* e : {"sched_switch", "sched_wakeup", "sched_waking"}) add("sched", e);
    add("ftrace", "function");
    fs::create_directories(root_ / "events/ftrace/bprint");  // no id: nothing can attach to it
    std::ofstream(root_ / "events/sched/enable") << "0\n";
    std::ofstream(root_ / "events/header_page") << "\n";
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(log_);
    sink->set_pattern("%l|%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  void TearDown() override {
    spdlog::set_default_logger(previous_);
    fs::remove_all(root_);
  }
  void add(const std::string& category, const std::string& event, const std::string& format = "") {
    fs::create_directories(fs::path(events_) / category / event);
    std::ofstream(fs::path(events_) / category / event / "id") << "1\n";
    if (!format.empty()) std::ofstream(fs::path(events_) / category / event / "format") << format;
  }
  std::vector<std::string> resolve(const std::vector<std::string>& specs) {
    std::vector<Tracepoint> tps;
    for (const auto& s : specs) tps.push_back(Tracepoint::parse(s));
    return names_of(resolve_events(tps, events_));
  }
  std::string resolve_error(const std::vector<std::string>& specs) {
    return error_of([&] { resolve(specs); });
  }

  fs::path root_;
  std::string events_;
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> previous_;
};

using V = std::vector<std::string>;

TEST_F(EventFormatGlobs, SpecsAcceptGlobsInBothParts) {
  for (const char* spec : {"kmem:*", "*:kfree", "sched:sched_*", "[ks]*:k?ee", "*:*"}) {
    const Tracepoint tp = Tracepoint::parse(spec);
    EXPECT_EQ(tp.str(), spec);
  }
}

TEST_F(EventFormatGlobs, ExpandSorted) {
  EXPECT_EQ(resolve({"kmem:*"}),
            (V{"kmem:kfree", "kmem:kmalloc", "kmem:kmem_cache_alloc", "kmem:kmem_cache_free"}));
  EXPECT_EQ(resolve({"sched:sched_w*"}), (V{"sched:sched_wakeup", "sched:sched_waking"}));
  EXPECT_EQ(resolve({"*:kfree"}), (V{"kmem:kfree"}));
  EXPECT_EQ(resolve({"s*:*_switch"}), (V{"sched:sched_switch"}));
  EXPECT_EQ(resolve({"kmem:kmem_cache_????"}), (V{"kmem:kmem_cache_free"}));
  EXPECT_EQ(resolve({"[fk]*:[fk]*"}), (V{"ftrace:function", "kmem:kfree", "kmem:kmalloc",
                                         "kmem:kmem_cache_alloc", "kmem:kmem_cache_free"}));
  // Only event directories with an id: not ftrace/bprint, sched/enable, header_page.
  EXPECT_EQ(resolve({"*:*"}).size(), 8u);
  EXPECT_EQ(resolve({"ftrace:*"}), (V{"ftrace:function"}));
}

TEST_F(EventFormatGlobs, KeepOrderAndDropDuplicates) {
  EXPECT_EQ(resolve({"sched:sched_switch", "kmem:*", "kmem:kfree", "sched:*", "kmem:kmalloc"}),
            (V{"sched:sched_switch", "kmem:kfree", "kmem:kmalloc", "kmem:kmem_cache_alloc",
               "kmem:kmem_cache_free", "sched:sched_wakeup", "sched:sched_waking"}));
  EXPECT_EQ(resolve({"kmem:kfree", "kmem:kfree"}), (V{"kmem:kfree"}));
}

TEST_F(EventFormatGlobs, LogWhatTheyMatched) {
  resolve({"kmem:kmem_cache_*", "kmem:kfree"});
  EXPECT_EQ(log_.str(),
            "info|-e kmem:kmem_cache_* matched 2 tracepoints: kmem:kmem_cache_alloc, "
            "kmem:kmem_cache_free\n");  // exact specs are not logged
  // A glob matching only what is already there still says what it matched.
  log_.str("");
  resolve({"kmem:kfree", "*:kfree"});
  EXPECT_EQ(log_.str(), "info|-e *:kfree matched 1 tracepoint: kmem:kfree\n");
}

TEST_F(EventFormatGlobs, NoMatchAndMissingNameTheFix) {
  const std::string available = root_.string() + "/available_events";
  EXPECT_EQ(resolve_error({"kmem:nope*"}),
            "-e 'kmem:nope*' matches no tracepoint: pick from " + available);
  EXPECT_EQ(resolve_error({"nope*:kfree"}),
            "-e 'nope*:kfree' matches no tracepoint: pick from " + available);
  EXPECT_EQ(resolve_error({"ftrace:bprint*"}),
            "-e 'ftrace:bprint*' matches no tracepoint: pick from " + available);
  EXPECT_EQ(resolve_error({"kmem:*", "kmem:no_such_event"}),
            "no such tracepoint 'kmem:no_such_event' (nothing at " + events_ +
                "/kmem/no_such_event): pick one from " + available);
  EXPECT_NE(resolve_error({"ftrace:bprint"}).find("no such tracepoint 'ftrace:bprint'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              resolve_events({{"kmem", "kfree"}}, "/nonexistent/events");
            }).find("no such tracepoint 'kmem:kfree'"),
            std::string::npos);
}

TEST_F(EventFormatGlobs, AreBoundedAt256) {
  for (int i = 0; i < 255; ++i) add("many", "e" + std::to_string(i));
  EXPECT_EQ(resolve({"many:*", "kmem:kfree"}).size(), 256u);  // 255 + 1 exact: within
  EXPECT_EQ(resolve({"many:*", "*:kfree"}).size(), 256u);     // 256 from globs: within
  const std::string log = log_.str();
  EXPECT_NE(log.find("info|-e many:* matched 255 tracepoints: many:e0, many:e1, many:e10, "),
            std::string::npos)
      << log;
  const std::string first_line = log.substr(0, log.find('\n'));
  EXPECT_EQ(first_line.substr(first_line.size() - 5), ", ...");
  EXPECT_LT(first_line.size(), 200u + 60u);
  EXPECT_EQ(resolve_error({"many:*", "kmem:k*"}),
            "-e 'kmem:k*' brings the tracepoints matched by globs to 259, more than 256: "
            "narrow the glob");
  add("many", "e255");
  // Exact specs do not count towards the bound, wherever they stand.
  EXPECT_EQ(resolve({"kmem:kfree", "many:*"}).size(), 257u);
  add("many", "e256");
  EXPECT_EQ(resolve_error({"many:*"}),
            "-e 'many:*' brings the tracepoints matched by globs to 257, more than 256: "
            "narrow the glob");
}

TEST_F(EventFormatGlobs, ReadNamesTheFile) {
  add("kmem", "kmalloc", fixture("kmalloc"));
  const EventFormat f = read_event_format(events_, {"kmem", "kmalloc"});
  EXPECT_EQ(f.system, "kmem");
  EXPECT_EQ(f.name, "kmalloc");
  EXPECT_EQ(f.id, 658u);
  EXPECT_EQ(f.find("bytes_alloc")->offset, 32u);
  EXPECT_EQ(
      error_of([&] {
        read_event_format(events_, {"kmem", "nope"});
      }),
      "cannot read " + events_ + "/kmem/nope/format: is the tracepoint there and are you root?");
  add("kmem", "broken", "name: broken\nformat:\n");
  EXPECT_EQ(
      error_of([&] {
        read_event_format(events_, {"kmem", "broken"});
      }),
      "cannot parse " + events_ + "/kmem/broken/format: not a tracepoint format: no 'ID:' line");
}

// Every format file of the running kernel (root: tracefs is root's).
TEST(EventFormatRoot, ParsesEveryFormatFileOfTheRunningKernel) {
  const std::string events = "/sys/kernel/tracing/events";
  ASSERT_TRUE(fs::is_directory(events)) << "tracefs is not mounted at /sys/kernel/tracing";
  size_t files = 0, fields = 0, numeric = 0;
  for (const auto& category : fs::directory_iterator(events)) {
    if (!category.is_directory()) continue;
    for (const auto& event : fs::directory_iterator(category.path())) {
      if (!fs::exists(event.path() / "format")) continue;
      const Tracepoint tp{category.path().filename().string(), event.path().filename().string()};
      EventFormat f;
      try {
        f = read_event_format(events, tp);
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      ++files;
      EXPECT_EQ(f.name, tp.name);
      if (std::ifstream id{event.path() / "id"}) {
        uint32_t n = 0;
        id >> n;
        EXPECT_EQ(f.id, n) << tp.str();
      }
      // Nothing skipped: one field per field: line that is not a common_ one.
      std::ifstream in(event.path() / "format");
      size_t own_lines = 0;
      for (std::string line; std::getline(in, line) && line.rfind("print fmt:", 0) != 0;)
        own_lines +=
            line.find("field:") != std::string::npos && line.find(" common_") == std::string::npos;
      EXPECT_EQ(f.fields.size(), own_lines) << tp.str();
      for (const auto& field : f.fields) {
        EXPECT_FALSE(field.name.empty()) << tp.str();
        EXPECT_FALSE(field.type.empty()) << tp.str();
        numeric += field.numeric();
      }
      fields += f.fields.size();
    }
  }
  EXPECT_GT(files, 100u);
  EXPECT_GT(numeric, fields / 2);
  const EventFormat k = read_event_format(events, {"kmem", "kmem_cache_alloc"});
  EXPECT_EQ(weight_field(k, "bytes_alloc").size, 8u);
  EXPECT_EQ(resolve_events({{"kmem", "kmem_cache_*"}}, events).front().str(),
            "kmem:kmem_cache_alloc");
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// libbpf's messages through our logger: whole (the verifier prints its whole
// log in one call, and the line that says why a load failed comes last),
// warnings kept without -v, debug only with it.
#include "daemon/sys/logging.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <memory>
#include <sstream>
#include <string>

namespace stackmapd {
namespace {

// What libbpf does: call the print callback with a va_list.
int print(libbpf_print_level level, const char* format, ...) {
  va_list args;
  va_start(args, format);
  const int n = libbpf_print(level, format, args);
  va_end(args);
  return n;
}

class LibbpfLog : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out_);
    sink->set_pattern("%l|%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
    set_verbose(false);
  }
  void TearDown() override {
    spdlog::set_default_logger(previous_);
    set_verbose(false);
  }
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// With -v, as a user reading why a load failed runs it; the last line is the reason.
TEST_F(LibbpfLog, VerifierLogArrivesWhole) {
  set_verbose(true);
  std::string log;
  for (int i = 0; log.size() < 6000; ++i) log += std::to_string(i) + ": r1 = *(u64 *)(r10 -8)\n";
  log += "R1 invalid mem access 'scalar'\n";
  const int n =
      print(LIBBPF_WARN, "libbpf: prog 'on_event': -- BEGIN PROG LOAD LOG --\n%s-- END --\n",
            log.c_str());
  const std::string want =
      "warning|libbpf: prog 'on_event': -- BEGIN PROG LOAD LOG --\n" + log + "-- END --\n";
  EXPECT_EQ(out_.str(), want);
  EXPECT_EQ(n, static_cast<int>(want.size() - std::string("warning|").size()));
}

TEST_F(LibbpfLog, WarningsAndInfoWithoutVerboseDebugDropped) {
  print(LIBBPF_WARN, "libbpf: failed to load %s: %d\n", "object", -22);
  print(LIBBPF_INFO, "libbpf: %s\n", "info line");
  print(LIBBPF_DEBUG, "libbpf: %s\n", "debug line");
  EXPECT_EQ(out_.str(), "warning|libbpf: failed to load object: -22\ninfo|libbpf: info line\n");
}

TEST_F(LibbpfLog, DebugWithVerbose) {
  set_verbose(true);
  print(LIBBPF_DEBUG, "libbpf: %s\n", "debug line");
  EXPECT_EQ(out_.str(), "debug|libbpf: debug line\n");
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The traits each option of the foreground's command line is declared with
// (trace_options.h), and what they decide from the options given: whether
// `--top N` is the running daemon's to answer, what --backend tracefs refuses.
#include "daemon/run/trace_options.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace stackmapd {
namespace {

// The foreground's options, parsed from `line` as main() parses them.
struct Line {
  explicit Line(const std::string& line) {
    add_trace_options(table, args);
    app.parse(line, false);
  }
  CLI::App app;
  OptionTable table{app};
  TraceArgs args;
};

bool shapes(const OptionTable& t, const std::string& name) {
  return t.traits(name).role == OptionRole::shapes;
}

TEST(TraceOptions, EveryOptionHasTraits) {
  Line line("");
  EXPECT_NO_THROW(line.table.check_complete());
  line.app.add_option("--new", line.args.output, "declared without traits");
  EXPECT_THROW(line.table.check_complete(), std::logic_error);
}

TEST(TraceOptions, WhatShapesTheRecording) {
  Line line("");
  for (const char* name : {"--user-stacks", "--verify", "--bits", "--pinned", "--ringbuf-kb",
                           "--user-unwind", "--max-keys", "-e", "--filter", "--duration", "--pid"})
    EXPECT_TRUE(shapes(line.table, name)) << name;
  for (const char* name : {"--top", "--socket", "--backend", "--output", "--folded", "--svg",
                           "--pprof", "--otlp", "--trace", "--perfetto"})
    EXPECT_FALSE(shapes(line.table, name)) << name;
}

TEST(TraceOptions, TopAloneIsTheDaemonsToAnswer) {
  EXPECT_TRUE(daemon_can_answer(Line("--top 3").table));
  EXPECT_TRUE(daemon_can_answer(Line("--top 3 --socket /tmp/s --backend auto").table));
  for (const char* line :
       {"--top 3 --user-stacks", "--top 3 --verify 10", "--top 3 --bits 12",
        "--top 3 --pinned /sys/fs/bpf/x", "--top 3 --duration 2", "--top 3 --folded -",
        "--top 3 --output /tmp/o", "--top 3 --hist", "--top 3 -e sched:sched_switch"})
    EXPECT_FALSE(daemon_can_answer(Line(line).table)) << line;
}

TEST(TraceOptions, TracefsRefusesTheBpfOptionsGiven) {
  EXPECT_TRUE(bpf_options_given(Line("--backend tracefs -e kmem:kfree --bits 12 --filter x "
                                     "--duration 1 --output /tmp/o --folded - --top 3")
                                    .table)
                  .empty());
  const auto given = bpf_options_given(
      Line("--backend tracefs --user-stacks --pid 1 --top 3 --ringbuf-kb 64 --trace -").table);
  EXPECT_EQ(name_list(given), "--pid, --ringbuf-kb, --user-stacks and --trace");
}

TEST(TraceOptions, NameList) {
  EXPECT_EQ(name_list({"--a"}), "--a");
  EXPECT_EQ(name_list({"--a", "--b"}), "--a and --b");
  EXPECT_EQ(name_list({"--a", "--b", "--c"}), "--a, --b and --c");
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The output plan (output_plan.h): the registry's order whatever the order
// of the options, a failure told without stopping the outputs after it, and
// the export directory's set taken from the registry.
#include "daemon/export/output_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/export/exports.h"
#include "tests/snapshot_outputs.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

Snapshot two_stacks() {
  Snapshot s;
  s.stacks = {{7, 3, {0x10, 0x20}}, {9, 5, {0x30}}};
  intern_callstacks(s);
  return s;
}

TEST(OutputPlan, WritesInTheRegistrysOrderWhateverTheOrderOfTheOptions) {
  const Snapshot snap = two_stacks();
  OutputPlan plan;
  plan.add(OutputKind::stacks_json);
  plan.add(OutputKind::text);
  plan.add(OutputKind::folded, "-");
  OutputContext ctx(snap, nullptr);
  std::ostringstream out;
  plan.write(ctx, out);
  EXPECT_EQ(out.str(), format_folded(ctx.flame()) + stack_map_of(snap.stacks, nullptr) +
                           stacks_json_of(snap.stacks, nullptr));
}

TEST(OutputPlan, AFailureIsToldAndTheOutputsAfterItAreStillWritten) {
  const Snapshot snap = two_stacks();
  OutputPlan plan;
  plan.add(OutputKind::pprof, "/nonexistent-dir/profile.pb.gz");
  plan.add(OutputKind::text);
  OutputContext ctx(snap, nullptr);
  std::ostringstream out;
  std::vector<std::string> failed;
  plan.write(ctx, out, [&](const char* label, const std::exception&) { failed.push_back(label); });
  EXPECT_EQ(failed, std::vector<std::string>{"--pprof"});
  EXPECT_EQ(out.str(), stack_map_of(snap.stacks, nullptr));
  EXPECT_THROW(plan.write(ctx, out), std::exception) << "without on_error the failure throws";
}

TEST(OutputPlan, TheExportDirectoryHoldsTheRegistrysFiles) {
  const fs::path dir = fs::temp_directory_path() / ("output-plan-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Snapshot snap = two_stacks();
  snap.kernel.release = "6.1.0-test";
  write_exports(dir.string(), snap, nullptr);
  std::vector<std::string> want, have;
  for (const OutputSpec& o : output_registry())
    if (o.dir_file) want.push_back(o.dir_file);
  for (const auto& e : fs::directory_iterator(dir)) have.push_back(e.path().filename().string());
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  EXPECT_EQ(have, want);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// -f's choice of fentry or kprobes per function (daemon/source/sources.h), over a
// tracefs directory of our own (its available_filter_functions) and this
// kernel's real BTF, for each kind of kernel by its ProbeSupport.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/source/sources.h"
#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

namespace fs = std::filesystem;

// vfs_read is in every kernel's BTF; the other is a module function's name,
// listed by ftrace as "name [module]" and in no BTF.
constexpr const char* kModuleFunction = "smt_test_module_read";

const ProbeSupport kBoth{};
const ProbeSupport kFentryOnly{"", "kprobes are off (test)"};
const ProbeSupport kKprobesOnly{"BPF tracing programs are refused (test)", ""};
const ProbeSupport kNeither{"BPF tracing programs are refused (test)", "kprobes are off (test)"};

class FunctionProbes : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("smt-probes-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "available_filter_functions") << "vfs_read\nvfs_readv\n"
                                                       << kModuleFunction << " [smt_test]\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  FunctionPlan resolve(std::vector<std::string> patterns, ProbeMechanism m,
                       const ProbeSupport& s) const {
    return resolve_functions(patterns, dir_.string(), m, s);
  }
  std::string error_of(std::vector<std::string> patterns, ProbeMechanism m,
                       const ProbeSupport& s) const {
    try {
      resolve(patterns, m, s);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

TEST_F(FunctionProbes, AutoTakesFentryForBtfFunctionsAndKprobesForTheRest) {
  const FunctionPlan plan =
      resolve({"vfs_read", "smt_test_module_*"}, ProbeMechanism::automatic, kBoth);
  ASSERT_EQ(plan.targets.size(), 2u);
  EXPECT_EQ(plan.targets[0], (FunctionTarget{"vfs_read", true, ""}));
  EXPECT_EQ(plan.targets[1], (FunctionTarget{kModuleFunction, false, "not in the kernel's BTF"}));
  EXPECT_FALSE(plan.targets[0].kprobe());
  EXPECT_TRUE(plan.targets[1].kprobe());
  EXPECT_TRUE(plan.kprobe_fallback);
}

TEST_F(FunctionProbes, WithoutKprobesAFunctionWithoutBtfIsNotTraceable) {
  EXPECT_NE(error_of({kModuleFunction}, ProbeMechanism::automatic, kFentryOnly)
                .find("no traceable kernel function 'smt_test_module_read'"),
            std::string::npos);
  const FunctionPlan plan = resolve({"*read*"}, ProbeMechanism::automatic, kFentryOnly);
  ASSERT_EQ(plan.targets.size(), 2u);  // vfs_read, vfs_readv: the module function left out
  EXPECT_FALSE(plan.kprobe_fallback);
}

TEST_F(FunctionProbes, AGlobOfOnlyUntraceableFunctionsIsAnError) {
  EXPECT_NE(error_of({"smt_*"}, ProbeMechanism::automatic, kFentryOnly)
                .find("no traceable kernel function matches 'smt_*'"),
            std::string::npos);
}

TEST_F(FunctionProbes, KernelWithoutFentryUsesKprobesSayingWhy) {
  const FunctionPlan plan = resolve({"vfs_rea*"}, ProbeMechanism::automatic, kKprobesOnly);
  ASSERT_EQ(plan.targets.size(), 2u);
  for (const auto& t : plan.targets) EXPECT_EQ(t.kprobe_because, kKprobesOnly.no_fentry);
  EXPECT_FALSE(plan.kprobe_fallback);
}

TEST_F(FunctionProbes, ForcedKprobesTakeEveryFunction) {
  const FunctionPlan plan = resolve({"vfs_read", kModuleFunction}, ProbeMechanism::kprobe, kBoth);
  ASSERT_EQ(plan.targets.size(), 2u);
  for (const auto& t : plan.targets) EXPECT_EQ(t.kprobe_because, "--probe-mechanism kprobe");
  EXPECT_FALSE(plan.kprobe_fallback);
}

TEST_F(FunctionProbes, ForcedFentryNeverFallsBack) {
  const FunctionPlan plan = resolve({"vfs_rea*"}, ProbeMechanism::fentry, kBoth);
  ASSERT_EQ(plan.targets.size(), 2u);
  for (const auto& t : plan.targets) EXPECT_FALSE(t.kprobe());
  EXPECT_FALSE(plan.kprobe_fallback);
  EXPECT_NE(error_of({kModuleFunction}, ProbeMechanism::fentry, kBoth).find("no traceable"),
            std::string::npos);
}

TEST_F(FunctionProbes, AMissingForcedMechanismIsOneLineNamingIt) {
  const std::string fentry = error_of({"vfs_read"}, ProbeMechanism::fentry, kKprobesOnly);
  EXPECT_EQ(fentry.rfind("--probe-mechanism fentry: " + kKprobesOnly.no_fentry, 0), 0u) << fentry;
  const std::string kprobe = error_of({"vfs_read"}, ProbeMechanism::kprobe, kFentryOnly);
  EXPECT_EQ(kprobe.rfind("--probe-mechanism kprobe: " + kFentryOnly.no_kprobes, 0), 0u) << kprobe;
}

TEST_F(FunctionProbes, AKernelWithNeitherIsOneLineNamingBothAndAFix) {
  const std::string e = error_of({"vfs_read"}, ProbeMechanism::automatic, kNeither);
  EXPECT_NE(e.find(kNeither.no_fentry), std::string::npos) << e;
  EXPECT_NE(e.find(kNeither.no_kprobes), std::string::npos) << e;
  EXPECT_NE(e.find("CONFIG_KPROBES=y"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST_F(FunctionProbes, WithoutFtraceListKprobesFindFunctionsInKallsyms) {
  fs::remove(dir_ / "available_filter_functions");
  const FunctionPlan plan = resolve({"vfs_read"}, ProbeMechanism::kprobe, kBoth);
  ASSERT_EQ(plan.targets.size(), 1u);
  EXPECT_TRUE(plan.targets[0].kprobe());
  EXPECT_NE(
      error_of({"smt_no_such_function"}, ProbeMechanism::kprobe, kBoth).find("/proc/kallsyms"),
      std::string::npos);
}

TEST(ProbeMechanismNames, ParsesTheThreeAndRefusesOthers) {
  EXPECT_EQ(parse_probe_mechanism("auto"), ProbeMechanism::automatic);
  EXPECT_EQ(parse_probe_mechanism("fentry"), ProbeMechanism::fentry);
  EXPECT_EQ(parse_probe_mechanism("kprobe"), ProbeMechanism::kprobe);
  EXPECT_THROW(parse_probe_mechanism("kprobes"), Error);
}

}  // namespace
}  // namespace stackmapd

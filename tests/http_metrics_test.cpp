// SPDX-License-Identifier: GPL-2.0
// The metrics text (daemon/http/metrics.h): exact lines for known counters,
// escaped labels, no process_* family without process figures. promtool
// lints the real output in tests/http_test.sh. The page: its counters and
// embedded assets (tests/page_test.sh drives it in Chromium).
#include <gtest/gtest.h>
#include <unistd.h>

#include "daemon/http/metrics.h"
#include "daemon/http/page.h"

namespace stackmapd::http {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

MetricsInput sample() {
  MetricsInput in;
  in.stats.counters[SMC_HITS] = 90;
  in.stats.counters[SMC_DROP_POOL_FULL] = 7;
  in.stats.counters[SMC_DROP_RINGBUF_FULL] = 3;
  in.stats.entries = 256;
  in.stats.pool_size = 1024;
  in.stats.table_size = 2048;
  in.stats.resets = 2;
  in.stats.events_total = 100;
  in.stats.verify_ok = 5;
  in.source_events = {{"kmem:kmem_cache_alloc", 60}, {"odd\"name\\", 30}};
  in.ring_used_bytes = 4096;
  in.ring_size_bytes = 16384;
  in.bpf_stats_enabled = true;
  in.programs = {{"tracepoint", 2500000000, 42}};
  return in;
}

TEST(HttpMetrics, CountersAsSeries) {
  std::string m = format_metrics(sample());
  EXPECT_TRUE(has_line(m, "# TYPE stackmapd_events_total counter")) << m;
  EXPECT_TRUE(has_line(m, "stackmapd_events_total 100"));
  EXPECT_TRUE(has_line(m, "stackmapd_hits_total 90"));
  EXPECT_TRUE(has_line(m, "stackmapd_drops_total{reason=\"pool_full\"} 7"));
  EXPECT_TRUE(has_line(m, "stackmapd_drops_total{reason=\"ringbuf_full\"} 3"));
  EXPECT_TRUE(has_line(m, "stackmapd_drops_total{reason=\"busy\"} 0"));
  EXPECT_TRUE(has_line(m, "stackmapd_source_events_total{source=\"kmem:kmem_cache_alloc\"} 60"));
  EXPECT_TRUE(has_line(m, "stackmapd_source_events_total{source=\"odd\\\"name\\\\\"} 30"));
  EXPECT_TRUE(has_line(m, "stackmapd_unique_stacks 256"));
  EXPECT_TRUE(has_line(m, "stackmapd_pool_fill_ratio 0.25"));
  EXPECT_TRUE(has_line(m, "stackmapd_resets_total 2"));
  EXPECT_TRUE(has_line(m, "stackmapd_verify_total{result=\"ok\"} 5"));
  EXPECT_TRUE(has_line(m, "stackmapd_ringbuf_fill_ratio 0.25"));
  EXPECT_TRUE(has_line(m, "stackmapd_bpf_stats_enabled 1"));
  EXPECT_TRUE(has_line(m, "stackmapd_bpf_program_run_seconds_total{program=\"tracepoint\"} 2.5"));
  EXPECT_TRUE(has_line(m, "stackmapd_bpf_program_runs_total{program=\"tracepoint\"} 42"));
  EXPECT_EQ(m.find("process_"), std::string::npos) << "no process figures given";
  EXPECT_EQ(m.find("stack_id"), std::string::npos);
}

// A --profile sample taken in user mode has no kernel stack: a series of its
// own, not a drop.
TEST(HttpMetrics, UserModeSamplesAreNoDrops) {
  MetricsInput in = sample();
  in.stats.counters[SMC_DROP_NO_KERNEL_STACK] = 11;
  std::string m = format_metrics(in);
  EXPECT_TRUE(has_line(m, "stackmapd_user_mode_samples_total 11")) << m;
  EXPECT_EQ(m.find("no_kernel_stack"), std::string::npos) << m;
}

// A label value that is not UTF-8 (the exposition format's must be) comes
// escaped as text (utf8_text.h), whose backslash the format escapes in turn.
TEST(HttpMetrics, LabelValuesAreUtf8) {
  MetricsInput in = sample();
  in.source_events.push_back({"\xff:x", 1});
  const std::string m = format_metrics(in);
  EXPECT_TRUE(has_line(m, "stackmapd_source_events_total{source=\"\\\\xff:x\"} 1")) << m;
}

TEST(HttpMetrics, FoldedPairsOnlyOnceFolded) {
  MetricsInput in = sample();
  EXPECT_EQ(format_metrics(in).find("stackmapd_key_pairs_folded_total"), std::string::npos);
  in.stats.key_pairs_folded = 3;
  const std::string m = format_metrics(in);
  EXPECT_TRUE(has_line(m, "# TYPE stackmapd_key_pairs_folded_total counter")) << m;
  EXPECT_TRUE(has_line(m, "stackmapd_key_pairs_folded_total 3")) << m;
}

TEST(HttpMetrics, EveryFamilyOnceWithHelpAndType) {
  MetricsInput in = sample();
  in.process = read_process_stats();
  std::string m = format_metrics(in);
  size_t helps = 0, types = 0;
  for (size_t p = 0; (p = m.find("# HELP ", p)) != std::string::npos; ++p) ++helps;
  for (size_t p = 0; (p = m.find("# TYPE ", p)) != std::string::npos; ++p) ++types;
  EXPECT_EQ(helps, types);
  EXPECT_NE(m.find("\nprocess_resident_memory_bytes "), std::string::npos);
  EXPECT_FALSE(has_line(m, "process_open_fds 0"));
  EXPECT_FALSE(has_line(m, "process_start_time_seconds 0"));
}

TEST(HttpMetrics, ProcessStatsOfThisProcess) {
  ProcessStats ps = read_process_stats();
  EXPECT_GT(ps.resident_bytes, 1u << 20);
  EXPECT_GE(ps.open_fds, 3u);
  EXPECT_GT(ps.max_fds, ps.open_fds);
  EXPECT_GT(ps.start_time_seconds, 1.6e9);
  EXPECT_LT(ps.start_time_seconds, static_cast<double>(time(nullptr)) + 1);
}

TEST(HttpPage, CountersInTheHtmlScriptAndStyleEmbedded) {
  TableStats st;
  st.counters[SMC_HITS] = 12;
  st.entries = 2;
  st.pool_size = 1024;
  PageOptions opt;
  opt.host = "box<1>";
  std::string page = render_page(st, opt);
  EXPECT_NE(page.find("<title>stackmapd on box&lt;1&gt;</title>"), std::string::npos);
  // The counters without JavaScript: the same names stack_map_stat prints.
  EXPECT_NE(page.find("<tr><th>entries</th><td>2 / 1024</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<tr><th>hits</th><td>12</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<body data-refresh=\"5\">"), std::string::npos);
  // The script and the style sheet are in the page, nothing is fetched elsewhere.
  EXPECT_NE(page.find("fetch('/flame.json?'"), std::string::npos);
  EXPECT_NE(page.find(".frame.match"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos) << "no external assets";
  EXPECT_EQ(page.find("http-equiv"), std::string::npos) << "updates in place, no reload";
  EXPECT_LT(page.size(), 300u * 1024) << "the page before its data";
  opt.refresh_seconds = 0;
  EXPECT_NE(render_page(st, opt).find("<body data-refresh=\"0\">"), std::string::npos);
}

}  // namespace
}  // namespace stackmapd::http

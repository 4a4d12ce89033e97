// SPDX-License-Identifier: GPL-2.0
// Reload's "same table?": the part of the session config fixed at load
// (TableConfig), compared whole, from the service's config.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/run/config.h"

namespace stackmapd {
namespace {

bool same_table(const DaemonConfig& a, const DaemonConfig& b) {
  return a.session().table() == b.session().table();
}

using Change = std::pair<const char*, std::function<void(DaemonConfig&)>>;

TEST(TableConfig, EveryTableDefiningOptionMakesAnotherTable) {
  const std::vector<Change> changes = {
      {"bits", [](DaemonConfig& c) { c.bits = 12; }},
      {"ringbuf-kb", [](DaemonConfig& c) { c.ringbuf_kb = 2048; }},
      {"verify", [](DaemonConfig& c) { c.verify = 100; }},
      {"pin-dir", [](DaemonConfig& c) { c.pin_dir = "/sys/fs/bpf/other"; }},
      {"pinned", [](DaemonConfig& c) { c.pinned = "/sys/fs/bpf/loader"; }},
      {"by", [](DaemonConfig& c) { c.by = "comm"; }},
      {"sum", [](DaemonConfig& c) { c.sum = "bytes_alloc"; }},
      {"offcpu", [](DaemonConfig& c) { c.offcpu = true; }},
      {"max-keys", [](DaemonConfig& c) { c.max_keys = 1000; }},
      {"user-stacks", [](DaemonConfig& c) { c.user_stacks = true; }},
  };
  const DaemonConfig base;
  for (const auto& [name, change] : changes) {
    DaemonConfig next = base;
    change(next);
    EXPECT_FALSE(same_table(base, next)) << name;
  }
  DaemonConfig offcpu = base;
  offcpu.offcpu = true;
  DaemonConfig longer = offcpu;
  longer.min_block_us = 100;
  EXPECT_FALSE(same_table(offcpu, longer)) << "min-block-us";
}

TEST(TableConfig, TheServiceOwnOptionsAndTheEventsKeepTheTable) {
  const std::vector<Change> changes = {
      {"snapshot-interval", [](DaemonConfig& c) { c.snapshot_interval = 60; }},
      {"event", [](DaemonConfig& c) { c.events.push_back("kmem:kmalloc"); }},
      {"listen", [](DaemonConfig& c) { c.listen = "9090"; }},
      {"history-max-kb", [](DaemonConfig& c) { c.history_max_kb = 1024; }},
      {"metrics-textfile", [](DaemonConfig& c) { c.metrics_textfile = "/tmp/m.prom"; }},
      {"keep-pins", [](DaemonConfig& c) { c.keep_pins = true; }},
  };
  const DaemonConfig base;
  for (const auto& [name, change] : changes) {
    DaemonConfig next = base;
    change(next);
    EXPECT_TRUE(same_table(base, next)) << name;
  }
}

}  // namespace
}  // namespace stackmapd

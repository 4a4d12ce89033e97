// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/config.h"

#include <grp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "daemon/export/exports.h"
#include "daemon/export/otlp.h"
#include "daemon/sys/error.h"
#include "daemon/sys/http_post.h"
#include "daemon/sys/listen_address.h"

namespace stackmapd {

namespace {

void add_daemon_options(CLI::App& app, DaemonConfig& c) {
  // Their traits serve the foreground; a reload compares the configs it derives (TableConfig's ==).
  OptionTable traits(app);
  add_session_options(traits, c, Command::daemon);
  app.add_option("--snapshot-interval", c.snapshot_interval, "Seconds between export refreshes")
      ->capture_default_str();
  app.add_option("--export-dir", c.export_dir, "Live exports, control socket and lock")
      ->capture_default_str();
  app.add_option("--export-group", c.export_group,
                 "Group that may read the exports and use the control socket (default: root only)");
  app.add_option("--pin-dir", c.pin_dir,
                 "bpffs directory that keeps the table across daemon restarts ('' disables)")
      ->capture_default_str();
  app.add_option("--keep-pins", c.keep_pins,
                 "Keep the pinned table on a clean stop, to continue it at the next start")
      ->capture_default_str();
  app.add_option("--history-max-kb", c.history_max_kb,
                 "Keep each timed snapshot's stack_map_bin in export-dir/history, oldest removed "
                 "beyond this many KiB (0: off)")
      ->capture_default_str();
  app.add_option("--listen", c.listen,
                 "Serve /, /metrics and /stack_map.json over HTTP on HOST:PORT (PORT alone: "
                 "loopback) or unix:/PATH (default: off)");
  app.add_option("--metrics-textfile", c.metrics_textfile,
                 "Write the Prometheus metrics to this file at every snapshot, for "
                 "node-exporter's textfile collector (default: off)");
  app.add_option("--otlp-endpoint", c.otlp_endpoint,
                 "Push OpenTelemetry profiles (OTLP/HTTP protobuf) to "
                 "http://HOST:PORT/v1development/profiles (default: off)");
  app.add_option("--otlp-interval", c.otlp_interval,
                 "Seconds between OpenTelemetry pushes, each the profile of that time")
      ->capture_default_str();
  app.add_option("--otlp-timeout", c.otlp_timeout,
                 "Seconds a push may take to connect, to send, and to be answered (each)")
      ->capture_default_str();
  app.add_option("--otlp-resources", c.otlp_resources,
                 "OpenTelemetry resources: one per process (its --by pid, comm, unit, cgroup), "
                 "the host's, or auto (process with --by pid, unit or cgroup)")
      ->capture_default_str();
}

}  // namespace

SessionConfig DaemonConfig::session() const {
  if (events.empty() && !offcpu)
    throw Error("no events configured: set event = [\"kmem:kmem_cache_alloc\"] or offcpu = true");
  SessionConfig s = session_config();
  if (!(snapshot_interval >= 0.1 && snapshot_interval <= 86400))
    throw Error("snapshot-interval " + std::to_string(snapshot_interval) +
                " is out of range: use 0.1 to 86400 seconds");
  if (export_dir.empty() || export_dir[0] != '/')
    throw Error("export-dir '" + export_dir + "' must be an absolute path");
  if (!listen.empty()) ListenAddress::parse(listen);
  if (!otlp_endpoint.empty()) HttpUrl::parse(otlp_endpoint, "otlp-endpoint");
  if (!(otlp_interval >= 1 && otlp_interval <= 86400))
    throw Error("otlp-interval " + std::to_string(otlp_interval) +
                " is out of range: use 1 to 86400 seconds");
  if (!(otlp_timeout >= 0.1 && otlp_timeout <= 600))
    throw Error("otlp-timeout " + std::to_string(otlp_timeout) +
                " is out of range: use 0.1 to 600 seconds");
  parse_otlp_resources(otlp_resources);
  if (!metrics_textfile.empty() && metrics_textfile[0] != '/')
    throw Error("metrics-textfile '" + metrics_textfile + "' must be an absolute path");
  // A loader's pins outlive the daemon already, and are the loader's to remove.
  s.pin_dir = pinned.empty() ? pin_dir : "";
  group_id();
  return s;
}

gid_t DaemonConfig::group_id() const {
  if (export_group.empty()) return kNoGroup;
  struct group* g = getgrnam(export_group.c_str());
  if (!g)
    throw Error("export-group '" + export_group +
                "' does not exist: create it (groupadd) or leave export-group unset");
  return g->gr_gid;
}

DaemonConfig parse_daemon_args(std::vector<std::string> args) {
  CLI::App parser{
      "stackmapd daemon: the service; options also go in the config file as key = value",
      "stackmapd daemon"};
  DaemonConfig config;
  add_daemon_options(parser, config);
  parser.set_config("--config", kDefaultConfig, "Config file (read if present)");
  parser.allow_config_extras(false);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    parser.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::cout << parser.help();
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    throw Error(std::string(e.what()) + ": fix the option or " +
                parser.get_option("--config")->as<std::string>());
  }
  config.config_path = parser.get_option("--config")->as<std::string>();
  config.session();
  return config;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The service's settings: the same options on the command line and in
// /etc/stackmapd/stackmapd.conf (CLI11's config-file format), re-read on reload.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "daemon/bpf/bpf_session.h"
#include "daemon/run/options.h"

namespace CLI {
class App;
}

namespace stackmapd {

inline constexpr const char* kDefaultConfig = "/etc/stackmapd/stackmapd.conf";
inline constexpr const char* kDefaultRuntimeDir = "/run/stackmapd";
inline constexpr const char* kDefaultPinDir = "/sys/fs/bpf/stackmapd";
inline constexpr const char* kControlSocket = "control.sock";

// The session's options (options.h: events, bits, ringbuf-kb, verify,
// pinned) and the service's own.
struct DaemonConfig : SessionOptions {
  DaemonConfig() { events = {"kmem:kmem_cache_alloc"}; }

  double snapshot_interval = 10;                // seconds between export refreshes
  std::string export_dir = kDefaultRuntimeDir;  // also holds the control socket and lock
  std::string export_group;              // may read exports and use the socket; empty: root only
  std::string pin_dir = kDefaultPinDir;  // empty: do not pin (the table dies with the daemon)
  bool keep_pins = false;                // keep the table across a clean stop and start
  uint64_t history_max_kb = 0;           // keep past stack_map_bin in export-dir/history; 0 = off
  std::string listen;                    // HTTP endpoints (daemon/run/http_endpoints.h); empty: off
  std::string metrics_textfile;          // Prometheus text rewritten at every snapshot; empty: off
  std::string otlp_endpoint;  // OpenTelemetry profiles pushed here (otlp_sender.h); empty: off
  double otlp_interval = 60;  // seconds between pushes
  double otlp_timeout = 10;   // seconds each of connect, send and response may take
  std::string otlp_resources = "auto";  // OtlpResources' word (otlp.h)
  std::string config_path = kDefaultConfig;

  // Checks every value; throws Error naming the bad one.
  SessionConfig session() const;
  gid_t group_id() const;  // kNoGroup when export_group is empty
};

// The arguments of `stackmapd daemon`: the config file (--config, default
// /etc/stackmapd/stackmapd.conf when it exists) with the options given beside
// it taking precedence. A reload parses the same arguments again, re-reading
// the file. Throws Error with one line; --help prints the options and exits.
DaemonConfig parse_daemon_args(std::vector<std::string> args);

}  // namespace stackmapd

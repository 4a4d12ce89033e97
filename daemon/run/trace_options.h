// SPDX-License-Identifier: GPL-2.0
// The foreground session's command line: the session's options (options.h)
// and what the foreground does with them (its outputs, --duration, --top, the
// backend), each declared with its traits (option_table.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "daemon/run/config.h"
#include "daemon/run/option_table.h"
#include "daemon/run/options.h"

namespace stackmapd {

// Catches a typo: --top -1 would wrap to 2^64 - 1. Past any table (2^20 stacks).
inline constexpr size_t kMaxTop = size_t{1} << 21;

struct TraceArgs : SessionOptions {
  std::string trace;
  std::string folded;
  std::string svg;
  std::string pprof;
  std::string otlp;
  std::string otlp_resources = "auto";
  std::string perfetto;
  std::optional<double> duration;
  std::string output;
  std::optional<size_t> top;
  std::string socket = std::string(kDefaultRuntimeDir) + "/" + kControlSocket;
  std::string backend = "auto";
  std::optional<std::vector<std::string>> command;  // -- CMD ARGS..., not a CLI11 option
};

// Adds the session's options and the foreground's own to table.app(), bound to `args`.
void add_trace_options(OptionTable& table, TraceArgs& args);

// Whether the running daemon's table can stand for the session the line asks
// for: no option given shapes the recording or asks for an output.
bool daemon_can_answer(const OptionTable& table);

// The options given that the tracefs backend has nothing like, by name.
std::vector<std::string> bpf_options_given(const OptionTable& table);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace stackmapd {

void setup_logging() {
  if (std::getenv("JOURNAL_STREAM"))
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "stackmapd", std::make_shared<spdlog::sinks::systemd_sink_mt>()));
  else spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));
  spdlog::set_pattern("stackmapd: %v");
  libbpf_set_print(libbpf_print);
}

void set_verbose(bool verbose) {
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
}

int libbpf_print(enum libbpf_print_level level, const char* format, va_list args) {
  const spdlog::level::level_enum to = level == LIBBPF_WARN   ? spdlog::level::warn
                                       : level == LIBBPF_INFO ? spdlog::level::info
                                                              : spdlog::level::debug;
  if (!spdlog::should_log(to)) return 0;  // no formatting for what is dropped
  // Formatted twice when it does not fit: a verifier log runs to many KiB.
  va_list again;
  va_copy(again, args);
  char small[512];
  const int n = vsnprintf(small, sizeof(small), format, args);
  std::string text;
  if (n >= 0 && static_cast<size_t>(n) < sizeof(small)) {
    text.assign(small, n);
  } else if (n > 0) {
    text.resize(static_cast<size_t>(n));
    vsnprintf(text.data(), text.size() + 1, format, again);
  }
  va_end(again);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty()) spdlog::log(to, "{}", text);
  return n;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include <spdlog/spdlog.h>

#include <charconv>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/run/service_impl.h"
#include "daemon/sys/error.h"

namespace stackmapd {

std::string Service::reset() {
  Snapshot ended = session_->reset();
  export_now();
  std::string msg = "reset: epoch " + std::to_string(session_->epoch() - 1) + " ended with " +
                    std::to_string(ended.stats.events()) + " events in " +
                    std::to_string(ended.stacks.size()) + " unique stacks";
  spdlog::info("{}", msg);
  return msg + "\n";
}

ControlReply Service::handle(const std::string& line) {
  try {
    if (line == "stat") {
      session_->drain(0);
      return {true, format_stat(session_->stats())};
    }
    if (line == "top" || line.rfind("top ", 0) == 0) {
      size_t n = 20;
      if (line.size() > 4) {
        const char* end = line.data() + line.size();
        auto [at, ec] = std::from_chars(line.data() + 4, end, n);  // no sign, no blanks
        if (ec != std::errc() || at != end || n == 0)
          return {false, "'" + line + "': give top a count of stacks, 1 or more"};
      }
      session_->drain(0);
      const Snapshot snap = session_->snapshot();
      return {true, format_top(snap, n, FrameNames(snap, symbols()))};
    }
    if (line == "reset") return {true, reset()};
    if (line == "snapshot") {
      export_now();
      return {true, "exports written to " + config_.export_dir + "\n"};
    }
    if (line == "reload") {
      try {
        std::string msg = reload();
        after_reload();
        return {true, msg};
      } catch (const Error& e) {
        after_reload();
        throw Error(std::string("reload failed, keeping the running configuration: ") + e.what());
      }
    }
    return {false, "unknown request '" + line + "': use stat, top N, reset, snapshot or reload"};
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", line, e.what());
    return {false, e.what()};
  }
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The control requests and the reset. What needs the session (the drain, the
// cut, the reset itself) is done on the loop; finishing a snapshot, naming
// its frames and writing files go to a worker, and the answer follows.
#include <spdlog/spdlog.h>

#include <charconv>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/run/service_impl.h"
#include "daemon/sys/error.h"

namespace stackmapd {

// The reply comes once the new epoch's exports are written.
void Service::reset(ControlServer::Respond done) {
  SnapshotCut ended = session_->reset();
  std::string msg = "reset: epoch " + std::to_string(session_->epoch() - 1) + " ended with " +
                    std::to_string(ended.snap.stats.events()) + " events in " +
                    std::to_string(ended.store.size()) + " unique stacks";
  spdlog::info("{}", msg);
  // Its copy of the table is freed off the loop.
  requests_.post([ended = std::make_shared<SnapshotCut>(std::move(ended))] {});
  post_export([msg = std::move(msg), done = std::move(done)](const std::string& error) {
    if (done) done(error.empty() ? ControlReply{true, msg + "\n"} : ControlReply{false, error});
  });
}

void Service::handle(const std::string& line, const ControlServer::Respond& respond) {
  try {
    if (line == "stat") {
      session_->drain(0);
      return respond({true, format_stat(session_->stats())});
    }
    if (line == "top" || line.rfind("top ", 0) == 0) {
      size_t n = 20;
      if (line.size() > 4) {
        const char* end = line.data() + line.size();
        auto [at, ec] = std::from_chars(line.data() + 4, end, n);  // no sign, no blanks
        if (ec != std::errc() || at != end || n == 0)
          return respond({false, "'" + line + "': give top a count of stacks, 1 or more"});
      }
      auto c = std::make_shared<SnapshotCut>(cut());
      auto text = std::make_shared<ControlReply>(ControlReply{true, ""});
      requests_.post(
          [c, n, text, ksyms = ksyms_] {
            try {
              const Snapshot snap = std::move(*c).finish();
              text->text = format_top(snap, n, FrameNames(snap, ksyms.get()));
            } catch (const std::exception& e) {
              *text = {false, e.what()};
            }
          },
          [text, respond] { respond(*text); });
      return;
    }
    if (line == "reset")
      return reset([respond](const ControlReply& r) {
        if (!r.ok) spdlog::error("reset: {}", r.text);
        respond(r);
      });
    if (line == "snapshot") {
      return post_export([respond, dir = config_.export_dir](const std::string& error) {
        if (!error.empty()) {
          spdlog::error("snapshot: {}", error);
          return respond({false, error});
        }
        respond({true, "exports written to " + dir + "\n"});
      });
    }
    if (line == "reload") {
      try {
        std::string msg = reload();
        after_reload();
        return respond({true, msg});
      } catch (const Error& e) {
        after_reload();
        throw Error(std::string("reload failed, keeping the running configuration: ") + e.what());
      }
    }
    respond({false, "unknown request '" + line + "': use stat, top N, reset, snapshot or reload"});
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", line, e.what());
    respond({false, e.what()});
  }
}

}  // namespace stackmapd

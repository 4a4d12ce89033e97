// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/shared_export.h"

#include <exception>
#include <utility>

namespace stackmapd {

SharedExport::SharedExport(Background& worker, Prepare prepare, Limits limits)
    : worker_(worker), prepare_(std::move(prepare)), limits_(limits) {}

bool SharedExport::get(Ready ready) {
  const auto now = EventLoop::Clock::now();
  if (body_ && !building_ && now - taken_ < limits_.fresh_for) {
    ready(body_, "");
    return true;
  }
  if (waiting_.size() >= limits_.max_waiting) return false;
  waiting_.push_back(std::move(ready));
  if (building_) return true;
  building_ = true;
  ++builds_;
  Build build;
  try {
    build = prepare_();
  } catch (const std::exception& e) {
    finish(nullptr, e.what());
    return true;
  }
  taken_ = now;
  // Written by the worker, read by the loop after Background's hand-over.
  struct Outcome {
    Body body;
    std::string error;
  };
  auto out = std::make_shared<Outcome>();
  worker_.post(
      [build = std::move(build), out] {
        try {
          out->body = std::make_shared<const std::string>(build());
        } catch (const std::exception& e) {
          out->error = e.what();
        }
      },
      [this, out] { finish(std::move(out->body), out->error); });
  return true;
}

void SharedExport::finish(Body body, const std::string& error) {
  building_ = false;
  if (body) body_ = body;
  std::vector<Ready> waiting = std::exchange(waiting_, {});
  for (auto& ready : waiting) ready(body, error);
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/shared_export.h"

#include <exception>
#include <utility>

namespace stackmapd {

SharedExport::SharedExport(TaskRunner& worker, Prepare prepare, std::chrono::milliseconds fresh_for)
    : worker_(worker), prepare_(std::move(prepare)), fresh_for_(fresh_for) {}

void SharedExport::get(Ready ready) {
  const auto now = EventLoop::Clock::now();
  if (body_ && !building_ && now - taken_ < fresh_for_) return ready(body_, "");
  waiting_.push_back(std::move(ready));
  if (building_) return;
  building_ = true;
  ++builds_;
  Build build;
  try {
    build = prepare_();
  } catch (const std::exception& e) {
    return finish(nullptr, e.what());
  }
  taken_ = now;
  // Written by the worker, read by the loop after the runner's hand-over.
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
}

void SharedExport::finish(Body body, const std::string& error) {
  building_ = false;
  if (body) body_ = body;
  std::vector<Ready> waiting = std::exchange(waiting_, {});
  for (auto& ready : waiting) ready(body, error);
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/exit_watch.h"

#include <algorithm>
#include <utility>

namespace stackmapd {

ExitWatch::ExitWatch(ProcessGone gone)
    : gone_(std::move(gone)),
      runner_(TaskRunner::Options("exit-watch").at_most(1, TaskRunner::Full::drop_oldest)) {}

void ExitWatch::check(std::vector<uint32_t> ids) {
  const size_t bytes = ids.size() * sizeof(uint32_t);
  runner_.post(
      [this, ids = std::move(ids)] {
        std::vector<uint32_t> gone;
        for (uint32_t id : ids) {
          if (stopping_) return;
          if (gone_(id)) gone.push_back(id);
        }
        if (gone.empty()) return;
        const std::lock_guard lock(mu_);
        found_.insert(found_.end(), gone.begin(), gone.end());
        // Release: take() that sees any_ sees found_ filled.
        any_.store(true, std::memory_order_release);
      },
      bytes);
}

std::vector<uint32_t> ExitWatch::take() {
  if (!any_.load(std::memory_order_acquire)) return {};
  std::vector<uint32_t> out;
  {
    const std::lock_guard lock(mu_);
    out.swap(found_);
    any_.store(false, std::memory_order_relaxed);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace stackmapd

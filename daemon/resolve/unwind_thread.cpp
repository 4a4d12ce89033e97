// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/unwind_thread.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <utility>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

int on_wanted(void* ctx, void* data, size_t size) {
  if (size < sizeof(smt_unwind_wanted)) return 0;
  smt_unwind_wanted w;
  std::memcpy(&w, data, sizeof(w));
  static_cast<UnwindLoader*>(ctx)->want(w);
  return 0;
}

}  // namespace

// Behind the capturing thread and the loop, on a busy machine too.
UnwindThread::UnwindThread(std::unique_ptr<UnwindLoader> loader)
    : loader_(std::move(loader)),
      wanted_(ring_buffer__new(loader_->wanted_fd(), on_wanted, loader_.get(), nullptr)),
      counts_(loader_->counts()),
      runner_(TaskRunner::Options("unwind-tables")
                  .unbounded()
                  .niceness(kBackgroundNice)
                  .when_idle(kPollEvery, [this] { take_wanted(); })) {
  if (!wanted_)
    throw Error(std::string("unwind tables: cannot read the ring of files asked for: ") +
                std::strerror(errno));
  // The files every process maps (libc, ld.so, libstdc++, the vdso) are the
  // daemon's own: loaded first, before new processes ask for them.
  const auto self = static_cast<uint32_t>(getpid());
  if (std::optional<ProcessMaps> maps = ProcessMaps::read(self))
    load(self, UnwindLoader::kAnyExec, std::move(*maps));
}

void UnwindThread::take_wanted() {
  if (ring_buffer__consume(wanted_.get()) <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = loader_->counts();
}

void UnwindThread::load(uint32_t pid, uint32_t exec_id, ProcessMaps maps) {
  runner_.post([this, pid, exec_id, maps = std::move(maps)] {
    loader_->load(pid, exec_id, maps);
    {
      std::lock_guard<std::mutex> lock(mu_);
      counts_ = loader_->counts();
    }
    take_wanted();  // a busy worker is never idle
  });
}

UnwindCounts UnwindThread::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// A snapshot in two steps: the exact cut (BpfSession::cut(), on the loop's
// thread, which alone may touch the ring and the store) keeps a copy of the
// store; finish() turns it into the Snapshot's stacks, ordered by id with
// their keys sorted. That second step is most of a snapshot's cost on a big
// table, and needs nothing of the session: a worker thread does it
// (daemon/run/export_worker.h).
#pragma once

#include <functional>
#include <utility>

#include "daemon/model/snapshot.h"
#include "daemon/model/stack_store.h"

namespace stackmapd {

struct SnapshotCut {
  SnapshotCut(Snapshot meta, const StackStore& store) : snap(std::move(meta)), store(store) {}

  Snapshot finish() && {
    snap.stacks = store.snapshot(snap.sources);
    if (complete) complete(snap);
    intern_callstacks(snap);
    return std::move(snap);
  }

  Snapshot snap;     // all but its stacks
  StackStore store;  // the stacks, a copy at the cut
  // What the cut's stacks still await from another thread (the names of
  // their user stacks): may wait for it.
  std::function<void(Snapshot&)> complete;
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// `stackmapd --pinned DIR`: the programs and maps of stackmapd.o (bpf/, built
// with -DSMT_BPFLOADER) as another loader created and pinned them. On Android
// user builds only bpfloader may create maps and load programs; it pins
//   DIR/prog_stackmapd_<section, '/' -> '_'>   DIR/map_stackmapd_<map>
// and the daemon opens the pins, writes the settings map and attaches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class LoaderPins {
 public:
  // Opens and checks every pin; throws Error naming the first one missing or
  // of another layout, and what to load. The directory is flocked: one
  // stackmapd per set of pins; within the process the lock is shared, so a
  // reload can open the pins again while its running session holds them.
  explicit LoaderPins(const std::string& dir);
  ~LoaderPins();
  LoaderPins(const LoaderPins&) = delete;
  LoaderPins& operator=(const LoaderPins&) = delete;

  // The pin file names, for the loader that creates them (tests).
  static std::string map_pin(const std::string& map);
  static std::string prog_pin(const std::string& section);
  static std::string tracepoint_section(uint32_t slot);

  int slots = -1, pool = -1, batches = -1, ids = -1, settings = -1, globals = -1, names = -1;
  // What each program slot's cookie would say (stackmapd/bpfloader_abi.h):
  // the objects attach without links, so without cookies.
  int cookies = -1;
  // The copies of the tracepoint program, one per tracepoint attached at
  // once: tracepoint/stackmapd_<slot>, slot 0 required.
  std::vector<int> tracepoint_progs;
  int profile_prog = -1;     // -1 when the loader left the sampling program out
  uint32_t bits = 0;         // from the pool's size, fixed when the object was built
  uint32_t ring_bytes = 0;   // the ids ring buffer's size
  uint32_t batch_count = 0;  // entries of the batches map: CPUs x SMT_MAX_NEST

 private:
  int open_map(const std::string& name, uint32_t type, uint32_t value_size, uint32_t flags);
  int open_prog(const std::string& section, uint32_t type, bool required);

  std::string dir_;
  std::shared_ptr<UniqueFd> lock_;  // the directory, flocked
  std::vector<UniqueFd> fds_;
};

}  // namespace stackmapd

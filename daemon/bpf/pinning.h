// SPDX-License-Identifier: GPL-2.0
// The table's maps pinned in bpffs, so that a restarted daemon continues the
// same ids and counts instead of starting over.
#pragma once

#include <string>
#include <utility>
#include <vector>

struct bpf_map;

namespace stackmapd {

struct PinnedMap {
  std::string name;  // file name under the pin directory
  bpf_map* map;      // opened, sized, not yet loaded
};

// Makes `dir` exist on a mounted bpffs (mounting /sys/fs/bpf if needed).
void prepare_pin_dir(const std::string& dir);

// Why the pins under `dir` cannot be taken over by maps shaped like `maps`
// (missing, another type, size or flags); empty when all of them can.
std::string pin_mismatch(const std::string& dir, const std::vector<PinnedMap>& maps);

bool any_pins(const std::string& dir, const std::vector<std::string>& names);
void remove_pins(const std::string& dir, const std::vector<std::string>& names);

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// The temp files an atomic write leaves when the daemon is killed mid-write
// (write_file_atomic's NAME.tmp-XXXXXX beside NAME, binaries/.BUILD_ID.tmp),
// removed at the next start. Only under the names stackmapd writes: the
// export dir may be shared with other programs' files.
#pragma once

#include <string>

namespace stackmapd {

// Returns how many it removed.
size_t remove_stale_temps(const std::string& export_dir, const std::string& metrics_textfile);

}  // namespace stackmapd

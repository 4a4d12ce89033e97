// SPDX-License-Identifier: GPL-2.0
// gzip (RFC 1952) of a whole buffer through zlib, which libelf already brings
// into every build, the static one included: pprof files are gzipped.
#pragma once

#include <string>
#include <string_view>

namespace stackmapd {

// Throws Error if zlib fails (out of memory).
std::string gzip(std::string_view data);

}  // namespace stackmapd

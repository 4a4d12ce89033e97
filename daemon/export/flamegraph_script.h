// SPDX-License-Identifier: GPL-2.0
// The SVG flame graph's script, daemon/export/flamegraph.js embedded at build
// time as the live page's are (cmake/embed_files.cmake): click a frame to zoom
// on it, "Reset Zoom" to return; the bottom line names the frame under the
// pointer. Geometry comes from the frames' own attributes, kept in data-* on
// first zoom.
#pragma once

#include <string_view>

namespace stackmapd {

extern const std::string_view kFlameGraphScript;

}  // namespace stackmapd

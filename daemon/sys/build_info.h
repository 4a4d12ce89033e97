// SPDX-License-Identifier: GPL-2.0
// What build this is: `stackmapd --version`, /metrics' stackmapd_build_info,
// OTLP's instrumentation scope. Defined in a file the build writes
// (cmake/build_info.cmake).
#pragma once

namespace stackmapd {

const char* build_version();   // the project's version, "0.1.0"
const char* build_revision();  // git describe of the source tree, or "unknown"

}  // namespace stackmapd

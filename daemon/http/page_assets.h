// SPDX-License-Identifier: GPL-2.0
// The live page's script and style sheet, the files under daemon/http/page/
// embedded at build time (cmake/embed_files.cmake), so the binary serves
// the page with nothing to install beside it.
#pragma once

#include <string_view>

namespace stackmapd::http {

extern const std::string_view kPageScript;  // page/page.js
extern const std::string_view kPageStyle;   // page/page.css

}  // namespace stackmapd::http

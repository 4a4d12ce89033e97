// SPDX-License-Identifier: GPL-2.0
// Names and paths are bytes (a comm any process sets with prctl, a directory
// any user names), while every output is text: JSON, pprof's and Perfetto's
// strings, folded lines, SVG/HTML, Prometheus labels. This is the one way
// bytes become text here. Valid UTF-8 passes unchanged; each byte of an
// invalid sequence (stray continuation, overlong form, surrogate, above
// U+10FFFF, truncated) becomes the four characters "\xNN", as perf prints
// them. The result is ASCII-compatible and the conversion idempotent; like
// perf's, it is not reversible (a name holding a literal "\xff" prints alike).
#pragma once

#include <string>
#include <string_view>

namespace stackmapd {

// Whether `bytes` is well-formed UTF-8 (Unicode 15, table 3-7). NUL is.
bool is_utf8(std::string_view bytes);
// `bytes` as valid UTF-8 text, appended to `out`.
void append_utf8(std::string& out, std::string_view bytes);
std::string utf8_text(std::string_view bytes);
// One line of a text output (--trace, `ctl top`): utf8_text with the
// controls but tab (newline, return, escape, DEL) as "\xNN" too, so a
// name set with prctl cannot start a line of its own or move the cursor.
std::string line_text(std::string_view bytes);
// XML and HTML character data or attribute value: utf8_text with the five
// specials as entities and what XML 1.0 forbids (controls but tab, newline,
// return; U+FFFE, U+FFFF) as "\xNN" too, so any name keeps a page well-formed.
void append_markup(std::string& out, std::string_view bytes);
std::string markup_text(std::string_view bytes);

}  // namespace stackmapd

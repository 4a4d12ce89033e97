// SPDX-License-Identifier: GPL-2.0
// JSON in and out. Every document stackmapd writes goes out through here:
// nlohmann::json refuses to dump a string that is not UTF-8 (type_error 316,
// which once made every export fail and SIGTERM abort), and names and paths
// are bytes. Every export read back (decode) comes in through here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace stackmapd {

// Each string value of `doc` made text (utf8_text.h), then the document
// indented by 2 with a final newline. Object keys are our own names.
std::string dump_json(nlohmann::json& doc);

// `text`, a stack_map.json export named `source`, parsed; anything the parser
// refuses (syntax, invalid UTF-8, a number beyond a double such as 1e400)
// throws Error naming `source` and the problem in one line.
nlohmann::json parse_json_export(std::string_view text, const std::string& source);
// The fix every message about a broken export ends with.
inline constexpr const char* kJsonExportFix = "pass a stack_map.json written by stackmapd --output";

}  // namespace stackmapd

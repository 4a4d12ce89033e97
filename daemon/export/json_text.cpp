// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/json_text.h"

#include "daemon/export/utf8_text.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

void make_text(nlohmann::json& j) {
  if (j.is_string()) {
    auto& s = j.get_ref<std::string&>();
    if (!is_utf8(s)) s = utf8_text(s);
  } else if (j.is_structured()) {
    for (auto& child : j) make_text(child);
  }
}

}  // namespace

std::string dump_json(nlohmann::json& doc) {
  make_text(doc);
  return doc.dump(2) + "\n";
}

nlohmann::json parse_json_export(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e400
    std::string what = e.what();
    if (size_t p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);
    throw Error(source + " is not valid JSON (" + utf8_text(what) + "): " + kJsonExportFix);
  }
}

}  // namespace stackmapd

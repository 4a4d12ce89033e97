// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: a stack_map.json as `stackmapd decode` reads it (both
// readers, json_snapshot.h and flamegraph.h) and every output it makes of one
// (folded, SVG, --top, pprof, the JSON again). Any input is either refused
// with an Error or decoded, never a crash, an out-of-bounds read or another
// exception. What is read and written again reads back with the same stacks.
// The same bytes also go through utf8_text.h: always UTF-8, and idempotent.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/export/flamegraph.h"
#include "daemon/export/json_snapshot.h"
#include "daemon/export/pprof.h"
#include "daemon/export/utf8_text.h"
#include "daemon/sys/error.h"

using namespace stackmapd;

namespace {

void bytes_as_text(std::string_view bytes) {
  const std::string text = utf8_text(bytes);
  if (!is_utf8(text) || utf8_text(text) != text) abort();
  if (is_utf8(bytes) != (text == bytes)) abort();
  if (!is_utf8(markup_text(bytes))) abort();
}

void outputs_of(const std::vector<SymbolizedStack>& stacks) {
  format_folded(stacks);
  render_flamegraph_svg(stacks);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bytes_as_text(text);
  JsonExport doc;
  try {
    doc = read_json_export(text, "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  const FrameNames names(doc.snap, nullptr, &doc.functions);
  outputs_of(flame_stacks(doc.snap, names));
  format_top(doc.snap, 0, names);
  encode_pprof(doc.snap, names, {});
  const JsonExport again =
      read_json_export(format_json(doc.snap, FrameNames(doc.snap, nullptr)), "fuzz-rewritten");
  if (again.snap.stacks.size() != doc.snap.stacks.size()) abort();
  for (size_t i = 0; i < doc.snap.stacks.size(); ++i) {
    const StackRecord& a = doc.snap.stacks[i];
    const StackRecord& b = again.snap.stacks[i];
    if (a.stack_id != b.stack_id || a.ref_count != b.ref_count || a.ips != b.ips) abort();
  }
  return 0;
}

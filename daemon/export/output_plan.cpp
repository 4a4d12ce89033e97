// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/output_plan.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <ostream>

#include "daemon/export/exports.h"
#include "daemon/export/flame_diff.h"
#include "daemon/model/fsmb.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {

namespace {

using Target = OutputSpec::Target;
using K = OutputKind;

std::string flame_svg(OutputContext& ctx) {
  FlameGraphOptions opt;
  opt.title = ctx.title;
  opt.unit = ctx.snap.weight_unit;
  return ctx.base ? render_diff_flamegraph_svg(ctx.base->flame(), ctx.flame(), opt)
                  : render_flamegraph_svg(ctx.flame(), opt);
}

std::string folded(OutputContext& ctx) {
  return ctx.base ? format_diff_folded(ctx.base->flame(), ctx.flame()) : format_folded(ctx.flame());
}

// The registry: one entry per output, in OutputKind's order (a plan's order).
// --otlp FILE: the whole snapshot as one ExportProfilesServiceRequest (a
// ProfilesData too); only the push splits at the receivers' limit.
std::string otlp_file(OutputContext& ctx) {
  OtlpOptions opt = ctx.otlp;
  opt.max_request_bytes = SIZE_MAX;
  std::vector<std::string> requests = encode_otlp(ctx.snap, ctx.frames(), opt);
  return requests.empty() ? std::string() : std::move(requests.front());
}

constexpr std::array<OutputSpec, 13> kOutputs = {{
    {K::exports, "--output", nullptr, Target::directory, nullptr, false, nullptr},
    {K::fsmb, "stack_map_bin", nullptr, Target::file, "stack_map_bin", false,
     [](OutputContext& c) { return fsmb_encode(c.snap.stacks); }},
    {K::json, "stack_map.json", nullptr, Target::file, "stack_map.json", false,
     [](OutputContext& c) { return format_json(c.snap, c.frames(), c.json); }},
    {K::stack_map, "stack_map", nullptr, Target::file, "stack_map", false,
     [](OutputContext& c) { return format_stack_map(c.snap.stacks, c.frames()); }},
    {K::stat, "stack_map_stat", nullptr, Target::file, "stack_map_stat", false,
     [](OutputContext& c) { return format_stat(c.snap.stats); }},
    {K::kernel, "stack_map.kernel", nullptr, Target::file, "stack_map.kernel", true,
     [](OutputContext& c) { return c.snap.kernel.to_text(); }},
    {K::folded, "--folded/--svg", "--folded", Target::file_or_stream, nullptr, false, folded},
    {K::svg, "--folded/--svg", "--svg", Target::file, nullptr, false, flame_svg},
    {K::pprof, "--pprof", "--pprof", Target::file, nullptr, false,
     [](OutputContext& c) { return encode_pprof(c.snap, c.frames(), c.pprof); }},
    {K::otlp, "--otlp", "--otlp", Target::file, nullptr, false, otlp_file},
    {K::top, "--top", nullptr, Target::stream, nullptr, false,
     [](OutputContext& c) { return format_top(c.snap, c.top, c.frames()); }},
    {K::text, "stack_map", nullptr, Target::stream, nullptr, false,
     [](OutputContext& c) { return format_stack_map(c.snap.stacks, c.frames()); }},
    {K::stacks_json, "--json", nullptr, Target::stream, nullptr, false,
     [](OutputContext& c) { return format_stacks_json(c.snap.stacks, c.frames()); }},
}};

constexpr bool in_kind_order() {
  for (size_t i = 0; i < kOutputs.size(); ++i)
    if (static_cast<size_t>(kOutputs[i].kind) != i) return false;
  return true;
}
static_assert(in_kind_order(), "a plan writes in the registry's order: keep it OutputKind's");

}  // namespace

std::span<const OutputSpec> output_registry() { return kOutputs; }

const OutputSpec& output_spec(OutputKind kind) { return kOutputs[static_cast<size_t>(kind)]; }

const std::vector<SymbolizedStack>& OutputContext::flame() {
  if (!flame_) flame_ = flame_stacks(snap, frames());
  return *flame_;
}

const FrameNames& OutputContext::frames() {
  if (!frames_) frames_.emplace(snap, ksyms, names);
  return *frames_;
}

void OutputPlan::add(OutputKind kind, std::string target, std::string said) {
  auto at =
      std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.kind > kind; });
  items_.insert(at, Item{kind, std::move(target), std::move(said)});
}

void OutputPlan::check_writable() const {
  for (const Item& item : items_)
    if (const char* option = output_spec(item.kind).option)
      check_writable_parent(item.target, option);
}

void OutputPlan::write(OutputContext& ctx, std::ostream& out, const OnError& on_error) const {
  constexpr mode_t kPrivate = 0640;  // raw kernel addresses defeat KASLR
  for (const Item& item : items_) {
    const OutputSpec& spec = output_spec(item.kind);
    try {
      switch (spec.target) {
        case Target::directory: write_exports(item.target, ctx.snap, ctx.ksyms); break;
        case Target::stream: out << spec.render(ctx); break;
        case Target::file_or_stream:
          if (item.target == "-") {
            out << spec.render(ctx);
            break;
          }
          [[fallthrough]];
        case Target::file: write_file_atomic(item.target, spec.render(ctx), kPrivate); break;
      }
      if (!item.said.empty()) spdlog::info("{}", item.said);
    } catch (const std::exception& e) {
      if (!on_error) throw;
      on_error(spec.label, e);
    }
  }
}

}  // namespace stackmapd

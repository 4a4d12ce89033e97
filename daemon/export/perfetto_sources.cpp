// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/perfetto_sources.h"

#include <algorithm>

#include "daemon/export/perfetto_protos.h"
#include "daemon/export/utf8_text.h"

namespace stackmapd {

std::vector<PerfettoSource> perfetto_sources(const std::vector<std::string>& names,
                                             const SessionConfig& config) {
  std::vector<PerfettoSource> out;
  for (size_t i = 0; i < names.size(); ++i) {
    PerfettoSource src;
    src.name = names[i];
    // --profile's and --offcpu's sources come after every function's, so a
    // function of the same name comes first.
    const bool last = std::find(names.begin() + static_cast<ptrdiff_t>(i) + 1, names.end(),
                                names[i]) == names.end();
    if (std::any_of(config.events.begin(), config.events.end(),
                    [&](const Tracepoint& tp) { return tp.str() == names[i]; })) {
      src.kind = PerfettoSource::Kind::tracepoint;
      src.sum_field = config.sum_field;
    } else if (last && config.profile_hz && names[i] == "profile") {
      src.kind = PerfettoSource::Kind::profile;
      src.profile_hz = config.profile_hz;
    } else if (last && config.offcpu && names[i] == "offcpu") {
      src.kind = PerfettoSource::Kind::offcpu;
    }
    out.push_back(std::move(src));
  }
  return out;
}

ProtoWriter perf_sample_defaults(const PerfettoSource& src) {
  ProtoWriter timebase;
  switch (src.kind) {
    case PerfettoSource::Kind::tracepoint: {
      ProtoWriter tracepoint;
      tracepoint.bytes(pf::kTracepointName, utf8_text(src.name));
      timebase.varint(pf::kPeriod, 1);
      timebase.message(pf::kTracepoint, tracepoint);
      break;
    }
    case PerfettoSource::Kind::profile:
      timebase.varint(pf::kFrequency, src.profile_hz);
      timebase.varint(pf::kCounter, pf::kSwCpuClock);
      break;
    case PerfettoSource::Kind::function:
      timebase.varint(pf::kPeriod, 1);
      timebase.bytes(pf::kTimebaseName, utf8_text(src.name));
      break;
    case PerfettoSource::Kind::offcpu:  // no event of perf's: a name only
      timebase.bytes(pf::kTimebaseName, utf8_text(src.name));
      break;
  }
  ProtoWriter defaults;
  defaults.message(pf::kTimebase, timebase);
  if (!src.sum_field.empty()) {
    ProtoWriter follower;
    follower.bytes(pf::kFollowerName, utf8_text(src.sum_field));
    defaults.message(pf::kFollowers, follower);
  }
  return defaults;
}

uint64_t timebase_step(const PerfettoSource& src) {
  switch (src.kind) {
    case PerfettoSource::Kind::profile: return 1000000000 / std::max(src.profile_hz, 1u);
    case PerfettoSource::Kind::offcpu: return 0;
    default: return 1;
  }
}

}  // namespace stackmapd

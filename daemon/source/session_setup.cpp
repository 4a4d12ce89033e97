// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/session_setup.h"

#include <spdlog/spdlog.h>

#include <string_view>
#include <unordered_set>

#include "daemon/source/event_filter.h"
#include "daemon/source/event_format.h"
#include "daemon/source/probe_args.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

uint16_t offcpu_field(const EventFormat& format, const char* name) {
  const EventField* f = format.find(name);
  if (!f || !f->numeric() || f->offset > UINT16_MAX)
    throw Error(std::string("--offcpu: sched:sched_switch has no numeric field ") + name +
                " in this kernel's format file: --offcpu cannot follow threads here");
  return static_cast<uint16_t>(f->offset);
}

// --filter: one program for every tracepoint of the session, so the event
// path needs no per-source lookup; tracepoints that lay its fields out
// differently need sessions of their own.
void compile_session_filter(SessionConfig& sc, const std::string& events_dir) {
  if (!sc.functions.empty() || sc.profile_hz)
    throw Error(
        "--filter applies to tracepoint records; -f and --profile events have none: "
        "trace them in a session of their own");
  if (!sc.uprobes.empty())
    throw Error(
        "--filter applies to tracepoint records; -u events have none: trace them in a session "
        "of their own");
  for (size_t i = 0; i < sc.events.size(); ++i) {
    const Tracepoint& tp = sc.events[i];
    smt_filter prog;
    try {
      prog = compile_filter(sc.filter, read_event_format(events_dir, tp));
    } catch (const Error& e) {
      throw Error("-e " + tp.str() + " " + e.what());
    }
    if (i == 0) sc.filter_program.prog = prog;
    else if (!same_filter(prog, sc.filter_program.prog))
      throw Error("--filter: the fields it names lie differently in " + sc.events[0].str() +
                  " and " + tp.str() + ": trace them in sessions of their own");
  }
}

}  // namespace

std::vector<smt_text_range> machinery_ranges(const Kallsyms& ksyms, const SessionConfig& sc) {
  std::unordered_set<std::string> names;
  for (const Tracepoint& tp : sc.events) names.insert("__traceiter_" + tp.name);
  if (sc.offcpu) names.insert("__traceiter_sched_switch");
  std::vector<smt_text_range> out;
  for (const Kallsyms::Range& r :
       ksyms.ranges_of([&](std::string_view name) { return names.count(std::string(name)) > 0; }))
    out.push_back({r.start, r.end});
  if (out.size() > SMT_MAX_STRIP) {
    spdlog::warn("{} tracing-machinery functions: the first {} are cut from stacks, the rest not",
                 out.size(), SMT_MAX_STRIP);
    out.resize(SMT_MAX_STRIP);
  }
  return out;
}

void resolve_session_events(SessionConfig& sc, const std::string& events_dir,
                            const Kallsyms* ksyms) {
  sc.events = resolve_events(sc.events, events_dir);
  if (!sc.sum_field.empty() && !sc.uprobes.empty()) {
    const std::string option = sc.keys.has(KeyField::bucket) ? "--hist " : "--sum ";
    if (!sc.events.empty() || !sc.functions.empty() || sc.profile_hz)
      throw Error(option + sc.sum_field +
                  ": -u events are weighed by an argument (arg0..arg5), tracepoints by a field, "
                  "-f and --profile events by neither: trace -u in a session of its own");
    for (UprobeTarget& u : sc.uprobes) {
      try {
        u.weight_field = probe_arg_field(u, sc.sum_field);
      } catch (const Error& e) {
        throw Error(option + sc.sum_field + ": " + e.what());
      }
    }
  } else if (!sc.sum_field.empty()) {
    const std::string option = sc.keys.has(KeyField::bucket) ? "--hist " : "--sum ";
    if (!sc.functions.empty() || sc.profile_hz)
      throw Error(option + sc.sum_field +
                  " weighs tracepoint events by their fields; -f and --profile events have "
                  "none: trace them in a session of their own");
    for (Tracepoint& tp : sc.events) {
      const EventField f = weight_field(read_event_format(events_dir, tp), sc.sum_field, option);
      tp.weight_field = SMT_WEIGHT_FIELD(f.offset, f.size, f.is_signed ? 1u : 0u);
    }
  }
  if (!sc.filter.empty()) compile_session_filter(sc, events_dir);
  if (sc.trace)
    for (Tracepoint& tp : sc.events) tp.raw_len = trace_raw_len(read_event_format(events_dir, tp));
  sc.machinery = machinery_ranges(ksyms ? *ksyms : Kallsyms::load(), sc);
  if (sc.offcpu) {
    const EventFormat sched_switch =
        read_event_format(events_dir, Tracepoint{"sched", "sched_switch", 0});
    sc.offcpu->next_pid_offset = offcpu_field(sched_switch, "next_pid");
    sc.offcpu->prev_state_offset = offcpu_field(sched_switch, "prev_state");
  }
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// A session's event sources attached to its programs: one BPF link per
// tracepoint (a perf event on CPU 0), one loaded copy of the object and its
// link per fentry function, one kprobe link of the object's kprobe program
// per function -f attaches that way (its source in the cookie; auto also
// where fentry fails to load or attach), one link per uprobe site (all
// running one program), one perf link per sampled CPU, and --offcpu's
// link on sched:sched_switch. With --pinned, as Android's own clients attach
// (no links or cookies before 5.15): PERF_EVENT_IOC_SET_BPF on each perf
// event, owned by its PerfLink; each tracepoint runs a program copy of its
// own (a slot), whose cookie the pinned cookies map holds. Attaching is all
// or nothing: what fails to attach leaves what was attached as it was.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/bpf/bpf_object.h"
#include "daemon/source/session_config.h"
#include "daemon/sys/bpf_handles.h"

namespace stackmapd {

class Attachments {
 public:
  // Loads one copy of the object per fentry function (skipping, with a
  // warning, functions matched by a glob that do not load, or making them
  // kprobes with SessionConfig::kprobe_fallback); attaches nothing.
  Attachments(const BpfObject& object, const SessionConfig& config);
  Attachments(const Attachments&) = delete;
  Attachments& operator=(const Attachments&) = delete;

  // Attaches every configured source; throws Error with nothing attached.
  // Does nothing when attached already.
  void attach();
  // The tracepoints become `events`: links of events in both sets are kept,
  // the added ones attach first and only then are the removed ones closed;
  // on failure nothing changes. Detached, only the list for attach() changes.
  void reattach(const std::vector<Tracepoint>& events);
  // Closes every link; the programs stay loaded for the next attach().
  void detach();
  bool attached() const { return attached_; }

  const std::vector<Tracepoint>& events() const { return events_; }
  // Source names by index (smt_trace_record.source, the links' cookies).
  // Indexes never change: a removed tracepoint keeps its entry, an added one
  // gets a new one.
  const std::vector<std::string>& sources() const { return sources_; }

 private:
  class SourcesGuard;
  struct Function {
    std::string name;
    bool required;
    std::string kprobe_because;  // FunctionTarget's; empty: fentry through `object`
    uint32_t source;
    StackmapdSkeleton object;
    BpfLink link;
  };

  struct TracepointLink {
    PerfLink link;
    uint32_t slot = 0;  // --pinned: the program copy it runs (BpfObject::tracepoint_slots())
  };
  using TracepointLinks = std::map<std::string, TracepointLink>;  // by "category:name"

  uint32_t source_of(const std::string& name);
  // Attaches tp; with --pinned to a program copy no link in `a` or `b` runs.
  TracepointLink attach_tracepoint(const Tracepoint& tp, const TracepointLinks& a,
                                   const TracepointLinks& b);
  std::vector<BpfLink> attach_uprobes() const;
  std::vector<PerfLink> attach_profile() const;
  PerfLink attach_offcpu() const;  // empty without --offcpu
  // Function i's link, by fentry or by kprobe (setting *kprobe_because when
  // fentry fails over to it); empty with *error set when neither attaches.
  BpfLink attach_function(size_t i, std::string* kprobe_because, std::string* error) const;
  // "-f: fentry on 2 functions, kprobes on 1 (no fentry: ...)".
  std::string mechanism_line() const;

  const BpfObject& object_;
  std::vector<Tracepoint> events_;
  TracepointLinks tracepoint_links_;
  std::vector<Function> functions_;
  bool kprobe_fallback_;
  bool announced_ = false;  // mechanism_line() said, at the first attach
  std::vector<PerfLink> profile_links_;
  // -u: each site with its source, and its link while attached.
  struct Uprobe {
    UprobeTarget target;
    uint32_t source;
  };
  std::vector<Uprobe> uprobes_;
  std::vector<BpfLink> uprobe_links_;
  int uprobe_pid_ = -1;  // the one --pid, so other processes never hit the probes; -1: all
  PerfLink offcpu_link_;
  uint32_t profile_hz_;
  uint32_t filter_cpu_;
  uint32_t profile_source_ = 0;
  uint32_t offcpu_source_ = 0;
  std::vector<std::string> sources_;
  std::map<std::string, uint32_t> tracepoint_sources_;
  bool attached_ = false;
};

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
// --trace's event text: a tracepoint's raw record printed as ftrace prints it
// ("kmem_cache_alloc: call_site=... ptr=..."), by libtraceevent from the
// tracepoint's format file (pointers rewritten by ftrace_pointers()) and this
// machine's kallsyms for %pS.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stackmapd/abi.h"

namespace stackmapd {

class EventPrinter {
 public:
  // `sources` by index (smt_event_record.source); the format files of those
  // that are tracepoints ("sys:name") are read from `events_dir`. A format
  // libtraceevent cannot parse is warned about; its events print by name.
  // %pS resolves against `kallsyms_path` (unreadable: warned, addresses).
  EventPrinter(const std::vector<std::string>& sources, const std::string& events_dir,
               const std::string& kallsyms_path = "/proc/kallsyms");
  ~EventPrinter();
  EventPrinter(const EventPrinter&) = delete;
  EventPrinter& operator=(const EventPrinter&) = delete;

  // "name: fields"; empty for a source without a format (-f, --profile) or
  // a record without raw bytes.
  std::string print(const smt_trace_record& r);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace stackmapd

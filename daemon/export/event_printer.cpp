// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/event_printer.h"

#include <event-parse.h>
#include <spdlog/spdlog.h>
#include <trace-seq.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "daemon/export/print_fmt.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

struct EventPrinter::Impl {
  tep_handle* tep = tep_alloc();
  std::vector<uint16_t> types;  // by source: the event's id (common_type), 0: none
  std::optional<Kallsyms> ksyms;
  // The record's bytes, then zeros as far as a __data_loc field (16-bit
  // offset and length) can point: a string past raw_len prints empty or cut
  // short, never read out of bounds.
  std::vector<char> data = std::vector<char>(SMT_TRACE_RAW_MAX + (2 << 16));

  ~Impl() {
    if (tep) tep_free(tep);
  }
};

namespace {

// libtraceevent's print functions take no context: the printer printing now.
thread_local const EventPrinter::Impl* printing = nullptr;

unsigned long long print_px(trace_seq* s, unsigned long long* args) {
  trace_seq_printf(s, "%0*llx", 2 * tep_get_long_size(printing->tep), args[0]);
  return 0;
}

unsigned long long print_sym_off(trace_seq* s, unsigned long long* args) {
  if (printing->ksyms) {
    trace_seq_puts(s, printing->ksyms->format(args[0]).c_str());
  } else {
    trace_seq_printf(s, "0x%llx", args[0]);
  }
  return 0;
}

unsigned long long print_sym_name(trace_seq* s, unsigned long long* args) {
  const auto m = printing->ksyms ? printing->ksyms->lookup(args[0]) : std::nullopt;
  if (!m) {
    trace_seq_printf(s, "0x%llx", args[0]);
  } else if (m->module.empty()) {
    trace_seq_printf(s, "%.*s", static_cast<int>(m->name.size()), m->name.data());
  } else {
    trace_seq_printf(s, "%.*s [%.*s]", static_cast<int>(m->name.size()), m->name.data(),
                     static_cast<int>(m->module.size()), m->module.data());
  }
  return 0;
}

void register_pointer_functions(tep_handle* tep) {
  const std::pair<const char*, tep_func_handler> functions[] = {
      {kPrintPointer, print_px}, {kPrintSymOff, print_sym_off}, {kPrintSymName, print_sym_name}};
  for (const auto& [name, handler] : functions)
    tep_register_print_function(tep, handler, TEP_FUNC_ARG_STRING, const_cast<char*>(name),
                                TEP_FUNC_ARG_LONG, TEP_FUNC_ARG_VOID);
}

}  // namespace

EventPrinter::EventPrinter(const std::vector<std::string>& sources, const std::string& events_dir,
                           const std::string& kallsyms_path)
    : impl_(std::make_unique<Impl>()) {
  impl_->types.assign(sources.size(), 0);
  if (!impl_->tep || events_dir.empty()) return;
  tep_set_long_size(impl_->tep, sizeof(long));
  tep_set_page_size(impl_->tep, static_cast<int>(sysconf(_SC_PAGESIZE)));
  register_pointer_functions(impl_->tep);
  bool any = false;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string& src = sources[i];
    const size_t colon = src.find(':');
    if (colon == std::string::npos || src.find('/') != std::string::npos) continue;
    const std::string sys = src.substr(0, colon);
    const auto text = read_file(events_dir + "/" + sys + "/" + src.substr(colon + 1) + "/format");
    if (!text) continue;  // -f and --profile sources have no format file
    const std::string fmt = ftrace_pointers(*text);
    tep_event* ev = nullptr;
    if (tep_parse_format(impl_->tep, &ev, fmt.data(), fmt.size(), sys.c_str()) != 0 || !ev) {
      spdlog::warn("--trace: libtraceevent cannot parse the format of {}: its events print by name",
                   src);
      continue;
    }
    impl_->types[i] = static_cast<uint16_t>(ev->id);
    any = true;
  }
  if (!any) return;
  try {
    impl_->ksyms = Kallsyms::load(kallsyms_path);
  } catch (const Error& e) {
    spdlog::warn("--trace: {}: %pS fields print as addresses", e.what());
  }
}

EventPrinter::~EventPrinter() = default;

std::string EventPrinter::print(const smt_trace_record& r) {
  const uint32_t src = r.event.source;
  const uint32_t len = std::min<uint32_t>(r.raw_len, SMT_TRACE_RAW_MAX);
  if (src >= impl_->types.size() || !impl_->types[src] || len < 8) return {};
  // The BPF program runs before perf fills the common fields (the first 8
  // bytes hold its pt_regs pointer then): write them as ftrace would, the
  // flags and preempt count unknown.
  char* raw = impl_->data.data();
  std::memcpy(raw, r.raw, len);
  std::memset(raw + len, 0, SMT_TRACE_RAW_MAX - len);
  const uint16_t type = impl_->types[src];
  const int32_t pid = static_cast<int32_t>(r.event.tid);
  std::memset(raw, 0, 8);
  std::memcpy(raw, &type, sizeof(type));
  std::memcpy(raw + 4, &pid, sizeof(pid));
  tep_record rec = {};
  rec.ts = r.ts_ns;
  rec.cpu = static_cast<int>(r.event.cpu);
  rec.size = static_cast<int>(len);
  rec.data = raw;
  trace_seq s;
  trace_seq_init(&s);
  printing = impl_.get();
  tep_print_event(impl_->tep, &s, &rec, "%s: %s", TEP_PRINT_NAME, TEP_PRINT_INFO);
  printing = nullptr;
  trace_seq_terminate(&s);
  std::string out(s.buffer, s.len);
  trace_seq_destroy(&s);
  return out;
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/trace_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#ifdef STACKMAPD_HAVE_TRACEEVENT
#include <event-parse.h>
#include <trace-seq.h>
#endif

#include "daemon/sys/error.h"

namespace stackmapd {

#ifdef STACKMAPD_HAVE_TRACEEVENT
// One tep handle with the session's tracepoints parsed into it, and the
// kernel's symbols for %pS.
struct TraceWriter::Formatter {
  tep_handle* tep = tep_alloc();
  std::vector<bool> parsed;     // by source
  std::vector<uint16_t> types;  // by source: the event's id (common_type)

  ~Formatter() {
    if (tep) tep_free(tep);
  }

  void load_kallsyms() {
    std::ifstream in("/proc/kallsyms");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string addr, type, name, mod;
      if (!(ls >> addr >> type >> name)) continue;
      ls >> mod;
      if (mod.size() > 2 && mod.front() == '[') mod = mod.substr(1, mod.size() - 2);
      unsigned long long a = std::strtoull(addr.c_str(), nullptr, 16);
      if (!a) continue;
      // The API takes char * but copies the strings.
      tep_register_function(tep, name.data(), a, mod.empty() ? nullptr : mod.data());
    }
  }

  std::string format(const smt_trace_record& r) {
    std::string raw(r.raw, std::min<uint32_t>(r.raw_len, SMT_TRACE_RAW_MAX));
    raw.resize(SMT_TRACE_RAW_MAX, '\0');
    // The BPF program runs before perf fills the common fields (the first 8
    // bytes hold its pt_regs pointer then): write them as ftrace would, the
    // flags and preempt count unknown.
    const uint16_t type = types[r.event.source];
    const int32_t pid = static_cast<int32_t>(r.event.tid);
    std::memset(raw.data(), 0, 8);
    std::memcpy(raw.data(), &type, sizeof(type));
    std::memcpy(raw.data() + 4, &pid, sizeof(pid));
    tep_record rec = {};
    rec.ts = r.ts_ns;
    rec.cpu = r.event.cpu;
    rec.size = static_cast<int>(std::min<uint32_t>(r.raw_len, SMT_TRACE_RAW_MAX));
    rec.data = raw.data();
    trace_seq s;
    trace_seq_init(&s);
    tep_print_event(tep, &s, &rec, "%s: %s", TEP_PRINT_NAME, TEP_PRINT_INFO);
    trace_seq_terminate(&s);
    std::string out(s.buffer, s.len);
    trace_seq_destroy(&s);
    return out;
  }
};
#else
struct TraceWriter::Formatter {
  std::vector<bool> parsed;
  std::string format(const smt_trace_record&) { return {}; }
};
#endif

TraceWriter::TraceWriter(const std::string& path) : path_(path) {
  out_ = path == "-" ? stdout : std::fopen(path.c_str(), "w");
  if (!out_)
    throw Error("cannot write the trace to " + path + ": " + std::strerror(errno) +
                ": choose a writable --trace file");
  // Lines are small and many: a large buffer keeps the consumer off write().
  std::setvbuf(out_, nullptr, _IOFBF, 1 << 20);
}

TraceWriter::~TraceWriter() {
  if (out_ && out_ != stdout) std::fclose(out_);
}

void TraceWriter::set_sources(std::vector<std::string> sources, const std::string& events_dir) {
  sources_ = std::move(sources);
  formatter_ = std::make_unique<Formatter>();
  formatter_->parsed.assign(sources_.size(), false);
#ifdef STACKMAPD_HAVE_TRACEEVENT
  formatter_->types.assign(sources_.size(), 0);
#endif
#ifdef STACKMAPD_HAVE_TRACEEVENT
  if (events_dir.empty() || !formatter_->tep) return;
  tep_set_long_size(formatter_->tep, sizeof(long));
  tep_set_page_size(formatter_->tep, 4096);
  bool any = false;
  for (size_t i = 0; i < sources_.size(); ++i) {
    const std::string& src = sources_[i];
    const size_t colon = src.find(':');
    if (colon == std::string::npos || src.find('/') != std::string::npos) continue;
    const std::string sys = src.substr(0, colon), name = src.substr(colon + 1);
    std::ifstream in(events_dir + "/" + sys + "/" + name + "/format");
    if (!in) continue;  // -f and --profile sources have no format file
    std::stringstream text;
    text << in.rdbuf();
    const std::string t = text.str();
    tep_event* ev = nullptr;
    if (tep_parse_format(formatter_->tep, &ev, t.data(), t.size(), sys.c_str()) == 0) {
      formatter_->parsed[i] = true;
      formatter_->types[i] = static_cast<uint16_t>(ev->id);
      any = true;
    } else {
      spdlog::warn(
          "--trace: libtraceevent cannot parse the format of {}: its events are "
          "printed by name only",
          src);
    }
  }
  if (any) formatter_->load_kallsyms();
#else
  (void)events_dir;
#endif
}

std::string TraceWriter::prefix(const smt_trace_record& r, const std::string& comm) {
  const smt_event_record& e = r.event;
  char line[96];
  int n = std::snprintf(line, sizeof(line), "%16s-%-7u [%03u] ..... %5llu.%06llu: ", comm.c_str(),
                        e.tid, e.cpu, static_cast<unsigned long long>(r.ts_ns / 1000000000),
                        static_cast<unsigned long long>(r.ts_ns % 1000000000 / 1000));
  return std::string(line, n > 0 ? std::min<size_t>(n, sizeof(line) - 1) : 0);
}

std::string TraceWriter::body(const smt_trace_record& r, const std::string& source) {
  const uint32_t src = r.event.source;
  if (r.raw_len && formatter_ && src < formatter_->parsed.size() && formatter_->parsed[src]) {
    std::string s = formatter_->format(r);
    if (!s.empty()) return s;
  }
  // No fields (-f, --profile) or no format: the event by its source's name.
  return source;
}

void TraceWriter::write(const smt_trace_record& r, const std::string& comm) {
  static const std::string unknown = "unknown";
  const std::string& source = r.event.source < sources_.size() ? sources_[r.event.source] : unknown;
  const std::string p = prefix(r, comm);
  std::string out =
      p + body(r, source) + "\n" + p + "<stack_id " + std::to_string(r.event.stack_id) + ">\n";
  std::fwrite(out.data(), 1, out.size(), out_);
  ++lines_;
}

void TraceWriter::finish() {
  if (std::fflush(out_) != 0 || std::ferror(out_))
    throw Error("writing the trace to " + path_ + " failed: " + std::strerror(errno) +
                ": check free space");
}

}  // namespace stackmapd

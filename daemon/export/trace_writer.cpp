// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/trace_writer.h"

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

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

std::string TraceWriter::format(const smt_trace_record& r, const std::string& comm,
                                const std::string& source) {
  const smt_event_record& e = r.event;
  char line[160];
  int n = std::snprintf(
      line, sizeof(line), "%16s-%-7u [%03u] %5llu.%06llu: %s <stack_id %u>\n", comm.c_str(), e.tid,
      e.cpu, static_cast<unsigned long long>(r.ts_ns / 1000000000),
      static_cast<unsigned long long>(r.ts_ns % 1000000000 / 1000), source.c_str(), e.stack_id);
  return std::string(line, n > 0 ? std::min<size_t>(n, sizeof(line) - 1) : 0);
}

void TraceWriter::write(const smt_trace_record& r, const std::string& comm) {
  static const std::string unknown = "unknown";
  const std::string& source = r.event.source < sources_.size() ? sources_[r.event.source] : unknown;
  std::string line = format(r, comm, source);
  std::fwrite(line.data(), 1, line.size(), out_);
  ++lines_;
}

void TraceWriter::finish() {
  if (std::fflush(out_) != 0 || std::ferror(out_))
    throw Error("writing the trace to " + path_ + " failed: " + std::strerror(errno) +
                ": check free space");
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "daemon/export/utf8_text.h"
#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

// Its fields hold raw kernel addresses (%p, unresolved %pS), which defeat
// KASLR: readable by its owner only, as tracefs's `trace` is by root.
FILE* open_private(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  FILE* f = ::fdopen(fd, "w");
  if (!f) ::close(fd);
  return f;
}

}  // namespace

TraceWriter::TraceWriter(const std::string& path) : path_(path) {
  out_ = path == "-" ? stdout : open_private(path);
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
  printer_ = std::make_unique<EventPrinter>(sources_, events_dir);
}

std::string TraceWriter::prefix(const smt_trace_record& r, const std::string& comm) {
  const smt_event_record& e = r.event;
  char line[160];  // room for a comm of 15 escaped bytes (\xNN each)
  int n = std::snprintf(line, sizeof(line), "%16s-%-7u [%03u] ..... %5llu.%06llu: ", comm.c_str(),
                        e.tid, e.cpu, static_cast<unsigned long long>(r.ts_ns / 1000000000),
                        static_cast<unsigned long long>(r.ts_ns % 1000000000 / 1000));
  return std::string(line, n > 0 ? std::min<size_t>(n, sizeof(line) - 1) : 0);
}

void TraceWriter::write(const smt_trace_record& r, const std::string& comm) {
  static const std::string unknown = "unknown";
  std::string body = printer_ ? printer_->print(r) : std::string();
  // No fields (-f, --profile) or no format: the event by its source's name.
  if (body.empty()) body = r.event.source < sources_.size() ? sources_[r.event.source] : unknown;
  // A comm and a string field are bytes; ftrace prints them raw, we as perf
  // does, and each event in its two lines whatever the name holds.
  const std::string p = prefix(r, line_text(comm));
  const std::string out =
      p + line_text(body) + "\n" + p + "<stack_id " + std::to_string(r.event.stack_id) + ">\n";
  std::fwrite(out.data(), 1, out.size(), out_);
  ++lines_;
}

void TraceWriter::flush() {
  if (flushed_ == lines_) return;
  flushed_ = lines_;
  std::fflush(out_);  // a failure stays in ferror() for finish()
}

void TraceWriter::finish() {
  if (std::fflush(out_) != 0 || std::ferror(out_))
    throw Error("writing the trace to " + path_ + " failed: " + std::strerror(errno) +
                ": check free space");
}

}  // namespace stackmapd

// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/sandboxed_parser.h"

#include <libelf.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

enum Op : uint8_t { kBuildId = 1, kCfiTable, kSymbolize, kCloseIdle };
enum Status : uint8_t { kOk = 0, kFailed, kNeedFile };

// Requests and replies: fixed-size fields in host order (both ends are this
// binary) and strings with their length first.
class Writer {
 public:
  template <typename T>
  Writer& put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(v));
    return *this;
  }
  Writer& str(std::string_view s) {
    put(static_cast<uint32_t>(s.size()));
    out_.append(s);
    return *this;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  T get() {
    T v{};
    if (in_.size() < sizeof(v)) return fail(), v;
    std::memcpy(&v, in_.data(), sizeof(v));
    in_.remove_prefix(sizeof(v));
    return v;
  }
  std::string str() { return std::string(bytes(get<uint32_t>())); }
  std::string_view bytes(size_t n) {
    if (in_.size() < n) return fail(), std::string_view();
    std::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  bool ok() const { return ok_; }

 private:
  void fail() { ok_ = false, in_ = {}; }
  std::string_view in_;
  bool ok_ = true;
};

// The helper's side of each request.
struct Server {
  UserSymbolizer symbolizer;

  std::string serve(std::string_view request, UniqueFd fd) {
    Reader r(request);
    Writer w;
    switch (r.get<uint8_t>()) {
      case kBuildId: {
        elf_version(EV_CURRENT);
        Elf* elf = fd ? elf_begin(fd.get(), ELF_C_READ, nullptr) : nullptr;  // ended below
        w.put(kOk).str(elf ? elf_build_id(elf) : "");
        if (elf) elf_end(elf);
        return w.take();
      }
      case kCfiTable: {
        const std::string name = r.str();
        try {
          if (!fd) throw Error("unwind table of " + name + ": no file sent");
          const CfiTable t = build_cfi_table(fd.get(), name);
          w.put(kOk).str(t.build_id).str(t.section).put(t.base).put(uint64_t{t.fdes});
          w.put(uint64_t{t.undecodable_fdes}).put(uint64_t{t.rows.size()});
          w.str(std::string_view(reinterpret_cast<const char*>(t.rows.data()), t.bytes()));
          w.put(uint64_t{t.segments.size()});
          for (const CfiTable::Segment& s : t.segments) w.put(s.offset).put(s.vaddr).put(s.filesz);
        } catch (const Error& e) {
          w.put(kFailed).str(e.what());
        }
        return w.take();
      }
      case kSymbolize: {  // one binary's frames of a stack, in one call
        const std::string key = r.str();
        if (!fd && !symbolizer.holds(key)) return w.put(kNeedFile).take();
        w.put(kOk);
        for (uint32_t n = r.get<uint32_t>(); n-- && r.ok();) {
          const uint64_t offset = r.get<uint64_t>();
          const bool is_return = r.get<uint8_t>();
          UserSymbolizer::Result res = symbolizer.resolve(key, std::move(fd), offset, is_return);
          w.put(res.elf_addr).put(static_cast<uint32_t>(res.symbols.size()));
          for (const std::string& s : res.symbols) w.str(s);
          w.str(res.srcline);
        }
        return w.take();
      }
      case kCloseIdle:
        symbolizer.close_idle(std::chrono::steady_clock::now());
        return w.put(kOk).take();
    }
    return w.put(kFailed).str("unknown request").take();
  }
};

}  // namespace

int run_sandboxed_parser(int argc, char** argv) {
  Server server;
  return run_sandboxed(argc, argv, [&server](std::string_view request, UniqueFd fd) {
    return server.serve(request, std::move(fd));
  });
}

SandboxedParser::SandboxedParser(std::string name, Sandbox::Limits limits)
    : sandbox_(std::move(name), limits) {}

std::optional<std::string> SandboxedParser::call(const std::string& request, int fd,
                                                 const std::string& file) {
  std::string why;
  std::optional<std::string> reply = sandbox_.call(request, fd, &why);
  if (reply) return reply;
  // Said once per helper: a hostile user can make it fail for every file.
  if (!failures_++)
    spdlog::warn("parsing {} failed in the parser sandbox ({}): its {} lost (said once)", file, why,
                 request[0] == kSymbolize  ? "names are"
                 : request[0] == kCfiTable ? "unwind rows are"
                                           : "build id is");
  else spdlog::debug("parsing {} failed in the parser sandbox: {}", file, why);
  return std::nullopt;
}

// The file open at `fd`, for a log line: its path with control bytes masked.
std::string name_of(int fd) {
  char path[4096];
  const ssize_t n = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), path, sizeof(path));
  std::string name = n > 0 ? std::string(path, static_cast<size_t>(n)) : "a binary";
  for (char& c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return name;
}

std::string SandboxedParser::build_id(int fd) {
  std::optional<std::string> reply = call(Writer().put(kBuildId).take(), fd, name_of(fd));
  if (!reply) return "";
  Reader r(*reply);
  const uint8_t status = r.get<uint8_t>();
  std::string id = r.str();
  return status == kOk && r.ok() ? id : "";
}

CfiTable SandboxedParser::cfi_table(const std::string& path) {
  std::string why;
  std::optional<OpenedFile> f = open_regular(path, Links::kernel, &why);
  if (!f) throw Error("unwind table of " + path + ": cannot open it (" + why + ")");
  std::optional<std::string> reply =
      call(Writer().put(kCfiTable).str(path).take(), f->fd.get(), path);
  if (!reply) throw Error("unwind table of " + path + ": lost in the parser sandbox");
  Reader r(*reply);
  if (r.get<uint8_t>() != kOk) throw Error(r.str());
  CfiTable t;
  t.build_id = r.str();
  t.section = r.str();
  t.base = r.get<uint64_t>();
  t.fdes = r.get<uint64_t>();
  t.undecodable_fdes = r.get<uint64_t>();
  // The reply is as untrusted as the file: sizes are checked, not believed.
  const uint64_t nr_rows = r.get<uint64_t>();
  const std::string_view rows = r.bytes(r.get<uint32_t>());
  if (nr_rows * sizeof(smt_unwind_row) != rows.size())
    throw Error("unwind table of " + path + ": a malformed reply from the sandbox");
  t.rows.resize(nr_rows);
  std::memcpy(t.rows.data(), rows.data(), rows.size());
  t.segments.resize(r.get<uint64_t>() & 0xffff);
  for (CfiTable::Segment& s : t.segments)
    s = {r.get<uint64_t>(), r.get<uint64_t>(), r.get<uint64_t>()};
  if (!r.ok()) throw Error("unwind table of " + path + ": a malformed reply from the sandbox");
  return t;
}

std::optional<std::vector<UserSymbolizer::Result>> SandboxedParser::symbolize(
    const std::string& key, int fd, const std::vector<Frame>& frames) {
  if (lost_.count(key)) return std::vector<UserSymbolizer::Result>(frames.size());
  const bool send = fd >= 0 && !holds(key);
  if (!send && !holds(key)) return std::nullopt;
  Writer w;
  w.put(kSymbolize).str(key).put(static_cast<uint32_t>(frames.size()));
  for (const Frame& f : frames) w.put(f.file_offset).put(uint8_t{f.is_return});
  std::optional<std::string> reply = call(w.take(), send ? fd : -1, key);
  if (!reply) {
    lost_.insert(key);
    return std::vector<UserSymbolizer::Result>(frames.size());
  }
  sent_generation_ = sandbox_.generation();
  Reader r(*reply);
  if (r.get<uint8_t>() == kNeedFile) {  // the helper let it go (its cap)
    if (sent_.erase(key)) ++let_go_;
    // Sent again when the caller has it at hand; else the caller opens it again.
    return fd >= 0 && !send ? symbolize(key, fd, frames) : std::nullopt;
  }
  sent_.insert(key);
  std::vector<UserSymbolizer::Result> out(frames.size());
  for (UserSymbolizer::Result& res : out) {
    res.elf_addr = r.get<uint64_t>();
    res.symbols.resize(std::min<uint32_t>(r.get<uint32_t>(), 4096));
    for (std::string& s : res.symbols) s = r.str();
    res.srcline = r.str();
  }
  if (!r.ok()) return std::vector<UserSymbolizer::Result>(frames.size());
  return out;
}

void SandboxedParser::close_idle() {
  if (sandbox_.running()) call(Writer().put(kCloseIdle).take(), -1, "(idle sessions)");
}

BuildIdParser sandboxed_build_ids(SandboxedParser& parser) {
  return [&parser](int fd) { return parser.build_id(fd); };
}

CfiBuilder sandboxed_tables(std::shared_ptr<SandboxedParser> parser) {
  return [parser](const std::string& path) { return parser->cfi_table(path); };
}

}  // namespace stackmapd

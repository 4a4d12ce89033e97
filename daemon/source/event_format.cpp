// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/event_format.h"

#include <fnmatch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <set>

#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"
#include "stackmapd/abi.h"

namespace stackmapd {

namespace fs = std::filesystem;

namespace {

// Each tracepoint gets a program of its own, loaded and attached one by one:
// a bound keeps a broad glob such as 'syscalls:*' from taking minutes.
constexpr size_t kMaxGlobEvents = 256;
// The log line of what a glob matched stops listing names after this.
constexpr size_t kMaxMatchList = 200;

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

uint32_t parse_u32(std::string_view s, std::string_view line) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size())
    throw Error("bad number '" + std::string(s) + "' in tracepoint format line '" +
                std::string(trim(line)) + "'");
  return v;
}

// "unsigned long call_site", "char prev_comm[16]", "__data_loc char[] name":
// the name is the last identifier; an array suffix stays with the type.
void parse_declaration(std::string_view decl, std::string_view line, EventField* f) {
  std::string_view suffix;
  if (!decl.empty() && decl.back() == ']') {
    const auto open = decl.rfind('[');
    suffix = decl.substr(open == std::string_view::npos ? 0 : open);
    decl = trim(decl.substr(0, decl.size() - suffix.size()));  // no '[': nothing left, refused
  }
  size_t name_at = decl.size();
  while (name_at > 0 &&
         (std::isalnum(static_cast<unsigned char>(decl[name_at - 1])) || decl[name_at - 1] == '_'))
    --name_at;
  const std::string_view type = trim(decl.substr(0, name_at));
  if (name_at == decl.size() || type.empty())
    throw Error("cannot tell the type from the name in tracepoint format line '" +
                std::string(trim(line)) + "'");
  f->name = std::string(decl.substr(name_at));
  f->type = std::string(type) + std::string(suffix);
}

// "\tfield:int node;\toffset:56;\tsize:4;\tsigned:1;" (kernels before 2.6.31
// wrote no signed:).
EventField parse_field(std::string_view line) {
  EventField f;
  bool has_offset = false, has_size = false;
  std::string_view rest = trim(line);
  for (bool first = true; !rest.empty(); first = false) {
    const auto semi = rest.find(';');
    if (semi == std::string_view::npos)
      throw Error("no ';' after '" + std::string(rest) + "' in tracepoint format line '" +
                  std::string(trim(line)) + "'");
    const std::string_view part = trim(rest.substr(0, semi));
    rest = trim(rest.substr(semi + 1));
    const auto colon = part.find(':');
    const std::string_view key = part.substr(0, colon);
    const std::string_view value =
        colon == std::string_view::npos ? std::string_view{} : trim(part.substr(colon + 1));
    if (first) {
      parse_declaration(value, line, &f);  // key is "field", checked by the caller
    } else if (key == "offset") {
      f.offset = parse_u32(value, line);
      has_offset = true;
    } else if (key == "size") {
      f.size = parse_u32(value, line);
      has_size = true;
    } else if (key == "signed") {
      f.is_signed = parse_u32(value, line) != 0;
    }
  }
  if (!has_offset || !has_size)
    throw Error("no offset: or size: in tracepoint format line '" + std::string(trim(line)) + "'");
  return f;
}

std::string read_text(const std::string& path) {
  std::optional<std::string> text = read_file(path);
  if (!text) throw Error("cannot read " + path + ": is the tracepoint there and are you root?");
  return std::move(*text);
}

std::string available_events(const std::string& events_dir) {
  return (fs::path(events_dir).parent_path() / "available_events").string();
}

bool has_id(const fs::path& event_dir) {
  std::error_code ec;
  return fs::is_regular_file(event_dir / "id", ec);
}

// The tracepoints under events_dir that `glob` matches, sorted.
std::vector<Tracepoint> matching_events(const Tracepoint& glob, const std::string& events_dir) {
  std::vector<Tracepoint> out;
  std::error_code ec;
  for (const auto& category : fs::directory_iterator(events_dir, ec)) {
    const std::string c = category.path().filename().string();
    if (!category.is_directory(ec) || fnmatch(glob.category.c_str(), c.c_str(), 0) != 0) continue;
    for (const auto& event : fs::directory_iterator(category.path(), ec)) {
      const std::string e = event.path().filename().string();
      if (fnmatch(glob.name.c_str(), e.c_str(), 0) == 0 && has_id(event.path()))
        out.push_back({c, e});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Tracepoint& a, const Tracepoint& b) { return a.str() < b.str(); });
  return out;
}

// "kmem:kfree, kmem:kmalloc, ..." within about kMaxMatchList characters.
std::string list_names(const std::vector<Tracepoint>& tps) {
  std::string out;
  for (const auto& tp : tps) {
    const std::string next = (out.empty() ? "" : ", ") + tp.str();
    if (out.size() + next.size() > kMaxMatchList) return out + ", ...";
    out += next;
  }
  return out;
}

std::string join_names(const std::vector<const EventField*>& fields) {
  std::string out;
  for (const auto* f : fields) out += (out.empty() ? "" : ", ") + f->name;
  return out;
}

}  // namespace

bool EventField::numeric() const {
  // Arrays, __data_loc and __rel_loc ("__data_loc char[]") all carry brackets.
  if (type.find_first_of("[*") != std::string::npos) return false;
  if (starts_with(type, "struct ") || starts_with(type, "union ")) return false;
  return size == 1 || size == 2 || size == 4 || size == 8;
}

const EventField* EventFormat::find(std::string_view field) const {
  for (const auto& f : fields)
    if (f.name == field) return &f;
  return nullptr;
}

EventFormat parse_event_format(std::string_view text) {
  EventFormat format;
  bool seen_name = false, seen_id = false, in_fields = false;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const std::string_view t = trim(line);
    if (t.empty()) continue;
    if (starts_with(t, "print fmt:")) break;  // C expressions, possibly over several lines
    if (in_fields) {
      if (!starts_with(t, "field:"))
        throw Error("unexpected line '" + std::string(t) + "' among a tracepoint's fields");
      EventField f = parse_field(line);
      if (!starts_with(f.name, "common_")) format.fields.push_back(std::move(f));
    } else if (starts_with(t, "name:")) {
      format.name = std::string(trim(t.substr(5)));
      seen_name = !format.name.empty();
    } else if (starts_with(t, "ID:")) {
      format.id = parse_u32(trim(t.substr(3)), line);
      seen_id = true;
    } else if (t == "format:") {
      in_fields = true;
    } else {
      throw Error("unexpected line '" + std::string(t) + "' before a tracepoint's format:");
    }
  }
  const char* missing = !seen_name ? "name:" : !seen_id ? "ID:" : !in_fields ? "format:" : nullptr;
  if (missing) throw Error(std::string("not a tracepoint format: no '") + missing + "' line");
  return format;
}

EventFormat read_event_format(const std::string& events_dir, const Tracepoint& tp) {
  const std::string path = events_dir + "/" + tp.category + "/" + tp.name + "/format";
  const std::string text = read_text(path);
  try {
    EventFormat format = parse_event_format(text);
    format.system = tp.category;
    return format;
  } catch (const Error& e) {
    throw Error("cannot parse " + path + ": " + e.what());
  }
}

std::vector<Tracepoint> resolve_events(const std::vector<Tracepoint>& specs,
                                       const std::string& events_dir) {
  std::vector<Tracepoint> out;
  std::set<std::string> seen;
  size_t from_globs = 0;
  for (const auto& spec : specs) {
    if (!is_glob(spec.category) && !is_glob(spec.name)) {
      if (!has_id(fs::path(events_dir) / spec.category / spec.name))
        throw Error("no such tracepoint '" + spec.str() + "' (nothing at " + events_dir + "/" +
                    spec.category + "/" + spec.name + "): pick one from " +
                    available_events(events_dir));
      if (seen.insert(spec.str()).second) out.push_back(spec);
      continue;
    }
    const std::vector<Tracepoint> matched = matching_events(spec, events_dir);
    if (matched.empty())
      throw Error("-e '" + spec.str() + "' matches no tracepoint: pick from " +
                  available_events(events_dir));
    for (const auto& tp : matched)
      if (seen.insert(tp.str()).second) {
        out.push_back(tp);
        ++from_globs;
      }
    if (from_globs > kMaxGlobEvents)
      throw Error("-e '" + spec.str() + "' brings the tracepoints matched by globs to " +
                  std::to_string(from_globs) + ", more than " + std::to_string(kMaxGlobEvents) +
                  ": narrow the glob");
    spdlog::info("-e {} matched {} tracepoint{}: {}", spec.str(), matched.size(),
                 matched.size() == 1 ? "" : "s", list_names(matched));
  }
  return out;
}

EventField weight_field(const EventFormat& format, const std::string& field,
                        const std::string& option) {
  const std::string event = format.system.empty() ? format.name : format.system + ":" + format.name;
  std::vector<const EventField*> all, numeric;
  for (const auto& f : format.fields) {
    all.push_back(&f);
    if (f.numeric()) numeric.push_back(&f);
  }
  const EventField* f = format.find(field);
  const std::string numbers =
      numeric.empty() ? "it has no numeric fields" : "numeric fields are " + join_names(numeric);
  if (!f)
    throw Error(option + field + ": " + event + " has no field '" + field +
                "': " + (all.empty() ? "it has no fields of its own" : numbers));
  if (!f->numeric())
    throw Error(option + field + ": " + event + " field '" + field + "' is " + f->type +
                ", not a number: " + numbers);
  return *f;
}

uint32_t trace_raw_len(const EventFormat& format) {
  uint32_t end = 8;
  for (const EventField& f : format.fields) {
    if (f.type.find("__data_loc") != std::string::npos ||
        f.type.find("__rel_loc") != std::string::npos)
      return SMT_TRACE_RAW_MAX;
    end = std::max(end, f.offset + f.size);
  }
  return std::min<uint32_t>(end, SMT_TRACE_RAW_MAX);
}

}  // namespace stackmapd

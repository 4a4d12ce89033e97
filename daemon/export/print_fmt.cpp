// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/print_fmt.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

namespace stackmapd {
namespace {

// The end of the string or char literal opening at `i` (one past its quote).
size_t skip_literal(std::string_view s, size_t i) {
  const char quote = s[i++];
  while (i < s.size() && s[i] != quote) i += s[i] == '\\' ? 2 : 1;
  return std::min(i + 1, s.size());
}

// Arguments split at the commas outside brackets and literals.
std::vector<std::string> split_args(std::string_view s) {
  std::vector<std::string> args;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '"' || c == '\'') {
      i = skip_literal(s, i);
      continue;
    }
    if (c == '(' || c == '{' || c == '[') ++depth;
    if (c == ')' || c == '}' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      args.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
    ++i;
  }
  args.emplace_back(s.substr(start));
  return args;
}

// The print function for the %p conversion whose extension starts at `ext`
// (the character after 'p'), or nullptr to leave it to libtraceevent.
const char* pointer_function(std::string_view fmt, size_t ext) {
  const char e = ext < fmt.size() ? fmt[ext] : '\0';
  if (!std::isalnum(static_cast<unsigned char>(e))) return kPrintPointer;
  const char after = ext + 1 < fmt.size() ? fmt[ext + 1] : '\0';
  if (std::isalnum(static_cast<unsigned char>(after))) return nullptr;  // %pSR, %pIS...
  if (e == 'S' || e == 'F') return kPrintSymOff;
  if (e == 's' || e == 'f') return kPrintSymName;
  return nullptr;
}

// Rewrites `fmt` (between the quotes) and `args` in place; false when the
// conversions and the arguments do not match up.
bool rewrite(std::string& fmt, std::vector<std::string>& args) {
  std::string out;
  size_t arg = 0;
  for (size_t i = 0; i < fmt.size();) {
    if (fmt[i] != '%') {
      out += fmt[i++];
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '%') {
      out += "%%";
      i += 2;
      continue;
    }
    size_t j = i + 1;
    while (j < fmt.size() && std::strchr("-+ #0", fmt[j])) ++j;
    for (bool precision = false;; precision = true) {  // width, then .precision
      if (j < fmt.size() && fmt[j] == '*') {
        ++arg, ++j;
      } else {
        while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) ++j;
      }
      if (precision || j >= fmt.size() || fmt[j] != '.') break;
      ++j;
    }
    while (j < fmt.size() && std::strchr("hlLqjzt", fmt[j])) ++j;
    if (j >= fmt.size()) return false;
    const char conv = fmt[j++];
    if (arg >= args.size()) return false;
    const char* func = conv == 'p' && j == i + 2 ? pointer_function(fmt, j) : nullptr;
    if (func) {
      out += "%s";
      if (func != kPrintPointer) ++j;  // the extension letter
      args[arg] = std::string(func) + "(" + args[arg] + ")";
    } else {
      out.append(fmt, i, j - i);
    }
    ++arg;
    i = j;
  }
  fmt = out;
  return true;
}

}  // namespace

std::string ftrace_pointers(std::string_view text) {
  static constexpr std::string_view kKey = "print fmt: \"";
  const size_t key = text.find(kKey);
  if (key == std::string_view::npos) return std::string(text);
  const size_t open = key + kKey.size() - 1;
  const size_t close = skip_literal(text, open);  // one past the closing quote
  size_t line_end = text.find('\n', close);
  if (line_end == std::string_view::npos) line_end = text.size();
  if (close > line_end || text[close - 1] != '"') return std::string(text);
  std::string fmt(text.substr(open + 1, close - open - 2));
  std::string_view rest = text.substr(close, line_end - close);
  const size_t comma = rest.find(',');
  if (comma == std::string_view::npos) return std::string(text);  // no arguments
  std::vector<std::string> args = split_args(rest.substr(comma + 1));
  if (!rewrite(fmt, args)) return std::string(text);
  std::string out(text.substr(0, open + 1));
  out += fmt;
  out += '"';
  for (const std::string& a : args) out += "," + a;
  out += text.substr(line_end);
  return out;
}

}  // namespace stackmapd

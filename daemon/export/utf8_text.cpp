// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/utf8_text.h"

namespace stackmapd {

namespace {

// The length of the well-formed sequence at `s[i]`, 0 if there is none.
// Second bytes are bounded per lead byte: that rules out overlong forms
// (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code points above
// U+10FFFF (F4 90..BF); C0, C1 and F5..FF never lead.
size_t sequence_at(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) len = 2;
  else if (lead >= 0xe0 && lead <= 0xef) len = 3;
  else if (lead >= 0xf0 && lead <= 0xf4) len = 4;
  else return 0;
  if (lead == 0xe0) lo = 0xa0;
  else if (lead == 0xed) hi = 0x9f;
  else if (lead == 0xf0) lo = 0x90;
  else if (lead == 0xf4) hi = 0x8f;
  if (i + len > s.size() || b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if ((b(k) & 0xc0) != 0x80) return 0;
  return len;
}

void append_escaped(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 0xf];
}

// U+FFFE and U+FFFF, the noncharacters XML 1.0 leaves out.
bool xml_nonchar(std::string_view seq) { return seq == "\xef\xbf\xbe" || seq == "\xef\xbf\xbf"; }

}  // namespace

bool is_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = sequence_at(bytes, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void append_utf8(std::string& out, std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    if (const size_t len = sequence_at(bytes, i)) {
      out.append(bytes, i, len);
      i += len;
    } else {
      append_escaped(out, static_cast<unsigned char>(bytes[i++]));
    }
  }
}

std::string utf8_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_utf8(out, bytes);
  return out;
}

std::string line_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char c : utf8_text(bytes)) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && b != '\t') || b == 0x7f) append_escaped(out, b);
    else out += c;
  }
  return out;
}

void append_markup(std::string& out, std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = sequence_at(bytes, i);
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (len == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
      append_escaped(out, c);
      ++i;
      continue;
    }
    const std::string_view seq = bytes.substr(i, len);
    i += len;
    if (xml_nonchar(seq)) {
      for (char b : seq) append_escaped(out, static_cast<unsigned char>(b));
      continue;
    }
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += seq;
    }
  }
}

std::string markup_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_markup(out, bytes);
  return out;
}

}  // namespace stackmapd

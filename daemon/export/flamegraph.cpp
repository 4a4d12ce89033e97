// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/flamegraph.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

#include "daemon/export/flame_diff.h"
#include "daemon/export/flamegraph_script.h"
#include "daemon/export/utf8_text.h"
#include "daemon/export/weight_unit.h"

namespace stackmapd {

namespace {

// Frames of `s` root first; a stack without frames is one "[unknown]" frame.
std::vector<const std::string*> root_first(const SymbolizedStack& s) {
  static const std::string unknown = "[unknown]";
  std::vector<const std::string*> path;
  for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it) path.push_back(&*it);
  if (path.empty()) path.push_back(&unknown);
  return path;
}

std::string folded_frame(const std::string& frame) {
  // An empty name (a thread may name itself "") would leave an empty field.
  if (frame.empty()) return "_";
  std::string out = utf8_text(frame);
  for (char& c : out) {
    if (c == ';') c = ':';
    else if (static_cast<unsigned char>(c) <= ' ' || c == '\x7f') c = '_';
  }
  return out;
}

// --- SVG ---

// Fixed-point without the C locale's say: the same bytes on every machine.
std::string fixed(double v, int digits) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, digits);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

// flamegraph.pl's "hot" palette, chosen by a hash of the name instead of at random.
std::string warm_color(std::string_view name) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  const unsigned r = 205 + static_cast<unsigned>((h >> 8) % 51);
  const unsigned g = static_cast<unsigned>((h >> 24) % 231);
  const unsigned b = static_cast<unsigned>((h >> 40) % 56);
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

constexpr int kFontSize = 12;
constexpr double kFontWidth = 0.62;  // average glyph width per font size (DejaVu, Verdana)
constexpr int kXPad = 10;
constexpr int kTitleSpace = kFontSize * 3;
constexpr int kDetailsSpace = kFontSize * 2 + 10;

// The label that fits in `px` after 3 px margins: the name, or its start and "..", or nothing
// under 3 glyphs.
std::string clip_label(const std::string& name, double px) {
  if (px < 6) return {};
  const auto fit = static_cast<size_t>((px - 6) / (kFontSize * kFontWidth));
  if (fit < 3) return {};
  if (name.size() <= fit) return name;
  size_t cut = fit - 2;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xc0) == 0x80) --cut;  // UTF-8
  return name.substr(0, cut) + "..";
}

struct Frame {
  const FlameTree::Node* node;
  int depth;
  double x, width;
};

void layout(const FlameTree& tree, const FlameTree::Node& node, int depth, double x, double scale,
            double min_px, std::vector<Frame>& out) {
  const double width = static_cast<double>(node.value) * scale;
  if (width < min_px) return;
  out.push_back({&node, depth, x, width});
  for (const auto& [name, id] : node.children) {
    const FlameTree::Node& child = tree.node(id);
    layout(tree, child, depth + 1, x, scale, min_px, out);
    x += static_cast<double>(child.value) * scale;
  }
}

}  // namespace

std::string folded_path(const SymbolizedStack& s) {
  std::string path;
  for (const std::string* frame : root_first(s)) {
    if (!path.empty()) path += ';';
    path += folded_frame(*frame);
  }
  return path;
}

std::string format_folded(const std::vector<SymbolizedStack>& stacks) {
  std::map<std::string, uint64_t> paths;
  for (const auto& s : stacks)
    if (s.count) paths[folded_path(s)] += s.count;
  std::string out;
  for (const auto& [path, count] : paths) out += path + " " + std::to_string(count) + "\n";
  return out;
}

namespace {

// The amount of `v` as tooltips say it: "42 events", or in the snapshot's weight unit.
std::string amount(uint64_t v, const std::string& unit) {
  return unit.empty() ? std::to_string(v) + " events" : format_weight(v, unit);
}

double percent(uint64_t part, uint64_t total) {
  return total ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 0;
}

// A plain graph (warm colours, "name (N events, P%)") or a differential one.
std::string render_svg(const FlameTree& tree, const FlameGraphOptions& opt, bool diff) {
  const int width = std::max(opt.width, 2 * kXPad + 100);
  const int frame_h = std::max(opt.frame_height, 4);
  const FlameTree::Node& root = tree.root();
  const double max_delta = diff ? tree.max_delta() : 0;

  std::vector<Frame> frames;
  const double scale =
      root.value ? static_cast<double>(width - 2 * kXPad) / static_cast<double>(root.value) : 0;
  if (root.value) layout(tree, root, 0, kXPad, scale, opt.min_frame_px, frames);
  int max_depth = 0;
  for (const Frame& f : frames) max_depth = std::max(max_depth, f.depth);
  const int height = (max_depth + 1) * frame_h + kTitleSpace + kDetailsSpace;

  const std::string w = std::to_string(width), h = std::to_string(height);
  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
  out += "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" +
         h + "\" viewBox=\"0 0 " + w + " " + h + "\" data-xpad=\"" + std::to_string(kXPad) +
         "\" data-glyph=\"" + fixed(kFontSize * kFontWidth, 2) + "\">\n";
  out +=
      "<defs><linearGradient id=\"background\" x1=\"0\" x2=\"0\" y1=\"0\" y2=\"1\">"
      "<stop stop-color=\"#eeeeee\" offset=\"5%\"/><stop stop-color=\"#eeeeb0\" offset=\"95%\"/>"
      "</linearGradient></defs>\n";
  out += "<style>text{font-family:Verdana,\"DejaVu Sans\",sans-serif;font-size:" +
         std::to_string(kFontSize) +
         "px;fill:#000}#title{text-anchor:middle;font-size:17px}#unzoom{cursor:pointer}"
         ".f:hover rect{stroke:#000;stroke-width:0.5}.f{cursor:pointer}</style>\n";
  out += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h +
         "\" fill=\"url(#background)\"/>\n";
  out += "<text id=\"title\" x=\"" + std::to_string(width / 2) + "\" y=\"24\">" +
         markup_text(opt.title) + "</text>\n";
  out += "<text id=\"unzoom\" x=\"" + std::to_string(kXPad) +
         "\" y=\"24\" style=\"display:none\">Reset Zoom</text>\n";
  out += "<text id=\"details\" x=\"" + std::to_string(kXPad) + "\" y=\"" +
         std::to_string(height - kDetailsSpace / 2) + "\">" +
         (root.value ? " " : "No stacks recorded") + "</text>\n";
  out += "<g id=\"frames\">\n";
  for (const Frame& f : frames) {
    const FlameTree::Node& n = *f.node;
    const int y = height - kDetailsSpace - (f.depth + 1) * frame_h;
    const double share = percent(n.value, root.value);
    std::string tip = amount(n.value, opt.unit) + ", " + fixed(share, 2) + "%";
    if (diff) {
      const double was = percent(n.base, root.base);
      tip = amount(n.base, opt.unit) + " \u2192 " + amount(n.value, opt.unit) + ", " +
            fixed(was, 2) + "% \u2192 " + fixed(share, 2) + "%, " + (share >= was ? "+" : "") +
            fixed(share - was, 2) + "%";
    }
    out += "<g class=\"f\"><title>";
    append_markup(out, n.name);
    out += " (" + markup_text(tip) + ")</title>";
    out += "<rect x=\"" + fixed(f.x, 2) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
           fixed(f.width, 2) + "\" height=\"" + std::to_string(frame_h - 1) +
           "\" rx=\"2\" ry=\"2\" fill=\"" +
           (diff ? diff_color(tree.delta(n), max_delta) : warm_color(n.name)) + "\"/>";
    out += "<text x=\"" + fixed(f.x + 3, 2) + "\" y=\"" + std::to_string(y + frame_h - 5) + "\">";
    append_markup(out, clip_label(n.name, f.width));
    out += "</text></g>\n";
  }
  out += "</g>\n<script><![CDATA[\n";
  out += kFlameGraphScript;
  out += "]]></script>\n</svg>\n";
  return out;
}

}  // namespace

std::string render_flamegraph_svg(const std::vector<SymbolizedStack>& stacks,
                                  const FlameGraphOptions& opt) {
  return render_svg(flame_tree({}, stacks), opt, false);
}

std::string render_diff_flamegraph_svg(const std::vector<SymbolizedStack>& base,
                                       const std::vector<SymbolizedStack>& stacks,
                                       const FlameGraphOptions& opt) {
  return render_svg(flame_tree(base, stacks), opt, true);
}

}  // namespace stackmapd

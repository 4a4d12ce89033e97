#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The flame graph in a real browser: renders a stack_map.json fixture to SVG with our library,
# screenshots it with headless Chromium, and checks the PNG is a flame graph, not a blank page or
# Chromium's XML error page: enough pixels of the warm palette, a bottom row ("all") across the
# full width, many stacked levels and colors, and dark label text on the frames. Then clicks a
# frame (a script appended to a copy) and checks the click-to-zoom script widened it.
# Fails (never skips) without chromium: scripts/deps.sh installs it.
#   flamegraph_render_test.sh FLAMEGRAPH_RENDER FIXTURE_JSON [PYTHON]
# FLAMEGRAPH_KEEP=DIR keeps the SVGs, screenshots and flame.folded there to look at.
set -euo pipefail

render=$1
fixture=$2
python=${3:-python3}

chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
  echo "FAIL: chromium not found: install it (scripts/deps.sh does: apt-get install chromium)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$render" "$fixture" "$work/flame.svg" "$work/flame.folded"
# The SVG is XML a browser accepts: parse it strictly first, for a clear message.
"$python" -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$work/flame.svg"

# HOME too: Chromium writes crash and font caches there. The console goes to the log, where an
# uncaught script error fails the test.
screenshot() {  # SVG PNG
  local log=${2%.png}.log
  HOME=$work timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$work")" --hide-scrollbars --enable-logging=stderr --v=0 \
    --screenshot="$2" --window-size=1200,800 "file://$1" > "$log" 2>&1 || {
    echo "FAIL: chromium did not render $1:" >&2
    tail -20 "$log" >&2
    exit 1
  }
  if [[ ! -s $2 ]]; then
    echo "FAIL: chromium wrote no screenshot of $1:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  if grep -q ':CONSOLE.*Uncaught' "$log"; then
    echo "FAIL: script error in $1:" >&2
    grep ':CONSOLE' "$log" >&2
    exit 1
  fi
}
screenshot "$work/flame.svg" "$work/flame.png"

# Zoom: the same SVG with a script appended that clicks a frame of 20..60% width; that frame must
# then span the whole width, and "Reset Zoom" appear.
zoom_y=$("$python" - "$work/flame.svg" "$work/zoom.svg" <<'PY'
import json, re, sys
svg = open(sys.argv[1]).read()
span = int(re.search(r'<svg[^>]* width="(\d+)"', svg).group(1)) - 20
for m in re.finditer(r'<title>([^<]*)</title><rect x="[0-9.]+" y="(\d+)" width="([0-9.]+)"', svg):
    if 0.2 * span <= float(m.group(3)) <= 0.6 * span:
        break
else:
    sys.exit("no frame of 20..60% width to zoom on")
title = m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"') \
    .replace("&apos;", "'").replace("&amp;", "&")
click = ('<script><![CDATA[(function () { var gs = document.getElementsByTagName("g");'
         ' for (var i = 0; i < gs.length; i++) { var t = gs[i].getElementsByTagName("title")[0];'
         ' if (t && t.textContent === %s) { gs[i].dispatchEvent(new MouseEvent("click",'
         ' {bubbles: true})); return; } } throw new Error("frame not found"); })();]]></script>'
         % json.dumps(title))
open(sys.argv[2], "w").write(svg.replace("</svg>", click + "</svg>"))
print(m.group(2))
PY
)
screenshot "$work/zoom.svg" "$work/zoom.png"
if [[ -n ${FLAMEGRAPH_KEEP:-} ]]; then
  mkdir -p "$FLAMEGRAPH_KEEP"
  cp "$work"/*.svg "$work"/*.png "$work/flame.folded" "$FLAMEGRAPH_KEEP/"
fi

"$python" - "$work/flame.png" "$work/flame.svg" "$work/zoom.png" "$zoom_y" <<'EOF'
import re, struct, sys, zlib

def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = head
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {head}"
    bpp = 4 if color == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev, pos = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1: line[i] = (line[i] + a) & 255
            elif kind == 2: line[i] = (line[i] + b) & 255
            elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows

def warm(p):  # flamegraph's "hot" palette: r 205..255, g 0..230, b 0..55
    r, g, b = p
    return r >= 200 and g <= 235 and b <= 60 and r - b >= 140

png, svg = sys.argv[1], open(sys.argv[2]).read()
width, height, rows = read_png(png)
svg_w = int(re.search(r'<svg[^>]* width="(\d+)"', svg).group(1))
svg_h = int(re.search(r'<svg[^>]* height="(\d+)"', svg).group(1))
frames = len(re.findall(r'<g class="f">', svg))
errors = []
if (width, height) != (1200, 800):
    errors.append(f"screenshot is {width}x{height}, asked for 1200x800")

warm_total, warm_rows, colors, widest = 0, 0, set(), (0, 0, 0, 0)
for y, row in enumerate(rows):
    xs = [x for x, p in enumerate(row) if warm(p)]
    warm_total += len(xs)
    if len(xs) >= 100:
        warm_rows += 1
    if len(xs) > widest[0]:
        widest = (len(xs), y, xs[0], xs[-1])
    colors.update(p for p in row if warm(p))
span = svg_w - 20  # 10 px padding either side
count, wy, x0, x1 = widest
print(f"{width}x{height} PNG of a {svg_w}x{svg_h} SVG with {frames} frames: {warm_total} warm "
      f"pixels, {warm_rows} warm rows, {len(colors)} warm colors; widest row y={wy}: "
      f"{count} px from x={x0} to x={x1}")

if warm_total < 20000:
    errors.append(f"only {warm_total} pixels in the flame palette: blank or not rendered")
if count < 0.95 * span or x0 > 12 or x1 < svg_w - 13:
    errors.append(f"widest row covers {count} px from {x0} to {x1}: the root frame should span "
                  f"10..{svg_w - 10}")
if wy < svg_h - 34 - 16 or wy >= svg_h - 34:
    errors.append(f"widest row at y={wy}: the root frame should be the bottom row "
                  f"({svg_h - 50}..{svg_h - 34})")
levels = (svg_h - 70) // 16
if warm_rows < (levels - 2) * 12:
    errors.append(f"{warm_rows} rows with flame pixels for {levels} levels: frames missing")
if len(colors) < 20:
    errors.append(f"only {len(colors)} warm colors: frames not colored by name")

# Labels: dark glyph pixels on the frames (needs a font; scripts/deps.sh installs one).
dark = sum(1 for y in range(max(0, svg_h - 34 - levels * 16), min(height, svg_h - 34))
           for p in rows[y][10:svg_w - 10] if sum(p) < 250)
print(f"{dark} dark label pixels on the frames")
if dark < 2000:
    errors.append(f"only {dark} dark pixels on the frames: labels not drawn (no font?)")

# Zoomed on the frame at zoom_y: one color (that frame's) now fills its row, which it did not
# before; and "Reset Zoom" is shown. Row y+1: above the label glyphs.
from collections import Counter
_, _, zrows = read_png(sys.argv[3])
zy = int(sys.argv[4]) + 1
def one_color(row):
    return Counter(row[10:svg_w - 10]).most_common(1)[0][1]
def reset_button(rs):
    return sum(1 for y in range(10, 28) for p in rs[y][5:100] if sum(p) < 250)
before, after = one_color(rows[zy]), one_color(zrows[zy])
print(f"zoom: the clicked frame's row y={zy}: widest color {before} px before the click, "
      f"{after} px after; Reset Zoom {reset_button(rows)} -> {reset_button(zrows)} dark px")
if before > 0.65 * span or after < 0.98 * span:
    errors.append(f"the click did not zoom: row y={zy} has {before} -> {after} px of one color, "
                  f"of {span}")
if reset_button(rows) > 0 or reset_button(zrows) < 50:
    errors.append("\"Reset Zoom\" not shown after the click, or shown before")

for e in errors:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF
echo "flamegraph_render: OK"

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# decode --diff on two real exports, as root on this kernel: stackmapd records
# kmem:kmem_cache_alloc of one process that stat()s in a loop (A), then of one
# that also opens sockets (B). In B against A the socket path (__sys_socket)
# grew from nothing: red in the SVG, 0 then N in the folded columns; the
# stat() path shrank: blue. The folded columns are each export's own --folded
# counts; a pair of directories (their JSON) and a pair of FSMB files give the
# same graph.
#   decode_diff_test.sh STACKMAPD [PYTHON]
set -u
BIN=$1
PY=${2:-python3}

tmp=$(mktemp -d /tmp/H-diff.XXXXXX)
loads=()
cleanup() {
  for p in "${loads[@]}"; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

# record NAME PYTHON_LOOP_BODY: 3 s of one workload process's allocations, exported to $tmp/NAME.
record() {
  "$PY" -c "import os, socket
while True:
$2" &
  local load=$!
  loads+=("$load")
  local out=$tmp/$1
  timeout 30 "$BIN" -e kmem:kmem_cache_alloc --pid "$load" --duration 3 --output "$out" 2> "$out.err"
  local rc=$?
  kill "$load" && wait "$load" 2> /dev/null
  check "recorded $1 ($(tail -1 "$out.err"))" '[ $rc -eq 0 ] && [ -s "$out/stack_map.json" ]'
}
record a '    os.stat("/")'
record b '    os.stat("/"); socket.socket().close()'

"$BIN" decode --diff "$tmp/a" "$tmp/b" --svg "$tmp/diff.svg" --folded "$tmp/diff.folded" 2> "$tmp/diff.err"
rc=$?
check "decode --diff A B writes the SVG and the folded columns ($(tail -1 "$tmp/diff.err"))" \
  '[ $rc -eq 0 ] && [ -s "$tmp/diff.svg" ] && [ -s "$tmp/diff.folded" ]'
check "every folded line is 'path A B'" '! grep -qvE "^[^ ]+ [0-9]+ [0-9]+$" "$tmp/diff.folded"'
"$BIN" decode "$tmp/a/stack_map.json" --folded - > "$tmp/a.folded" 2> /dev/null
"$BIN" decode "$tmp/b/stack_map.json" --folded - > "$tmp/b.folded" 2> /dev/null
column() { awk -v c="$1" '$c > 0 { print $1, $c }' "$tmp/diff.folded"; }
check "its A column is A's --folded ($(wc -l < "$tmp/a.folded") paths), its B column B's ($(wc -l < "$tmp/b.folded"))" \
  '[ -s "$tmp/a.folded" ] && diff <(column 2) "$tmp/a.folded" > /dev/null && diff <(column 3) "$tmp/b.folded" > /dev/null'
sock=$(awk '$1 ~ /__sys_socket/ { a += $2; b += $3 } END { print a + 0, b + 0 }' "$tmp/diff.folded")
check "the socket path: none in A, some in B ($sock)" '[ "${sock%% *}" -eq 0 ] && [ "${sock##* }" -gt 0 ]'

# Each drawn frame's name, fill and tooltip; a kind per frame: red, blue, white.
"$PY" - "$tmp/diff.svg" > "$tmp/frames.txt" <<'PY'
import re, sys
svg = open(sys.argv[1]).read()
for name, tip, fill in re.findall(r'<g class="f"><title>(\S+) \(([^<]*)\)</title><rect[^>]* fill="rgb\(([^)]*)\)"', svg):
    r, g, b = map(int, fill.split(','))
    kind = ('red' if r == 255 and g == b < 255 else 'blue' if b == 255 and r == g < 255 else
            'white' if r == g == b == 255 else 'other')
    print(name, kind, tip.replace(' ', '_'))
PY
check "the SVG has frames ($(wc -l < "$tmp/frames.txt")), all red, blue or white" \
  '[ -s "$tmp/frames.txt" ] && ! grep -q " other " "$tmp/frames.txt"'
check "__sys_socket, which grew, is red: $(grep -m1 "^__sys_socket " "$tmp/frames.txt")" \
  'grep -q "^__sys_socket red " "$tmp/frames.txt" && ! grep -q "^__sys_socket blue " "$tmp/frames.txt"'
stat_fn=$(grep -oE '[a-z0-9_]*(fstatat|statx|newstat)[a-z0-9_]*' "$tmp/diff.folded" | sort -u | head -1)
check "the stat() path ($stat_fn), which shrank, is blue: $(grep -m1 "^$stat_fn " "$tmp/frames.txt")" \
  '[ -n "$stat_fn" ] && grep -q "^$stat_fn blue " "$tmp/frames.txt" && ! grep -q "^$stat_fn red " "$tmp/frames.txt"'
check "a tooltip says both amounts, both shares and the change: $(grep -m1 "^__sys_socket " "$tmp/frames.txt" | cut -d" " -f3)" \
  'grep -qE "^__sys_socket red 0_events_→_[1-9][0-9]*_events,_0.00%_→_[0-9.]+%,_\+[0-9.]+%$" "$tmp/frames.txt"'

"$BIN" decode --diff "$tmp/a/stack_map_bin" "$tmp/b/stack_map_bin" --folded - > "$tmp/fsmb.folded" 2> "$tmp/fsmb.err"
check "two FSMB files (this boot's symbols) give the same columns ($(tail -1 "$tmp/fsmb.err"))" \
  'diff "$tmp/fsmb.folded" "$tmp/diff.folded" > /dev/null'

# Bad input: one line naming the problem, non-zero, nothing written.
bad() {  # bad WHAT ARGS...: one line, exit 1, no out.svg
  local what=$1
  shift
  "$BIN" decode "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
  local rc=$?
  check "$what: exit $rc, one line: $(cat "$tmp/bad.err")" \
    '[ $rc -ne 0 ] && [ "$(wc -l < "$tmp/bad.err")" -eq 1 ] && [ ! -e "$tmp/out.svg" ]'
}
bad "--diff with one export" --diff "$tmp/a" --svg "$tmp/out.svg"
bad "--diff with nothing to write" --diff "$tmp/a" "$tmp/b"
bad "--diff with --pprof" --diff "$tmp/a" "$tmp/b" --svg "$tmp/out.svg" --pprof "$tmp/out.pb.gz"
mkdir "$tmp/empty"
bad "--diff from a directory without exports" --diff "$tmp/a" "$tmp/empty" --svg "$tmp/out.svg"
head -c 100 "$tmp/b/stack_map_bin" > "$tmp/cut_bin"
bad "--diff with a truncated FSMB file" --diff "$tmp/a/stack_map_bin" "$tmp/cut_bin" --svg "$tmp/out.svg"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

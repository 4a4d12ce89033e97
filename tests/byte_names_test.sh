#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Names and paths are bytes: as root on this kernel, a process
# that names itself "\xff-x" with prctl(PR_SET_NAME) (tests/workloads/
# attr_workload.c --comm) and a binary run from a directory named $'\xff\xfe'
# (ustack_workload) once broke every export under --by comm and
# --user-stacks: 500 on /stack_map.json, `ctl snapshot` failing, SIGTERM
# aborting (exit 134) with pins, socket and pid file left behind, and a
# foreground session losing all its outputs at the end. Now every output
# carries them escaped as perf does ("\xff-x"):
#   1. the daemon: stack_map.json and GET /stack_map.json are strict UTF-8
#      JSON naming "\xff-x" and the directory, the page is UTF-8, ctl
#      snapshot and ctl top answer, SIGTERM exits 0 and leaves no pin, socket or pid file;
#   2. the foreground: --output, --folded, --svg and --pprof all written,
#      the JSON strict, the SVG well-formed XML, and Debian's pprof reads
#      the profile with the comm among its tags;
#   3. --trace: a comm holding a newline leaves each event in its two lines.
#   byte_names_test.sh STACKMAPD ATTR_WORKLOAD USTACK_WORKLOAD PYTHON
set -u
BIN=$1
ATTR=$2
USTACK=$3
PY=${4:-python3}
PPROF=/usr/lib/go-1.19/pkg/tool/linux_amd64/pprof

tmp=$(mktemp -d /tmp/B-bytes.XXXXXX)
chmod 755 "$tmp"
pins=/sys/fs/bpf/smtq-bytes-$$
pid=
workers=()
cleanup() {
  for w in "${workers[@]}"; do kill "$w" 2> /dev/null; done
  [ -n "$pid" ] && kill -KILL "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$tmp" "$pins"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"
[ -x "$PPROF" ] || { fail "$PPROF is missing: run scripts/deps.sh"; exit 1; }
export PPROF_TMPDIR=$tmp HOME=$tmp

bad_dir=$tmp/$'\xff\xfe'
mkdir "$bad_dir"
cp "$USTACK" "$bad_dir/ustack_workload"
# Both kinds of names at work for SECONDS: the prctl'd comm, the binary's path.
# The binary's process outlives the export, so that its user symbols are there to check.
workload() {  # workload SECONDS USTACK_SECONDS
  "$bad_dir/ustack_workload" "$2" > /dev/null &
  workers+=($!)
  ( end=$((SECONDS + $1))
    while [ $SECONDS -lt $end ]; do "$ATTR" --comm $'\xff-x' stat 2000 2> /dev/null; done ) &
  workers+=($!)
  ( end=$((SECONDS + $1))
    while [ $SECONDS -lt $end ]; do "$ATTR" --comm $'nl\nx' stat 2000 2> /dev/null; done ) &
  workers+=($!)
}
# strict_json FILE: the file decodes as strict UTF-8 and parses as JSON; prints
# whether it holds the escaped comm and the escaped directory.
strict_json() {
  "$PY" - "$1" << 'PYEOF'
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8", errors="strict"))
comms = {e.get("comm") for s in d["stacks"] for e in s.get("by", [])}
paths = [b["path"] for b in d.get("user_stacks", {}).get("binaries", [])]
print("comm" if "\\xff-x" in comms else "no-comm",
      "path" if any("/\\xff\\xfe/ustack_workload" in p for p in paths) else "no-path")
PYEOF
}
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# --- 1. the daemon ---------------------------------------------------------
run=$tmp/run
sock=$run/control.sock
"$BIN" daemon --config /dev/null --export-dir "$run" --pin-dir "$pins" --snapshot-interval 3600 \
  -e syscalls:sys_enter_newfstatat --by comm --user-stacks --listen "127.0.0.1:$port" \
  2> "$tmp/daemon.err" &
pid=$!
for _ in $(seq 200); do [ -S "$sock" ] && grep -q "tracing " "$tmp/daemon.err" && break; sleep 0.1; done
check "the daemon runs ($(tail -1 "$tmp/daemon.err"))" '[ -S "$sock" ]'
workload 2 8
sleep 2.5
timeout 20 "$BIN" --socket "$sock" ctl snapshot > "$tmp/snapshot.out" 2>&1
rc=$?
check "ctl snapshot succeeds (rc $rc: $(head -1 "$tmp/snapshot.out"))" '[ $rc -eq 0 ]'
got=$(strict_json "$run/stack_map.json" 2>&1 | tail -1)
check "stack_map.json is strict UTF-8 JSON with the comm and the directory escaped ($got)" \
  '[ "$got" = "comm path" ]'
code=$(curl -s -o "$tmp/http.json" --max-time 20 -w '%{http_code}' "http://127.0.0.1:$port/stack_map.json")
got=$(strict_json "$tmp/http.json" 2>&1 | tail -1)
check "GET /stack_map.json: 200 and strict UTF-8 JSON with the comm (HTTP $code, $got)" \
  '[ "$code" = 200 ] && [[ "$got" == comm* ]]'
code=$(curl -s -o "$tmp/page.html" --max-time 20 -w '%{http_code}' "http://127.0.0.1:$port/")
check "GET /: 200 and UTF-8 (HTTP $code)" \
  '[ "$code" = 200 ] && iconv -f UTF-8 -t UTF-8 "$tmp/page.html" > /dev/null'
# The page's data: the comm among the --by values its filter offers.
code=$(curl -s -o "$tmp/flame.json" --max-time 20 -w '%{http_code}' "http://127.0.0.1:$port/flame.json")
got=$("$PY" - "$tmp/flame.json" << 'PYEOF' 2>&1 | tail -1
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8", errors="strict"))
values = [v for v, _ in d["keys"].get("comm", [])]
print("key" if "\\xff-x" in values else "no-key")
PYEOF
)
check "GET /flame.json: 200, strict UTF-8 JSON naming the comm (HTTP $code, $got)" \
  '[ "$code" = 200 ] && [ "$got" = "key" ]'
timeout 20 "$BIN" --socket "$sock" ctl top 1000 > "$tmp/top.out" 2>&1
rc=$?
check "ctl top answers in UTF-8 and names the comm (rc $rc)" \
  '[ $rc -eq 0 ] && iconv -f UTF-8 -t UTF-8 "$tmp/top.out" > /dev/null && grep -qF "\xff-x" "$tmp/top.out"'
wait "${workers[@]}" 2> /dev/null
workers=()
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "SIGTERM: exit 0 (exit $rc: $(grep -v "^.*info" "$tmp/daemon.err" | tail -1))" '[ $rc -eq 0 ]'
check "SIGTERM: no pin, control socket or pid file left" \
  '[ -z "$(ls -A "$pins" 2> /dev/null)" ] && [ ! -e "$sock" ] && [ ! -e "$run/stackmapd.pid" ]'

# --- 2. the foreground -------------------------------------------------------
fg=$tmp/fg
timeout 60 "$BIN" -e syscalls:sys_enter_newfstatat --by comm --user-stacks --duration 5 \
  --output "$fg" --pprof "$tmp/fg.pb.gz" --folded "$tmp/fg.folded" --svg "$tmp/fg.svg" \
  > /dev/null 2> "$tmp/fg.err" &
fgpid=$!
for _ in $(seq 200); do grep -q "tracing " "$tmp/fg.err" && break; sleep 0.1; done
workload 2 7
wait "$fgpid"
rc=$?
wait "${workers[@]}" 2> /dev/null
workers=()
check "the foreground session exits 0 (rc $rc: $(tail -1 "$tmp/fg.err"))" '[ $rc -eq 0 ]'
missing=$(for f in "$fg"/stack_map "$fg"/stack_map_stat "$fg"/stack_map_bin "$fg"/stack_map.json \
  "$tmp"/fg.pb.gz "$tmp"/fg.folded "$tmp"/fg.svg; do [ -s "$f" ] || echo "$f"; done)
check "and writes every file (missing: ${missing:-none})" '[ -z "$missing" ]'
got=$(strict_json "$fg/stack_map.json" 2>&1 | tail -1)
check "its stack_map.json is strict UTF-8 JSON with both names escaped ($got)" \
  '[ "$got" = "comm path" ]'
check "its folded lines start with the escaped comm" 'grep -q "^\\\\xff-x;" "$tmp/fg.folded"'
check "its SVG is well-formed XML" \
  '"$PY" -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$tmp/fg.svg"'
"$PPROF" -tags "$tmp/fg.pb.gz" > "$tmp/fg.tags" 2> "$tmp/fg.tags.err"
rc=$?
check "pprof reads the profile and tags samples with the escaped comm (rc $rc: $(head -1 "$tmp/fg.tags.err"))" \
  '[ $rc -eq 0 ] && grep -qF "\xff-x" "$tmp/fg.tags"'
"$PPROF" -raw "$tmp/fg.pb.gz" > "$tmp/fg.raw" 2>&1
check "pprof -raw names the binary under its escaped directory" \
  'grep -qF "/\xff\xfe/ustack_workload" "$tmp/fg.raw"'

# --trace, the comm with a newline only: each event still two lines.
timeout 60 "$BIN" -e syscalls:sys_enter_newfstatat --comm $'nl\nx' --duration 3 --output "$tmp/tr" \
  --trace "$tmp/fg.trace" > /dev/null 2> "$tmp/tr.err" &
trpid=$!
for _ in $(seq 200); do grep -q "tracing " "$tmp/tr.err" && break; sleep 0.1; done
workload 2 1
wait "$trpid"
wait "${workers[@]}" 2> /dev/null
workers=()
traced=$(sed -n 's/.*trace: \([0-9]*\) events written.*/\1/p' "$tmp/tr.err")
lines=$(wc -l < "$tmp/fg.trace")
check "--trace keeps each event in two lines, a newline in a comm escaped ($traced events, $lines lines)" \
  '[ "${traced:-0}" -gt 0 ] && [ "$lines" -eq $((2 * traced)) ] && grep -qF "nl\x0ax-" "$tmp/fg.trace"'

echo "$failures failures"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --perfetto (issue 15), as root on this kernel: a sched:sched_switch
# session's trace decodes with protoc against tests/perfetto/'s schema of the
# fields we write, and tests/perfetto/check_trace.py finds its invariants:
# one PerfSample per event (= the session's hits), every callstack interned
# once before use, frames root first (each callstack a stack of the session's
# stack_map.json), frame ids unpacked, threads named, BOOTTIME timestamps
# inside the session. Bad input: one line, a non-zero exit, no file left.
#   perfetto_test.sh STACKMAPD SOURCE_DIR PYTHON
set -u
BIN=$1
SRC=$2
PY=${3:-python3}
SCHEMA_DIR=$SRC/tests/perfetto

tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"
command -v protoc > /dev/null || { fail "protoc is missing: run scripts/deps.sh"; exit 1; }
boottime() { "$PY" -c 'import time; print(time.clock_gettime_ns(time.CLOCK_BOOTTIME))'; }

t=$tmp/trace.pftrace
start=$(boottime)
timeout 30 "$BIN" -e sched:sched_switch --perfetto "$t" --duration 2 --output "$tmp/out" \
  > "$tmp/run.out" 2> "$tmp/run.err"
rc=$?
end=$(boottime)
check "'stackmapd -e sched:sched_switch --perfetto' exits 0 ($(tail -1 "$tmp/run.err"))" '[ $rc -eq 0 ]'
check "the trace is renamed into place, mode 0640, no temporary file left" \
  '[ -s "$t" ] && [ ! -e "$t.tmp" ] && [ "$(stat -c %a "$t")" = 640 ]'
protoc --decode=stackmapd_test.Trace -I "$SCHEMA_DIR" "$SCHEMA_DIR/stackmapd_trace.proto" \
  < "$t" > "$tmp/decoded" 2> "$tmp/decoded.err"
rc=$?
check "protoc --decode reads it with our schema ($(head -1 "$tmp/decoded.err"))" \
  '[ $rc -eq 0 ] && grep -q "perf_sample {" "$tmp/decoded" && grep -q "process_tree {" "$tmp/decoded"'
check "protoc finds no field outside the schema (no unknown field numbers)" \
  '! grep -qE "^ *[0-9]+: " "$tmp/decoded"'
check "the first packet clears the incremental state and interns the kernel mapping" \
  '[ "$(awk "/^packet {/{n++} n==1" "$tmp/decoded" | grep -cE "sequence_flags: 1|mappings \{|first_packet_on_sequence: true")" -eq 3 ]'
"$PY" "$SCHEMA_DIR/check_trace.py" "$t" "$tmp/out/stack_map.json" "$start" "$end" > "$tmp/check.out" 2>&1
rc=$?
check "check_trace.py: interned before use, once, root first, unpacked, named threads, BOOTTIME ($(grep -m3 -E "^error|^callstacks" "$tmp/check.out" | tr '\n' ' '))" '[ $rc -eq 0 ]'
hits=$(stat_of hits "$tmp/out/stack_map_stat")
samples=$(awk '/^samples/ {print $2}' "$tmp/check.out")
check "one PerfSample per event: $samples samples, $hits hits" '[ "${hits:-0}" -gt 0 ] && [ "$samples" = "$hits" ]'
check "protoc agrees on the sample count" '[ "$(grep -c "perf_sample {" "$tmp/decoded")" = "$hits" ]'
check "callstacks carry function names (schedule is one)" \
  'grep -qE "str: \"(__)?schedule\"" "$tmp/decoded"'

expect_error "Perfetto trace" "$BIN" -e sched:sched_switch --perfetto /nonexistent/dir/t.pftrace --duration 1

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --perfetto, as root on this kernel: a sched:sched_switch
# session's trace decodes with protoc against tests/perfetto/'s schema of the
# fields we write, and tests/perfetto/check_trace.py finds its invariants:
# one PerfSample per event (= the session's hits), every callstack interned
# once before use, frames root first (each callstack a stack of the session's
# stack_map.json), frame ids unpacked, threads named, BOOTTIME timestamps
# inside the session. --user-stacks with tests/workloads/ustack_workload.c:
# its callstacks run main, one, two, three, then the kernel frames (checked
# against the JSON's user stacks), each frame's rel_pc is the address
# addr2line resolves to its function, its mapping carries the build id
# readelf -n reads. Bad input: one line, a non-zero exit, no file left.
#   perfetto_test.sh STACKMAPD SOURCE_DIR PYTHON USTACK_WORKLOAD
set -u
BIN=$1
SRC=$2
PY=${3:-python3}
USTACK=$4
SCHEMA_DIR=$SRC/tests/perfetto

tmp=$(mktemp -d)
chmod 755 "$tmp"
wpid=
trap '[ -n "$wpid" ] && kill "$wpid" 2> /dev/null; rm -rf "$tmp"' EXIT
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

# --- --user-stacks ---------------------------------------------------------------
W=$tmp/ustack_pf
cp "$USTACK" "$W"
"$W" 30 > "$tmp/w.out" &
wpid=$!
for _ in $(seq 100); do grep -q ready "$tmp/w.out" 2> /dev/null && break; sleep 0.05; done
u=$tmp/user.pftrace
start=$(boottime)
timeout 30 "$BIN" --user-stacks --pid $wpid -e kmem:kmem_cache_alloc --perfetto "$u" --duration 2 \
  --output "$tmp/uout" > /dev/null 2> "$tmp/urun.err"
rc=$?
end=$(boottime)
check "--user-stacks --perfetto exits 0 ($(tail -1 "$tmp/urun.err"))" '[ $rc -eq 0 ]'
protoc --decode=stackmapd_test.Trace -I "$SCHEMA_DIR" "$SCHEMA_DIR/stackmapd_trace.proto" \
  < "$u" > "$tmp/udecoded" 2> "$tmp/udecoded.err"
rc=$?
check "--user-stacks: protoc --decode reads it, no unknown fields ($(head -1 "$tmp/udecoded.err"))" \
  '[ $rc -eq 0 ] && grep -q "perf_sample {" "$tmp/udecoded" && ! grep -qE "^ *[0-9]+: " "$tmp/udecoded"'
"$PY" "$SCHEMA_DIR/check_trace.py" "$u" "$tmp/uout/stack_map.json" "$start" "$end" > "$tmp/ucheck.out" 2>&1
rc=$?
check "--user-stacks check_trace.py: user frames root first, before the kernel's, each a JSON user stack ($(grep -m3 -E "^error|^callstacks" "$tmp/ucheck.out" | tr '\n' ' '))" '[ $rc -eq 0 ]'
uhits=$(stat_of hits "$tmp/uout/stack_map_stat")
check "--user-stacks: one PerfSample per event ($uhits)" \
  '[ "${uhits:-0}" -gt 1000 ] && [ "$(awk "/^samples/ {print \$2}" "$tmp/ucheck.out")" = "$uhits" ]'
build_id=$(readelf -n "$W" | awk '/Build ID:/ {print $3}')
check "--user-stacks: the workload's mapping carries its build id ($build_id, readelf -n)" \
  '[ -n "$build_id" ] && grep -qx "umapping $W $build_id" "$tmp/ucheck.out"'
resolved=0
mismatch=0
while read -r _ path pc fn; do
  [ "$path" = "$W" ] || continue
  want=$(addr2line -f -e "$W" "$pc" | head -1)
  resolved=$((resolved + 1))
  [ "$want" = "$fn" ] || { echo "  rel_pc $pc: addr2line says $want, the trace $fn"; mismatch=$((mismatch + 1)); }
done < <(grep "^uframe " "$tmp/ucheck.out")
check "--user-stacks: addr2line -f resolves every workload frame's rel_pc to its function ($resolved frames)" \
  '[ $resolved -ge 4 ] && [ $mismatch -eq 0 ]'
check "--user-stacks: main, ustack_level_one, two and three are among them" \
  '[ "$(grep "^uframe $W " "$tmp/ucheck.out" | awk "{print \$4}" | grep -cxE "main|ustack_level_(one|two|three)" )" -ge 4 ]'
check "--user-stacks: every callstack with three runs main, one, two, three, then the kernel" \
  'grep -q "^ucallstack .* ustack_level_three " "$tmp/ucheck.out" && ! grep "^ucallstack .* ustack_level_three " "$tmp/ucheck.out" | grep -qv " main ustack_level_one ustack_level_two ustack_level_three K\$"'
kill $wpid 2> /dev/null
wait $wpid 2> /dev/null
wpid=

expect_error "Perfetto trace" "$BIN" -e sched:sched_switch --perfetto /nonexistent/dir/t.pftrace --duration 1

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --perfetto, as root on this kernel: a session of two tracepoints
# (sched:sched_switch, sched:sched_wakeup, --by source) writes a trace that
# decodes with protoc against tests/perfetto/'s schema (Perfetto's field
# numbers) with no unknown field, and tests/perfetto/check_trace.py finds
# its invariants: each source a sequence (a perf session to trace processor)
# of its own whose defaults name its tracepoint, with as many samples as the
# JSON counts for that source and a running timebase_count; traced_perf's
# kernel mapping ("kernel", no range or build id) with named frames; threads
# in their processes (Thread.tgid); one PerfSample per event counted (hits,
# and sent_whole), every callstack interned once before use, frames root first (each
# callstack a stack of the session's stack_map.json), frame ids unpacked,
# BOOTTIME timestamps inside the session. --profile HZ: cpu-clock at HZ;
# -e kmem:kmalloc --sum bytes_alloc: a follower bytes_alloc adding up to the sum.
# --user-stacks with tests/workloads/ustack_workload.c:
# its callstacks run main, one, two, three, then the kernel frames (checked
# against the JSON's user stacks), each frame's rel_pc is the address
# addr2line resolves to its function, its mapping carries the build id
# readelf -n reads. Bad input: one line, a non-zero exit, no file left.
# With PERFETTO_SRC set to a checkout of github.com/google/perfetto, protoc
# also decodes each trace with Perfetto's own protos (no unknown field).
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

# protoc --decode with our schema (and Perfetto's, given PERFETTO_SRC):
# decode_trace TRACE NAME, NAME.decoded and NAME.err in $tmp.
decode_trace() {
  local file=$1 name=$2 rc
  protoc --decode=stackmapd_test.Trace -I "$SCHEMA_DIR" "$SCHEMA_DIR/stackmapd_trace.proto" \
    < "$file" > "$tmp/$name.decoded" 2> "$tmp/$name.err"
  rc=$?
  check "$name: protoc --decode reads it with our schema ($(head -1 "$tmp/$name.err"))" \
    '[ $rc -eq 0 ] && grep -q "perf_sample {" "$tmp/$name.decoded" && grep -q "process_tree {" "$tmp/$name.decoded"'
  check "$name: protoc finds no field outside the schema (no unknown field numbers)" \
    '! grep -qE "^ *[0-9]+: " "$tmp/$name.decoded"'
  [ -n "${PERFETTO_SRC:-}" ] || return 0
  protoc --decode=perfetto.protos.Trace -I "$PERFETTO_SRC" \
    "$PERFETTO_SRC/protos/perfetto/trace/trace.proto" < "$file" > "$tmp/$name.real" 2> "$tmp/$name.real.err"
  rc=$?
  check "$name: protoc --decode with Perfetto's own protos, no unknown field ($(head -1 "$tmp/$name.real.err"))" \
    '[ $rc -eq 0 ] && grep -q "tgid: " "$tmp/$name.real" && ! grep -qE "^ *[0-9]+: " "$tmp/$name.real"'
}

t=$tmp/trace.pftrace
start=$(boottime)
timeout 30 "$BIN" -e sched:sched_switch -e sched:sched_wakeup --by source --perfetto "$t" \
  --duration 2 --output "$tmp/out" > "$tmp/run.out" 2> "$tmp/run.err"
rc=$?
end=$(boottime)
check "'stackmapd -e sched:sched_switch -e sched:sched_wakeup --perfetto' exits 0 ($(tail -1 "$tmp/run.err"))" '[ $rc -eq 0 ]'
check "the trace is renamed into place, mode 0640, no temporary file left" \
  '[ -s "$t" ] && [ ! -e "$t.tmp" ] && [ "$(stat -c %a "$t")" = 640 ]'
decode_trace "$t" two_sources
check "threads name their process (tgid, Perfetto's field 3), processes their parent (ppid)" \
  'grep -q "tgid: " "$tmp/two_sources.decoded" && grep -q "ppid: " "$tmp/two_sources.decoded"'
check "each source's sequence starts with its defaults: two, each with the kernel mapping \"kernel\"" \
  '[ "$(grep -c "trace_packet_defaults {" "$tmp/two_sources.decoded")" = 2 ] && [ "$(grep -c "str: \"kernel\"" "$tmp/two_sources.decoded")" = 2 ]'
"$PY" "$SCHEMA_DIR/check_trace.py" "$t" "$tmp/out/stack_map.json" "$start" "$end" > "$tmp/check.out" 2>&1
rc=$?
check "check_trace.py: a sequence per source with its timebase and count, the kernel mapping, tgid, interned before use, once, root first, unpacked, BOOTTIME ($(grep -m3 -E "^error|^callstacks" "$tmp/check.out" | tr '\n' ' '))" '[ $rc -eq 0 ]'
hits=$(counted_of "$tmp/out/stack_map_stat")
samples=$(awk '/^samples/ {print $2}' "$tmp/check.out")
check "one PerfSample per event: $samples samples, $hits hits and sent_whole" '[ "${hits:-0}" -gt 0 ] && [ "$samples" = "$hits" ]'
check "protoc agrees on the sample count" '[ "$(grep -c "perf_sample {" "$tmp/two_sources.decoded")" = "$hits" ]'
check "the two tracepoints are two sessions, each named by its tracepoint, each with samples ($(grep ^session "$tmp/check.out" | tr '\n' ' '))" \
  'grep -qE "^session [0-9]+ sched:sched_switch tracepoint_sched:sched_switch_period_1 samples [1-9]" "$tmp/check.out" && grep -qE "^session [0-9]+ sched:sched_wakeup tracepoint_sched:sched_wakeup_period_1 samples [1-9]" "$tmp/check.out" && [ "$(grep -c ^session "$tmp/check.out")" = 2 ]'
check "callstacks carry function names (schedule is one)" \
  'grep -qE "str: \"(__)?schedule\"" "$tmp/two_sources.decoded"'

# --- --profile, --sum -------------------------------------------------------------
# (--offcpu blocks reach no trace sink, --trace's nor ours: perfetto_writer_test
# checks how they would be described.)
timebase_run() {  # timebase_run NAME EXPECTED_SESSION_LINE STACKMAPD_ARGS...
  local name=$1 want=$2 rc start end
  shift 2
  start=$(boottime)
  timeout 30 "$BIN" "$@" --by source --perfetto "$tmp/$name.pftrace" --duration 1 \
    --output "$tmp/$name.out" > /dev/null 2> "$tmp/$name.run.err"
  rc=$?
  end=$(boottime)
  check "'stackmapd $* --perfetto' exits 0 ($(tail -1 "$tmp/$name.run.err"))" '[ $rc -eq 0 ]'
  decode_trace "$tmp/$name.pftrace" "$name"
  "$PY" "$SCHEMA_DIR/check_trace.py" "$tmp/$name.pftrace" "$tmp/$name.out/stack_map.json" \
    "$start" "$end" > "$tmp/$name.check" 2>&1
  rc=$?
  check "$name: check_trace.py ($(grep -m3 -E "^error|^callstacks" "$tmp/$name.check" | tr '\n' ' '))" '[ $rc -eq 0 ]'
  check "$name: one session, its timebase $want ($(grep ^session "$tmp/$name.check" | tr '\n' ' '))" \
    'grep -qE "^session [0-9]+ $want samples [1-9]" "$tmp/$name.check" && [ "$(grep -c ^session "$tmp/$name.check")" = 1 ]'
}
# Work in the kernel, so the profile has kernel frames to name on a machine
# whose CPUs are otherwise busy in user mode.
( while :; do cat /proc/self/stat > /dev/null; done ) &
load_pid=$!
timebase_run profile "profile cpu-clock_frequency_199" --profile 199
kill $load_pid; wait $load_pid 2> /dev/null
timebase_run sum "kmem:kmalloc tracepoint_kmem:kmalloc_period_1_follower_bytes_alloc" \
  -e kmem:kmalloc --sum bytes_alloc

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
decode_trace "$u" user_stacks
"$PY" "$SCHEMA_DIR/check_trace.py" "$u" "$tmp/uout/stack_map.json" "$start" "$end" > "$tmp/ucheck.out" 2>&1
rc=$?
check "--user-stacks check_trace.py: user frames root first, before the kernel's, each a JSON user stack ($(grep -m3 -E "^error|^callstacks" "$tmp/ucheck.out" | tr '\n' ' '))" '[ $rc -eq 0 ]'
uhits=$(counted_of "$tmp/uout/stack_map_stat")
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

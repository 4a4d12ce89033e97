#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --trace's per-CPU trace buffers (abi.h, smt_trace_buf), against the real
# program on this kernel. As root.
#   1. Both CPUs producing: every event counted is in the trace exactly once
#      (event lines = hits, events = hits + drops, no drop but those of a
#      full ring), each CPU's
#      buffers went through the ring many times, and the file is in time
#      order (the CPUs merged as ftrace merges its per-CPU buffers).
#   2. An idle CPU: a handful of events, far fewer than a buffer holds, are
#      in the file within a second (the daemon drains every 100 ms and reads
#      buffers in place) while the daemon still runs and nothing else
#      happens on that CPU's buffer.
set -u
BIN=$1
PY=${2:-python3}

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

ncpu=$(nproc)
check "two CPUs at least ($ncpu)" '[ "$ncpu" -ge 2 ]'

# --- 1. under load on both CPUs ----------------------------------------------
"$BIN" -e kmem:kmem_cache_alloc --trace "$tmp/load.txt" --duration 3 --output "$tmp/load" \
  > /dev/null 2> "$tmp/load.err" &
dpid=$!
for _ in $(seq 100); do
  grep -q "tracing " "$tmp/load.err" && break
  sleep 0.1
done
# Each loop opens /proc/self/stat (kmem_cache_alloc events) as fast as it
# can, on its CPU, for longer than the session.
for cpu in 0 1; do
  taskset -c $cpu bash -c 'end=$((SECONDS + 5)); while [ $SECONDS -lt $end ]; do read -r _ < /proc/self/stat; done' &
  pids+=($!)
done
wait $dpid
rc=$?
check "--trace under load exits 0 ($(tail -1 "$tmp/load.err"))" '[ $rc -eq 0 ]'
st=$tmp/load/stack_map_stat
hits=$(stat_of hits "$st")
events=$(stat_of events_total "$st")
drops=$(awk '/^drop_[a-z_]*:/ {s += $2} END {print s + 0}' "$st")
lines=$(grep -c ': kmem_cache_alloc: ' "$tmp/load.txt")
stacks=$(grep -c '<stack_id [0-9]*>$' "$tmp/load.txt")
check "events = hits + drops ($events = $hits + $drops)" '[ "$events" -eq $((hits + drops)) ]'
# A consumer slower than both CPUs (printing every event) may see the ring
# fill: counted, the one loss allowed. Nothing else is lost.
ringfull=$(stat_of drop_ringbuf_full "$st")
check "no event dropped but for a full ring ($drops, $ringfull of them ring-full)" \
  '[ "$drops" -eq "$ringfull" ]'
check "every hit is in the trace exactly once ($lines event lines, $stacks stack lines, $hits hits)" \
  '[ "$lines" -eq "$hits" ] && [ "$stacks" -eq "$hits" ]'
cpu0=$(grep -c ' \[000\] .*: kmem_cache_alloc: ' "$tmp/load.txt")
cpu1=$(grep -c ' \[001\] .*: kmem_cache_alloc: ' "$tmp/load.txt")
# A buffer holds 52 events of this tracepoint (268 bytes each).
check "both CPUs sent many buffers ($cpu0 and $cpu1 events)" \
  '[ "$cpu0" -gt 1000 ] && [ "$cpu1" -gt 1000 ]'
inversions=$(awk '{ for (i = 1; i < NF; i++) if ($i ~ /^[0-9]+\.[0-9][0-9][0-9][0-9][0-9][0-9]:$/) { t = substr($i, 1, length($i) - 1); break } }
  t + 0 < last + 0 { n++ } { last = t } END { print n + 0 }' "$tmp/load.txt")
check "the trace is in time order ($inversions lines earlier than the one before)" \
  '[ "$inversions" -eq 0 ]'
check "no record was malformed or stale" \
  '[ "$(stat_of bad_records "$st")" -eq 0 ] && [ "$(stat_of stale_records "$st")" -eq 0 ]'

# --- 2. a partial buffer on an idle CPU -----------------------------------
# One bash process on CPU 1 that opens /proc/self/stat 5 times when told (a
# line in the fifo), then blocks reading the fifo again: an idle buffer.
mkfifo "$tmp/go"
taskset -c 1 bash -c 'exec 3<> "$0"; read -r _ <&3; for i in 1 2 3 4 5; do read -r _ < /proc/self/stat; done; read -r _ <&3' "$tmp/go" &
wpid=$!
pids+=($wpid)
"$BIN" -e kmem:kmem_cache_alloc --pid $wpid --trace "$tmp/idle.txt" --duration 20 \
  --output "$tmp/idle" > /dev/null 2> "$tmp/idle.err" &
dpid=$!
pids+=($dpid)
for _ in $(seq 100); do
  grep -q "tracing " "$tmp/idle.err" && break
  sleep 0.1
done
check "stackmapd is tracing ($(tail -1 "$tmp/idle.err"))" 'grep -q "tracing " "$tmp/idle.err"'
start=$(date +%s%N)
echo go > "$tmp/go"
seen=0
while [ $(($(date +%s%N) - start)) -lt 3000000000 ]; do
  seen=$(grep -c ': kmem_cache_alloc: ' "$tmp/idle.txt" 2> /dev/null)
  [ "${seen:-0}" -ge 5 ] && break
  sleep 0.02
done
ms=$((($(date +%s%N) - start) / 1000000))
running=$(kill -0 $dpid 2> /dev/null && echo yes || echo no)
check "the idle CPU's events are in the file within 1 s ($seen events after $ms ms, daemon running: $running)" \
  '[ "${seen:-0}" -ge 5 ] && [ "$ms" -lt 1000 ] && [ "$running" = yes ]'
check "they were on CPU 1, fewer than a buffer holds" \
  '[ "$(grep -c " \[001\] .*: kmem_cache_alloc: " "$tmp/idle.txt")" -eq "$seen" ] && [ "$seen" -lt 50 ]'
kill -INT $dpid
wait $dpid
rc=$?
check "stackmapd exits 0 after the idle wait" '[ $rc -eq 0 ]'
hits=$(stat_of hits "$tmp/idle/stack_map_stat")
check "nothing was written twice at the end ($hits hits)" \
  '[ "$(grep -c ": kmem_cache_alloc: " "$tmp/idle.txt")" -eq "$hits" ]'

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "all trace buffer checks passed"

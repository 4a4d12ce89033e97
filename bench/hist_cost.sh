#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --hist's cost per event: the tracepoint program's in-kernel ns/event
# (kernel.bpf_stats_enabled: run_time_ns / run_cnt of this stackmapd's own
# program) on kmem:kmem_cache_alloc under bench/alloc_loop, with --sum
# bytes_alloc (A: the same field read, no bucket) and --hist bytes_alloc (B:
# the bucket computed and compared in the batch key), A B A B in one run.
# Prints one line per round and the mean of each. A figure, never a pass or fail.
#   sudo bench/hist_cost.sh STACKMAPD ALLOC_LOOP [SECONDS]
# Measured here (2 shared cores, kernel 6.18, 5 s rounds, 0.8-1.2 M events each),
# two runs: 1183.7 -> 1215.3 ns/event (+31.7) and 1216.6 -> 1217.8 (+1.2):
# within the rounds' own spread (+-40 ns); the unwinder is ~90% of an event.
set -euo pipefail
BIN=$1
LOOP=$2
SECONDS_EACH=${3:-5}
tmp=$(mktemp -d /tmp/stackmapd-hist-cost.XXXXXX)
stats=/proc/sys/kernel/bpf_stats_enabled
old_stats=$(cat $stats)
trap 'echo "$old_stats" > $stats; rm -rf "$tmp"' EXIT
echo 1 > $stats

# round LABEL ARGS...: prints "LABEL ns/event events"
round() {
  local label=$1 sp
  shift
  "$BIN" -e kmem:kmem_cache_alloc "$@" --duration $((SECONDS_EACH + 30)) --output "$tmp/out" \
    2> "$tmp/err" &
  sp=$!
  for _ in $(seq 600); do
    grep -q "tracing " "$tmp/err" && break
    sleep 0.05
  done
  "$LOOP" --cpu 0 --duration "$SECONDS_EACH" > /dev/null
  # This stackmapd's programs: the prog_id of its BPF fds.
  ids=$(grep -h '^prog_id:' /proc/"$sp"/fdinfo/* 2> /dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
  bpftool -j prog show | /usr/bin/python3 -c '
import json, sys
ids = {int(i) for i in sys.argv[1].split()}
for p in json.load(sys.stdin):
    if p["id"] in ids and p.get("name", "").startswith("stackmapd_trace") and p.get("run_cnt"):
        print(sys.argv[2], round(p["run_time_ns"] / p["run_cnt"], 1), p["run_cnt"])
' "$ids" "$label"
  kill -TERM "$sp"
  wait "$sp" || true
}

{
  round A --sum bytes_alloc
  round B --hist bytes_alloc
  round A --sum bytes_alloc
  round B --hist bytes_alloc
} | tee "$tmp/rounds"
awk '{s[$1] += $2; n[$1]++} END {
  printf "--sum: %.1f ns/event; --hist: %.1f ns/event (%+.1f)\n",
    s["A"] / n["A"], s["B"] / n["B"], s["B"] / n["B"] - s["A"] / n["A"] }' "$tmp/rounds"

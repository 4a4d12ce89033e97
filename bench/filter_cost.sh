#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --filter's cost per event on kmem:kmem_cache_alloc under bench/alloc_loop,
# in one run, rounds interleaved (none pass filter reject, twice):
#   none    no stackmapd at all: the workload's ops/s untraced;
#   pass    stackmapd without a filter: every event takes its stack;
#   filter  --filter FILTER (default one every event passes: the filter's own cost);
#   reject  --filter REJECT (default one no event passes: what a filtered-out
#           event costs, against `none`'s nothing).
# In-kernel ns/event is kernel.bpf_stats_enabled's run_time_ns / run_cnt of
# this stackmapd's own tracepoint program. Prints one line per round and the
# mean of each. Figures, never a pass or fail.
#   sudo bench/filter_cost.sh STACKMAPD ALLOC_LOOP [SECONDS] [FILTER] [REJECT]
# Measured here (2 shared cores, kernel 6.18, 5 s rounds, 1.5-1.8 M events each):
#   'bytes_alloc >= 0'  1131 -> 1154 ns/event (+23, 2%)
#   'name ~ "?*"'       1156 -> 1322 ns/event (+166: a full glob, one bpf_loop step per byte)
set -euo pipefail
BIN=$1
LOOP=$2
SECONDS_EACH=${3:-5}
FILTER=${4:-bytes_alloc >= 0}
REJECT=${5:-bytes_alloc > 1000000000}
tmp=$(mktemp -d /tmp/stackmapd-filter-cost.XXXXXX)
stats=/proc/sys/kernel/bpf_stats_enabled
old_stats=$(cat $stats)
trap 'echo "$old_stats" > $stats; rm -rf "$tmp"' EXIT
echo 1 > $stats

# ops_per_s: alloc_loop's rate from its JSON line on stdin.
ops_per_s() { /usr/bin/python3 -c 'import json, sys; print(round(json.load(sys.stdin)["ops_per_s"]))'; }

# round LABEL [ARGS...]: prints "LABEL ns/event events ops/s"; LABEL none runs no stackmapd.
round() {
  local label=$1 sp
  shift
  if [ "$label" = none ]; then
    echo "none - 0 $("$LOOP" --cpu 0 --duration "$SECONDS_EACH" | ops_per_s)"
    return
  fi
  "$BIN" -e kmem:kmem_cache_alloc "$@" --duration $((SECONDS_EACH + 30)) --output "$tmp/out" \
    2> "$tmp/err" &
  sp=$!
  for _ in $(seq 600); do
    grep -q "tracing " "$tmp/err" && break
    sleep 0.05
  done
  local rate
  rate=$("$LOOP" --cpu 0 --duration "$SECONDS_EACH" | ops_per_s)
  # This stackmapd's programs: the prog_id of its BPF fds.
  ids=$(grep -h '^prog_id:' /proc/"$sp"/fdinfo/* 2> /dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
  bpftool -j prog show | /usr/bin/python3 -c '
import json, sys
ids = {int(i) for i in sys.argv[1].split()}
for p in json.load(sys.stdin):
    if p["id"] in ids and p.get("name", "").startswith("stackmapd_trace") and p.get("run_cnt"):
        print(sys.argv[2], round(p["run_time_ns"] / p["run_cnt"], 1), p["run_cnt"], sys.argv[3])
' "$ids" "$label" "$rate"
  kill -TERM "$sp"
  wait "$sp" || true
}

{
  for _ in 1 2; do
    round none
    round pass
    round filter --filter "$FILTER"
    round reject --filter "$REJECT"
  done
} | tee "$tmp/rounds"
awk -v f="$FILTER" -v r="$REJECT" '{n[$1]++; ns[$1] += $2; ops[$1] += $4} END {
  printf "untraced: %.0f ops/s\n", ops["none"] / n["none"]
  printf "no filter: %.1f ns/event, %.0f ops/s\n", ns["pass"] / n["pass"], ops["pass"] / n["pass"]
  printf "--filter '"'"'%s'"'"' (passes all): %.1f ns/event (%+.1f), %.0f ops/s\n", f,
    ns["filter"] / n["filter"], ns["filter"] / n["filter"] - ns["pass"] / n["pass"], ops["filter"] / n["filter"]
  printf "--filter '"'"'%s'"'"' (rejects all): %.1f ns/event per filtered-out event, %.0f ops/s (untraced %.0f)\n", r,
    ns["reject"] / n["reject"], ops["reject"] / n["reject"], ops["none"] / n["none"] }' "$tmp/rounds"

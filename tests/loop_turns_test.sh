#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Nothing finished on the loop: with a user table of ~16 k stacks
# (tests/workloads/many_stacks.c, 2^14 paths, under --user-stacks),
# `ctl top`, `ctl snapshot`, `ctl reset` and /debug/pprof are answered while
# no turn of the daemon's loop lasts more than 50 ms: the daemon's own
# stackmapd_loop_turn_seconds histogram, read before and after, gains no
# turn above its 0.05 bucket. Their answers are checked too (they still come).
#   loop_turns_test.sh STACKMAPD MANY_STACKS
set -u
BIN=$1
WORKLOAD=$2

tmp=$(mktemp -d)
pid= wpid=
cleanup() {
  [ -n "$wpid" ] && kill "$wpid" 2> /dev/null
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

P_HTTP=19511
url=http://127.0.0.1:$P_HTTP
run=$tmp/run
ctl() { timeout 20 "$BIN" --socket "$run/control.sock" ctl "$@" 2>&1; }
# Turns longer than 50 ms so far, and the longest.
slow_turns() {
  curl -sS --max-time 10 "$url/metrics" | awk '
    /^stackmapd_loop_turn_seconds_bucket\{le="0.05"\}/ { fast = $2 }
    /^stackmapd_loop_turn_seconds_count/ { all = $2 }
    /^stackmapd_loop_longest_turn_seconds/ { longest = $2 }
    END { if (all == "") print "none"; else print all - fast, longest }'
}

"$WORKLOAD" 14 120 > "$tmp/w.out" &
wpid=$!
for _ in $(seq 200); do grep -q ready "$tmp/w.out" 2> /dev/null && break; sleep 0.05; done

printf 'snapshot-interval = 3600\nevent = ["syscalls:sys_enter_getppid"]\nuser-stacks = true\nlisten = "127.0.0.1:%s"\n' \
  "$P_HTTP" > "$tmp/conf"
"$BIN" daemon --config "$tmp/conf" --export-dir "$run" --pin-dir "" 2> "$tmp/daemon.err" &
pid=$!
wait_http "$pid" "$url"
check "the daemon serves /metrics ($(tail -1 "$tmp/daemon.err"))" '[ "$(http_code "$url/metrics")" = 200 ]'

# Until the user table holds most of the workload's paths, resolved.
users=0
for _ in $(seq 120); do
  users=$(ctl stat | awk '/^user_entries:/ {print $2}')
  [ "${users:-0}" -ge 15000 ] && break
  sleep 0.5
done
check "the user table holds ~16 k stacks (${users:-none})" '[ "${users:-0}" -ge 15000 ]'
ctl top 1 > /dev/null  # waits for every stack's names: the first ones are slow

before=$(slow_turns)
check "the daemon counts its loop's turns ($before)" '[ "$before" != none ]'
for round in 1 2; do
  ctl top 20 > "$tmp/top.$round"
  check "ctl top answers with stacks ($round)" 'grep -q "unique stacks" "$tmp/top.$round"'
  ctl snapshot > "$tmp/snapshot.$round"
  check "ctl snapshot answers once written ($round)" 'grep -q "exports written to" "$tmp/snapshot.$round"'
  curl -sS --max-time 30 -o "$tmp/profile.$round" "$url/debug/pprof/stackmapd?seconds=1"
  check "/debug/pprof answers a profile ($round)" '[ -s "$tmp/profile.$round" ]'
done
after=$(slow_turns)
echo "turns over 50 ms and the longest (s): before $before, after $after"
check "no turn of the loop held it over 50 ms meanwhile" '[ "${before%% *}" = "${after%% *}" ]'
check "stack_map.json was written whole" 'python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$run/stack_map.json"'

ctl reset > "$tmp/reset"
check "ctl reset answers with the ended epoch ($(cat "$tmp/reset"))" 'grep -qE "^reset: epoch [0-9]+ ended with [0-9]+ events in [0-9]+ unique stacks" "$tmp/reset"'
last=$(slow_turns)
check "nor did the reset ($last)" '[ "${before%% *}" = "${last%% *}" ]'

kill "$pid"
wait "$pid"
rc=$?
pid=
check "the daemon stops cleanly (rc $rc)" '[ $rc -eq 0 ]'
echo "$failures failure(s)"
[ "$failures" -eq 0 ]

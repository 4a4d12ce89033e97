#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --by pid,comm on a host of short processes: the (stack, key) pairs recycle.
# 600 processes fill a cap of 400 pairs (key_overflow grows); at the
# snapshots after they exited, their pairs fold into their comm
# (key_pairs_folded), and a program started next counts under its own pid
# and comm, not in its stack's "other" entry.
#   key_pairs_recycle_test.sh STACKMAPD
set -u
BIN=$1

tmp=$(mktemp -d)
pid= late=
cleanup() {
  [ -n "$late" ] && kill "$late" 2> /dev/null
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

run=$tmp/run
stat=$run/stack_map_stat
ctl() { timeout 20 "$BIN" --socket "$run/control.sock" ctl "$@" 2>&1; }

printf 'snapshot-interval = 3600\nevent = ["sched:sched_process_exec"]\nby = "pid,comm"\nmax-keys = 400\n' \
  > "$tmp/conf"
"$BIN" daemon --config "$tmp/conf" --export-dir "$run" --pin-dir "" 2> "$tmp/daemon.err" &
pid=$!
wait_tracing "$tmp/daemon.err" daemon

for _ in $(seq 600); do /bin/true; done
ctl snapshot > /dev/null
overflow=$(stat_of key_overflow "$stat")
check "600 processes fill the 400 pairs (key_overflow ${overflow:-none})" '[ "${overflow:-0}" -gt 0 ]'

# Their pairs fold after that cut, once the daemon's worker found them gone.
folded=0
for _ in $(seq 50); do
  sleep 0.2
  ctl snapshot > /dev/null
  folded=$(stat_of key_pairs_folded "$stat")
  [ "${folded:-0}" -ge 300 ] && break
done
pairs=$(stat_of key_pairs "$stat")
check "the exited processes' pairs folded (key_pairs_folded ${folded:-none})" '[ "${folded:-0}" -ge 300 ]'
check "the pairs are no longer full (key_pairs ${pairs:-none} of 400)" '[ "${pairs:-400}" -lt 300 ]'

# A program started after the churn: its own comm, under its own pid.
cp /bin/sleep "$tmp/late_prog"
"$tmp/late_prog" 30 &
late=$!
sleep 0.5
ctl snapshot > /dev/null
check "the late program counts under its own pid and comm" "python3 - '$run/stack_map.json' $late <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
keys = [k for s in doc['stacks'] for k in s.get('by', [])]
sys.exit(not any(k.get('comm') == 'late_prog' and k.get('pid') == int(sys.argv[2]) for k in keys))
PY"
check "the folded processes count under their comm, pid 0" "python3 - '$run/stack_map.json' <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
keys = [k for s in doc['stacks'] for k in s.get('by', [])]
sys.exit(not any(k.get('comm') == 'true' and k.get('pid') == 0 for k in keys))
PY"

kill "$pid"
wait "$pid"
rc=$?
pid=
check "the daemon stops cleanly (rc $rc)" '[ $rc -eq 0 ]'
echo "$failures failure(s)"
[ "$failures" -eq 0 ]

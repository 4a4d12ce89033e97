#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --by pid,comm on a host of short processes: the (stack, key) pairs recycle.
# More short processes than the cap on pairs fill it (key_overflow grows); at
# the snapshots after they exited, their pairs fold into their comm
# (key_pairs_folded), and a program started next counts under its own pid
# and comm, not in its stack's "other" entry. The event is getpriority(2),
# which nice(1) makes and few else: the host's other processes would refill
# the pairs meanwhile. The per-CPU batches (256 entries each, read in place
# at each cut) hold the last pairs until other keys push them out: the cap
# is set above what they can hold.
#   key_pairs_recycle_test.sh STACKMAPD
set -u
BIN=$1

tmp=$(mktemp -d)
pid= late=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

run=$tmp/run
stat=$run/stack_map_stat
ctl() { timeout 20 "$BIN" --socket "$run/control.sock" ctl "$@" 2>&1; }

batched=$((256 * $(nproc)))
cap=$((batched + 512))
nice=$(command -v nice)
cp "$nice" "$tmp/churn"
cp "$nice" "$tmp/late_prog"
printf '%s\n' 'snapshot-interval = 3600' 'event = ["syscalls:sys_enter_getpriority"]' \
  'by = "pid,comm"' "max-keys = $cap" > "$tmp/conf"
"$BIN" daemon --config "$tmp/conf" --export-dir "$run" --pin-dir "" 2> "$tmp/daemon.err" &
pid=$!
wait_tracing "$tmp/daemon.err" daemon

for _ in $(seq $((cap + 500))); do "$tmp/churn" > /dev/null; done
ctl snapshot > /dev/null
overflow=$(stat_of key_overflow "$stat")
check "$((cap + 500)) processes fill the $cap pairs (key_overflow ${overflow:-none})" '[ "${overflow:-0}" -gt 0 ]'

# Their pairs fold after that cut, once the daemon's worker found them gone.
folded=0
for _ in $(seq 50); do
  sleep 0.2
  ctl snapshot > /dev/null
  folded=$(stat_of key_pairs_folded "$stat")
  pairs=$(stat_of key_pairs "$stat")
  [ "${pairs:-$cap}" -le $((batched + 8)) ] && break
done
check "the exited processes' pairs folded (key_pairs_folded ${folded:-none})" \
  '[ "${folded:-0}" -ge $((cap - batched)) ]'
check "the pairs are no longer full (key_pairs ${pairs:-none} of $cap, batches $batched)" \
  '[ "${pairs:-$cap}" -le $((batched + 8)) ]'

# A program started after the churn: its own comm, under its own pid.
# It exits at once: the cut after it still holds its pair under its own key.
"$tmp/late_prog" > /dev/null &
late=$!
wait "$late"
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
sys.exit(not any(k.get('comm') == 'churn' and k.get('pid') == 0 for k in keys))
PY"

kill "$pid"
wait "$pid"
rc=$?
pid=
check "the daemon stops cleanly (rc $rc)" '[ $rc -eq 0 ]'
echo "$failures failure(s)"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --user-stacks for processes that are gone before the snapshot, as root on
# this kernel: short-lived copies of tests/workloads/ustack_workload.c
# (main -> ustack_level_one -> two -> three -> newfstatat) each run 0.3 s
# and exit, one after another, while the daemon counts. Their events stay
# in the per-CPU batches until the end; the resolver captures each stack's
# maps and binaries as the table publishes it, while the process lives
# (daemon/resolve/user_stacks.h), so the export taken after they all exited
# still names their three functions and main. Checked in the folded output
# (process; main; one; two; three; kernel frames) and in stack_map.json.
#   short_lived_test.sh STACKMAPD USTACK_WORKLOAD PYTHON
set -u
BIN=$1
WORKLOAD_SRC=$2
PY=${3:-python3}

tmp=$(mktemp -d)
chmod 755 "$tmp"
dpid=
cleanup() {
  [ -n "$dpid" ] && kill "$dpid" 2> /dev/null
  [ -n "${KEEP:-}" ] && return; rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

W=$tmp/shortlived
cp "$WORKLOAD_SRC" "$W"
out=$tmp/out
timeout 30 "$BIN" --user-stacks -e kmem:kmem_cache_alloc --by comm --duration 5 \
  --folded "$tmp/f.folded" --output "$out" > /dev/null 2> "$tmp/d.err" &
dpid=$!
# Past the first seconds, when every running process's stacks are new.
sleep 2
for _ in 1 2 3; do "$W" 0.3 > /dev/null; done
wait $dpid
rc=$?
dpid=
check "the session runs (rc $rc: $(tail -1 "$tmp/d.err"))" '[ $rc -eq 0 ]'
line=$(grep '^shortlived;' "$tmp/f.folded" | grep ustack_level_three | sort -t' ' -k2 -n | tail -1)
check "folded: the exited process; main; one; two; three; kernel frames ($line)" \
  '[[ "$line" == shortlived\;*main\;ustack_level_one\;ustack_level_two\;ustack_level_three\;* ]]'
"$PY" - "$out" > "$tmp/json.out" 2>&1 << 'PYEOF'
import json, sys
d = json.load(open(sys.argv[1] + "/stack_map.json"))
ids = {e["user_stack_id"] for s in d["stacks"] for e in s.get("by", [])
       if e.get("comm") == "shortlived" and "user_stack_id" in e}
assert ids, "events of the short-lived processes"
named = 0
for us in d["user_stacks"]["stacks"]:
    if us["user_stack_id"] in ids:
        fns = [f["symbols"][-1].split("+")[0] for f in us["frames"] if f["symbols"]]
        named += "ustack_level_three" in fns and "main" in fns
assert named >= 1, f"none of their {len(ids)} stacks named"
print(f"{named} of their {len(ids)} stacks named")
PYEOF
jrc=$?
check "JSON: the exited processes' user stacks are named ($(tail -1 "$tmp/json.out"))" '[ $jrc -eq 0 ]'
[ "$failures" -eq 0 ] || { echo "--- daemon log"; tail -n 20 "$tmp/d.err"; }
echo "$failures failure(s)"
[ "$failures" -eq 0 ]

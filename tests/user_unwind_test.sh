#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --user-stacks with unwind tables (.eh_frame, the default on x86_64), as
# root on this kernel, on code built without frame pointers as Debian builds
# it: tests/workloads/unwind_workload.c (-O2 -fomit-frame-pointer) and the
# stock python3. CPU samples (--profile) of each, for 3 s:
#   1. the workload's user stacks are whole: unwind_three, two, one, main,
#      then libc's start code to _start, in order, in nearly every sample;
#   2. python3's reach _start in nearly every sample, 15 frames deep or more;
#   3. no garbage: every user frame lies in a file mapping or the vdso;
#   4. stat: where each walk ended (user_unwind_*), and the tables loaded;
#   5. the same runs with --user-unwind fp get short stacks: what the tables
#      are for, and proof the checks above can fail;
#   6. bad input: --user-unwind without --user-stacks, an unknown mode.
#   user_unwind_test.sh STACKMAPD UNWIND_WORKLOAD PYTHON
set -u
BIN=$1
WORKLOAD=$2
PY=${3:-python3}

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

start() {  # start NAME CMD...: runs CMD until "ready", its pid in $wpid
  local name=$1
  shift
  "$@" > "$tmp/$name.out" 2>&1 &
  wpid=$!
  pids+=("$wpid")
  for _ in $(seq 200); do grep -q ready "$tmp/$name.out" 2> /dev/null && break; sleep 0.05; done
}

# summary DIR: whole% frames-median garbage-frames samples, weighted by each
# user stack's events, from stack_map.json; and "order" when the workload's
# functions come in their call order.
summary() {
  "$PY" - "$1/stack_map.json" << 'PYEOF'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
us = {s["user_stack_id"]: s for s in d["user_stacks"]["stacks"]}
whole = total = garbage = ordered = with_three = 0
depths = []
for s in d["stacks"]:
    for e in s.get("by", []):
        u = us.get(e.get("user_stack_id"))
        if u is None:
            continue
        n = e["count"]
        total += n
        whole += n * (not u["truncated"])
        depths += [len(u["frames"])] * n
        names = [f["symbols"][-1].split("+")[0] if f["symbols"] else "?" for f in u["frames"]]
        garbage += n * sum(1 for f in u["frames"] if "binary" not in f and not f["symbols"])
        if "unwind_three" in names:
            with_three += n
            i = names.index("unwind_three")
            ordered += n * (names[i:i + 4] == ["unwind_three", "unwind_two", "unwind_one", "main"]
                            and names[-1] == "_start")
print(f"{100 * whole // max(total, 1)} {statistics.median(depths) if depths else 0} "
      f"{garbage} {total} {100 * ordered // max(with_three, 1)} {with_three}")
PYEOF
}

profile() {  # profile NAME PID [OPTIONS...]
  local name=$1 pid=$2
  shift 2
  "$BIN" --profile 199 --user-stacks --pid "$pid" --duration 3 --output "$tmp/$name" "$@" \
    > /dev/null 2> "$tmp/$name.err"
}

start spin "$WORKLOAD" spin 60
spin=$wpid
start py /usr/bin/python3 -c '
import time
def leaf(n):
    return sum(i * i for i in range(n))
def middle():
    while True:
        leaf(1000)
def top():
    print("ready", flush=True)
    middle()
top()'
py=$wpid

for mode in tables fp; do
  opt=()
  [ $mode = fp ] && opt=(--user-unwind fp)
  profile "spin_$mode" $spin "${opt[@]}"
  rc=$?
  check "$mode: --profile --user-stacks on the workload runs (rc $rc: $(tail -1 "$tmp/spin_$mode.err"))" '[ $rc -eq 0 ]'
  profile "py_$mode" $py "${opt[@]}"
  rc=$?
  check "$mode: --profile --user-stacks on python3 runs (rc $rc: $(tail -1 "$tmp/py_$mode.err"))" '[ $rc -eq 0 ]'
  read -r s_whole s_depth s_garbage s_total s_order s_three <<< "$(summary "$tmp/spin_$mode")"
  read -r p_whole p_depth p_garbage p_total _ _ <<< "$(summary "$tmp/py_$mode")"
  echo "  $mode: workload $s_whole% whole, median $s_depth frames, $s_garbage garbage frames," \
    "$s_total samples, $s_order% of $s_three in call order; python3 $p_whole% whole," \
    "median $p_depth frames, $p_garbage garbage frames, $p_total samples"
  if [ $mode = tables ]; then
    check "tables: the workload's samples are whole (≥ 90%: $s_whole%)" '[ "$s_whole" -ge 90 ] && [ "$s_total" -ge 100 ]'
    check "tables: three, two, one, main ... _start in call order (≥ 95%: $s_order% of $s_three)" \
      '[ "$s_order" -ge 95 ] && [ "$s_three" -ge 100 ]'
    check "tables: python3's samples are whole (≥ 90%: $p_whole%), ≥ 12 frames deep ($p_depth)" \
      '[ "$p_whole" -ge 90 ] && [ "${p_depth%.*}" -ge 12 ] && [ "$p_total" -ge 100 ]'
    check "tables: no garbage frame ($s_garbage, $p_garbage)" '[ "$s_garbage" -eq 0 ] && [ "$p_garbage" -eq 0 ]'
    st=$tmp/py_tables/stack_map_stat
    check "tables: stat says where walks ended, most complete" \
      '[ "$(stat_of user_unwind_complete "$st")" -ge "$(( p_total * 9 / 10 ))" ] && grep -q "^user_unwind_fault:" "$st" && grep -q "^user_unwind_outside_code:" "$st"'
    check "tables: stat counts the tables loaded" \
      '[ "$(stat_of unwind_tables "$st")" -ge 2 ] && [ "$(stat_of unwind_rows "$st")" -ge 10000 ] && [ "$(stat_of unwind_processes "$st")" -ge 1 ]'
  else
    check "fp: frame pointers alone cannot walk this code (whole: workload $s_whole%, python3 $p_whole%)" \
      '[ "$s_whole" -lt 50 ] && [ "$p_whole" -lt 50 ]'
    check "fp: the stat has no walk counters" '! grep -q "^user_unwind_complete: [1-9]" "$tmp/py_fp/stack_map_stat"'
  fi
done

expect_error "applies to --user-stacks" "$BIN" --user-unwind fp -e sched:sched_switch --duration 1
expect_error "use 'tables'" "$BIN" --user-stacks --user-unwind dwarf -e sched:sched_switch --duration 1

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

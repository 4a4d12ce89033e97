#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Who and how much end to end, as root on this kernel:
#   1. --by pid counts exactly what ftrace counts for a process (a tracefs
#      instance, set_event_pid, no lost events) and loses nothing;
#   2. --sum bytes_alloc weighs every getname() stack (names_cache) by 4096
#      per event, and a process's bytes equal ftrace's bytes_alloc for it;
#   3. --offcpu weighs the stacks of 20 x 50 ms clock_nanosleep by the time
#      spent off-CPU: 20 blocks, 1.0 s and no more than the workload slept;
#   4. comm is the process's name at the event (each stat() counted under the
#      name it was made with): a process that exits within a
#      millisecond, and one pid under both names across an exec;
#   5. bad input: one line naming the problem, a non-zero exit, no exports;
#   6. --folded with --by comm roots each stack at its comm, counts unchanged.
# tests/workloads/attr_workload.c is the workload: it waits for SIGUSR1 (in
# rt_sigtimedwait, nothing allocated) so that the tracers record it whole.
#   attribution_test.sh STACKMAPD SOURCE_DIR PYTHON ATTR_WORKLOAD
set -u
BIN=$1
PY=${3:-python3}
WORKLOAD=$4

tmp=$(mktemp -d)
chmod 755 "$tmp"
T=/sys/kernel/tracing
inst=$T/instances/stackmapd_attr_$$
bg_pids=
cleanup() {
  local p
  for p in $bg_pids; do kill "$p" 2> /dev/null; done  # TERM: timeout passes it on
  if [ -d "$inst" ]; then
    echo 0 > "$inst/tracing_on"
    echo 0 > "$inst/events/enable"
    echo > "$inst/set_event_pid"
    rmdir "$inst" || echo "cannot remove the tracefs instance $inst"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

shell_comm=$(cat /proc/$$/comm)  # what a forked child is called until it execs

# --- helpers ------------------------------------------------------------------
# A background process whose pid is killed on exit if the test stops early.
track() { bg_pids="$bg_pids $1"; }

# wait_attached STDERR_FILE PID: stackmapd logged "tracing ..." (it is attached).
wait_attached() {
  for _ in $(seq 200); do
    grep -q "tracing " "$1" 2> /dev/null && return 0
    kill -0 "$2" 2> /dev/null || break
    sleep 0.05
  done
  fail "stackmapd never said it was tracing: $(cat "$1")"
  return 1
}

# ftrace_start PID: kmem:kmem_cache_alloc of PID only, in an instance of our own.
ftrace_start() {
  mkdir "$inst" || return 1
  echo 0 > "$inst/tracing_on"
  echo 8192 > "$inst/buffer_size_kb"  # per CPU: 20000 events of ~88 bytes need ~1.8 MB
  echo "$1" > "$inst/set_event_pid"
  echo 1 > "$inst/events/kmem/kmem_cache_alloc/enable"
  echo 1 > "$inst/tracing_on"
}
# ftrace_stop: the instance's events in $tmp/ftrace.txt, its loss counters in
# $ftrace_lost (every overrun, commit overrun and dropped events of every CPU).
ftrace_stop() {
  echo 0 > "$inst/tracing_on"
  grep -v '^#' "$inst/trace" > "$tmp/ftrace.txt"
  ftrace_lost=$(grep -hE '^(overrun|commit overrun|dropped events):' "$inst"/per_cpu/cpu*/stats |
    awk '{s += $NF} END {print s + 0}')
  echo 0 > "$inst/events/enable"
  echo > "$inst/set_event_pid"
  rmdir "$inst"
}

# j COMMAND FILE ARGS: questions about a stack_map.json (see the heredoc).
cat > "$tmp/j.py" <<'PYEOF'
import json, re, sys
cmd = sys.argv[1]
try:
    doc = json.load(open(sys.argv[2]))
except (OSError, ValueError) as e:
    sys.exit(f"j.py {cmd}: {e}")
args = sys.argv[3:]
stacks = doc["stacks"]
names = lambda s: [n.split("+")[0] for n in s["symbols"]]
has = lambda s, rx: any(re.fullmatch(rx, n) for n in names(s))
# An interrupt taken in a function allocates for itself, its frames above
# the function's: a stack reaches rx directly when none comes before it.
IRQ = r"asm_\w+|\w*(irq|softirq|interrupt)\w*|sysvec_\w+"
def reached(s, rx):
    for n in names(s):
        if re.fullmatch(rx, n):
            return True
        if re.fullmatch(IRQ, n):
            return False
    return False

if cmd == "check":  # check KEYS(comma) WEIGHTED(0|1): the "by" contract; prints problems
    keys, weighted = set(args[0].split(",")), args[1] == "1"
    problems = []
    if not isinstance(doc.get("sources"), list) or not doc["sources"]:
        problems.append("no top-level sources list")
    for s in stacks:
        sid = s["stack_id"]
        if weighted != ("sum" in s):
            problems.append(f"stack {sid}: 'sum' {'missing' if weighted else 'present unweighted'}")
        by = s.get("by")
        if not isinstance(by, list) or not by:
            problems.append(f"stack {sid}: no 'by' list")
            continue
        for e in by:
            want = ({"other"} if e.get("other") is True else keys) | {"count"}
            if weighted:
                want |= {"sum"}
            if set(e) != want:
                problems.append(f"stack {sid}: entry {e} has not the keys {sorted(want)}")
            if not isinstance(e.get("count"), int) or e["count"] <= 0:
                problems.append(f"stack {sid}: entry {e} count is not a positive integer")
        if sum(e.get("count", 0) for e in by) != s["ref_count"]:
            problems.append(f"stack {sid}: 'by' counts add to {sum(e.get('count', 0) for e in by)},"
                            f" ref_count {s['ref_count']}")
        if weighted and sum(e.get("sum", 0) for e in by) != s.get("sum"):
            problems.append(f"stack {sid}: 'by' sums add to {sum(e.get('sum', 0) for e in by)},"
                            f" sum {s.get('sum')}")
    print("; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
          if problems else "ok")
elif cmd == "by":  # by [KEY=VALUE...] [frame=REGEX]: "count sum" of the matching entries (REGEX reached)
    want = dict(a.split("=", 1) for a in args)
    frame = want.pop("frame", None)
    count = total = 0
    for s in stacks:
        if frame and not reached(s, frame):
            continue
        for e in s.get("by", []):
            if all(k in e and str(e[k]) == v for k, v in want.items()):
                count += e["count"]
                total += e.get("sum", 0)
    print(count, total)
elif cmd == "other":  # number of overflow entries
    print(sum(1 for s in stacks for e in s.get("by", []) if e.get("other")))
elif cmd == "comms":  # comms PID: the comm values of PID's entries
    print(",".join(sorted({str(e.get("comm")) for s in stacks for e in s.get("by", [])
                           if str(e.get("pid")) == args[0]})))
elif cmd == "stacks":  # stacks REGEX [EXCLUDE_REGEX]: "stacks refs sum" with a frame named REGEX
    sel = [s for s in stacks if has(s, args[0]) and not (len(args) > 1 and has(s, args[1]))]
    print(len(sel), sum(s["ref_count"] for s in sel), sum(s.get("sum", 0) for s in sel))
elif cmd == "getname":  # "stacks refs bad": stacks reaching getname, those not weighing 4096 per event
    sel = [s for s in stacks if reached(s, r"getname.*")]
    bad = [s for s in sel if s.get("sum") != 4096 * s["ref_count"]]
    print(len(sel), sum(s["ref_count"] for s in sel), len(bad))
elif cmd == "light":  # light K: stacks weighing less than K per event
    print(sum(1 for s in stacks if s.get("sum", 0) < int(args[0]) * s["ref_count"]))
elif cmd == "sources":
    print(json.dumps(doc.get("sources")))
elif cmd == "total":  # "refs sum" of all stacks
    print(sum(s["ref_count"] for s in stacks), sum(s.get("sum", 0) for s in stacks))
PYEOF
j() { "$PY" "$tmp/j.py" "$@"; }

# --- 1. --by pid: exactly ftrace's count for the pid ---------------------------
N=20000
if start_workload exact stat $N; then
  wp=$wpid
  ftrace_start $wp
  out=$tmp/by_pid
  timeout 20 "$BIN" -e kmem:kmem_cache_alloc --by pid --duration 5 --output "$out" 2> "$tmp/by_pid.err" &
  sp=$!
  track $sp
  wait_attached "$tmp/by_pid.err" $sp
  kill -USR1 $wp
  wait $wp
  wrc=$?
  kill -0 $sp 2> /dev/null
  running=$?
  wait $sp
  rc=$?
  ftrace_stop
  check "the workload did its $N stat()s: $(cat "$tmp/exact.err")" '[ $wrc -eq 0 ]'
  check "stackmapd was still recording when the workload exited" '[ $running -eq 0 ]'
  check "--by pid session exits 0 ($(tail -1 "$tmp/by_pid.err"))" '[ $rc -eq 0 ]'
  ft=$(grep -c ' kmem_cache_alloc: ' "$tmp/ftrace.txt")
  check "ftrace lost no event (overrun, commit overrun, dropped: $ftrace_lost)" '[ "$ftrace_lost" -eq 0 ]'
  check "ftrace recorded only pid $wp" '[ "$(grep -cvE -- "-$wp +\[[0-9]+\]" "$tmp/ftrace.txt")" -eq 0 ]'
  check "ftrace saw the $N names_cache allocations of the stat()s, and few others ($ft)" \
    '[ "$(grep -c " name=names_cache " "$tmp/ftrace.txt")" -ge $N ] && [ "$ft" -lt $((N + 1000)) ]'
  read -r mine _ <<< "$(j by "$out/stack_map.json" pid=$wp)"
  check "--by pid: pid $wp has ftrace's count exactly ($mine events, ftrace $ft)" '[ "$mine" -eq "$ft" ]'
  check "--by pid: that count is more than the $N stat()s ($mine)" '[ "$mine" -gt $N ]'
  check "--by pid: no event dropped ($(stat_of drops "$out/stack_map_stat"))" \
    '[ "$(stat_of drops "$out/stack_map_stat")" -eq 0 ]'
  check "--by pid: no (stack, pid) pair overflowed ($(j other "$out/stack_map.json") 'other' entries)" \
    '[ "$(j other "$out/stack_map.json")" -eq 0 ]'
  problems=$(j check "$out/stack_map.json" pid 0)
  check "--by pid: each stack's entries are {pid, count} and add up to its ref_count ($problems)" \
    '[ "$problems" = ok ]'
  check "--by pid: sources is [\"kmem:kmem_cache_alloc\"] ($(j sources "$out/stack_map.json"))" \
    '[ "$(j sources "$out/stack_map.json")" = "[\"kmem:kmem_cache_alloc\"]" ]'
fi

# --- 2. --sum bytes_alloc: names_cache weighs 4096, bytes as ftrace's ---------
# names_cache (getname_flags.part.0 on 6.18) is PATH_MAX: bytes_alloc=4096.
N=5000
if start_workload bytes stat $N; then
  wp=$wpid
  ftrace_start $wp
  out=$tmp/sum
  timeout 20 "$BIN" -e kmem:kmem_cache_alloc --sum bytes_alloc --by pid --duration 4 --output "$out" \
    2> "$tmp/sum.err" &
  sp=$!
  track $sp
  wait_attached "$tmp/sum.err" $sp
  kill -USR1 $wp
  wait $wp
  wrc=$?
  kill -0 $sp 2> /dev/null
  running=$?
  wait $sp
  rc=$?
  ftrace_stop
  check "the workload did its $N stat()s: $(cat "$tmp/bytes.err")" '[ $wrc -eq 0 ]'
  check "stackmapd was still recording when the workload exited" '[ $running -eq 0 ]'
  check "--sum bytes_alloc session exits 0 ($(tail -1 "$tmp/sum.err"))" '[ $rc -eq 0 ]'
  read -r nstacks refs bad <<< "$(j getname "$out/stack_map.json")"
  check "--sum: getname stacks recorded ($nstacks stacks, $refs events, at least the $N stat()s)" \
    '[ "$nstacks" -gt 0 ] && [ "$refs" -ge $N ]'
  check "--sum: every getname stack weighs 4096 x ref_count ($bad do not)" '[ "$bad" -eq 0 ]'
  check "--sum: every stack weighs at least 8 bytes (the smallest object) per event ($(j light "$out/stack_map.json" 8) do not)" \
    '[ "$(j light "$out/stack_map.json" 8)" -eq 0 ]'
  read -r c s <<< "$(j by "$out/stack_map.json" pid=$wp frame='getname.*')"
  check "--sum: pid $wp's getname entries weigh 4096 each ($c events, $s bytes)" \
    '[ "$c" -ge $N ] && [ "$s" -eq $((4096 * c)) ]'
  ft_bytes=$(grep -oE ' bytes_alloc=[0-9]+' "$tmp/ftrace.txt" | cut -d= -f2 | awk '{s += $1} END {print s + 0}')
  ft=$(grep -c ' kmem_cache_alloc: ' "$tmp/ftrace.txt")
  read -r c s <<< "$(j by "$out/stack_map.json" pid=$wp)"
  check "--sum: pid $wp has ftrace's events and bytes exactly ($c, $s; ftrace $ft, $ft_bytes; lost $ftrace_lost)" \
    '[ "$ftrace_lost" -eq 0 ] && [ "$c" -eq "$ft" ] && [ "$s" -eq "$ft_bytes" ]'
  problems=$(j check "$out/stack_map.json" pid 1)
  check "--sum: each stack's entries are {pid, count, sum} and add up to its ref_count and sum ($problems)" \
    '[ "$problems" = ok ]'
fi

# --- 3. --offcpu: 20 x 50 ms of clock_nanosleep -------------------------------
# At switch-out the stack is __schedule <- schedule <- do_nanosleep <-
# hrtimer_nanosleep <- common_nsleep_timens <- __x64_sys_clock_nanosleep here.
# A block lasts from the switch-out to the switch-in, so it is never shorter
# than the 50 ms asked for (less the few us between arming the timer and
# switching out), and it includes the wait on the run queue after the
# wake-up: on a loaded machine it is longer. The bound above is the
# workload's own clock around its 20 sleeps, so the check is as tight on a
# busy machine as on a quiet one (where that clock says ~1.001 s).
if start_workload sleep sleep 20 50; then
  wp=$wpid
  out=$tmp/offcpu
  duration=3
  timeout 20 "$BIN" --offcpu --pid $wp --min-block-us 1000 --duration $duration --output "$out" \
    2> "$tmp/offcpu.err" &
  sp=$!
  track $sp
  wait_attached "$tmp/offcpu.err" $sp
  kill -USR1 $wp
  wait $wp
  wrc=$?
  kill -0 $sp 2> /dev/null
  running=$?
  wait $sp
  rc=$?
  slept_us=$(sed -nE 's/.*: 20 ops in ([0-9]+) us$/\1/p' "$tmp/sleep.err")
  check "the workload slept 20 times ($(cat "$tmp/sleep.err"))" '[ $wrc -eq 0 ] && [ -n "$slept_us" ]'
  check "stackmapd was still recording when the sleeper exited" '[ $running -eq 0 ]'
  check "--offcpu session exits 0 ($(tail -1 "$tmp/offcpu.err"))" '[ $rc -eq 0 ]'
  # The kernel runs no perf tracepoint program for a few switches (about 1
  # in 500 under load; bpftrace's sched_switch misses the same): a block
  # whose switch-in went unseen is found at the next switch-out and dropped
  # as unended, never merged into the next one. No other drop is allowed.
  unended=$(stat_of drop_offcpu_unended "$out/stack_map_stat")
  check "--offcpu: no block dropped but unended ones, at most 2 of 20 ($(stat_of drops "$out/stack_map_stat") dropped, ${unended:-none} unended)" \
    '[ "$(stat_of drops "$out/stack_map_stat")" = "$unended" ] && [ "$unended" -le 2 ]'

  # A block still open when the session ends counts up to its end, as an event.
  open_out=$tmp/offcpu_open
  mkdir -p "$open_out"
  # Loading takes ~0.5 s on a busy machine: the sleep begins well after.
  sh -c 'sleep 2; exec sleep 30' &
  sleeper=$!
  timeout 20 "$BIN" --offcpu --pid $sleeper --duration 4 --output "$open_out" 2> "$tmp/open.err"
  kill $sleeper 2> /dev/null
  open=$(stat_of offcpu_open "$open_out/stack_map_stat")
  check "--offcpu: the sleep still going at the end is counted (offcpu_open ${open:-none})" \
    '[ "${open:-0}" -ge 1 ]'
  check "--offcpu: and as an event (events = events_total = hits + drops)" \
    '[ "$(stat_of events "$open_out/stack_map_stat")" = "$(stat_of events_total "$open_out/stack_map_stat")" ]'
  check "--offcpu: sources is [\"offcpu\"] ($(j sources "$out/stack_map.json"))" \
    '[ "$(j sources "$out/stack_map.json")" = "[\"offcpu\"]" ]'
  nanosleep='do_nanosleep|hrtimer_nanosleep|__x64_sys_clock_nanosleep'
  read -r nstacks blocks ns <<< "$(j stacks "$out/stack_map.json" "$nanosleep")"
  # A preemption inside do_nanosleep after the wake-up, waiting > 1 ms for the
  # CPU, would be a block of its own with the same frames under
  # preempt_schedule* (or cond_resched): in the weight, not among the 20 sleeps.
  read -r _ sleeps _ <<< "$(j stacks "$out/stack_map.json" "$nanosleep" 'preempt_schedule.*|__cond_resched|irqentry_exit.*')"
  # An unended block may be a sleep or a preemption: the sleeps counted are
  # the 20, less at most the unended ones.
  check "--offcpu: the nanosleep stacks hold the 20 sleeps, but for unended ones ($sleeps blocks, $unended unended, $blocks with any preempted ones, in $nstacks stacks)" \
    '[ "$sleeps" -le 20 ] && [ $((sleeps + unended)) -ge 20 ]'
  check "--offcpu: they weigh $sleeps x 50 ms ($ns ns): at least that, at most the workload's own $slept_us us" \
    '[ "$ns" -ge $((sleeps * 49900000)) ] && [ "$ns" -le $((slept_us * 1000 + 1000000)) ]'
  check "--offcpu: and nearly all of it (>= 95% of the workload's $slept_us us for $sleeps of 20 sleeps)" \
    '[ "$ns" -ge $((slept_us * 950 * sleeps / 20)) ]'
  read -r _ all_ns <<< "$(j total "$out/stack_map.json")"
  check "--offcpu: all blocks of the one-thread process weigh less than the $duration s session ($all_ns ns)" \
    '[ "$all_ns" -le $((duration * 1000000000)) ]'
  check "--offcpu: every stack is weighted by at least --min-block-us 1000 per block ($(j light "$out/stack_map.json" 1000000) lighter)" \
    '[ "$(j light "$out/stack_map.json" 1000000)" -eq 0 ]'
fi

# --- 4. names: a process of under a millisecond, and a rename by exec ---------
cp "$WORKLOAD" "$tmp/smtq_parent"
cp "$WORKLOAD" "$tmp/smtq_child_x"
cp "$WORKLOAD" "$tmp/smtq_short"
out=$tmp/names
timeout 20 "$BIN" -e kmem:kmem_cache_alloc --by pid,comm --duration 3 --output "$out" 2> "$tmp/names.err" &
sp=$!
track $sp
wait_attached "$tmp/names.err" $sp
"$tmp/smtq_short" stat 100 2> "$tmp/short.err" &
short=$!
wait $short
"$tmp/smtq_parent" stat 300 "$tmp/smtq_child_x" 200 2> "$tmp/exec.err" &
execd=$!
wait $execd
wrc=$?
wait $sp
rc=$?
check "--by pid,comm session exits 0 ($(tail -1 "$tmp/names.err"))" '[ $rc -eq 0 ]'
# Its work takes ~0.1 ms and the whole process a few (the dynamic loader): it
# is reaped long before the session's last drain, so its name cannot come
# from /proc afterwards.
short_us=$(sed -nE 's/.*: 100 ops in ([0-9]+) us$/\1/p' "$tmp/short.err")
check "smtq_short did its work in under a millisecond (${short_us:-?} us) and is gone" \
  '[ -n "$short_us" ] && [ "$short_us" -lt 1000 ] && ! [ -e /proc/$short ]'
read -r c _ <<< "$(j by "$out/stack_map.json" pid=$short comm=smtq_short)"
check "the short-lived pid $short is named smtq_short, with its 100 stat()s ($c events)" '[ "$c" -ge 100 ]'
comms=$(j comms "$out/stack_map.json" $short)
check "and by no other name than its forking shell's ($comms)" \
  '[ "$comms" = smtq_short ] || [ "$comms" = "$(echo "$shell_comm,smtq_short" | tr , "\n" | sort | paste -sd,)" ]'
check "smtq_parent exec'd smtq_child_x ($(cat "$tmp/exec.err"))" '[ $wrc -eq 0 ] && grep -q "comm smtq_child_x: 200 ops" "$tmp/exec.err"'
read -r c _ <<< "$(j by "$out/stack_map.json" pid=$execd comm=smtq_parent)"
check "pid $execd before the exec is smtq_parent, with its 300 stat()s ($c events)" '[ "$c" -ge 300 ]'
read -r c _ <<< "$(j by "$out/stack_map.json" pid=$execd comm=smtq_child_x)"
check "pid $execd after the exec is smtq_child_x, with its 200 stat()s ($c events)" '[ "$c" -ge 200 ]'
# Exactly: the stat()s' getname()s (under vfs_fstatat; the loader's fstat()s
# by fd allocate nothing here) fall on the side of the exec they were made on.
read -r c _ <<< "$(j by "$out/stack_map.json" pid=$execd comm=smtq_parent frame=vfs_fstatat)"
read -r c2 _ <<< "$(j by "$out/stack_map.json" pid=$execd comm=smtq_child_x frame=vfs_fstatat)"
read -r c3 _ <<< "$(j by "$out/stack_map.json" pid=$short comm=smtq_short frame=vfs_fstatat)"
check "the stat() stacks (vfs_fstatat) count each name's stat()s exactly: 300 = $c, 200 = $c2, 100 = $c3" \
  '[ "$c" -eq 300 ] && [ "$c2" -eq 200 ] && [ "$c3" -eq 100 ]'
comms=$(j comms "$out/stack_map.json" $execd)
check "pid $execd has no other name than those and its forking shell's ($comms)" \
  '[ -n "$comms" ] && [ -z "$(echo "$comms" | tr , "\n" | grep -vxE "smtq_parent|smtq_child_x|$shell_comm")" ]'
check "--by pid,comm: no (stack, key) pair overflowed ($(j other "$out/stack_map.json") 'other' entries)" \
  '[ "$(j other "$out/stack_map.json")" -eq 0 ]'
problems=$(j check "$out/stack_map.json" pid,comm 0)
check "--by pid,comm: entries are {pid, comm, count} and add up to each ref_count ($problems)" \
  '[ "$problems" = ok ]'

# --- 4b. cgroups: a process in a cgroup of our own is counted under its path ---
cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
cgname=smtq-attr-$$
out=$tmp/cgroup
mkdir -p "$out" "$cg2/$cgname"
start_workload cgroup stat 2000
echo $wpid > "$cg2/$cgname/cgroup.procs"
timeout 20 "$BIN" -e kmem:kmem_cache_alloc --by cgroup --duration 3 --output "$out" 2> "$tmp/cgroup.err" &
sp=$!
wait_attached "$tmp/cgroup.err" $sp
kill -USR1 $wpid
wait $wpid
wait $sp
rmdir "$cg2/$cgname"
n=$("$PY" -c 'import json, sys
doc = json.load(open(sys.argv[1]))
print(sum(b["count"] for s in doc["stacks"] for b in s.get("by", []) if b.get("cgroup") == sys.argv[2]))' \
  "$out/stack_map.json" "/$cgname")
check "--by cgroup: the workload's 2000 stat()s are under /$cgname ($n events)" '[ "${n:-0}" -ge 2000 ]'

# --- 5. bad input ---------------------------------------------------------------
# bad_input NAMED WORDS ARGS...: stackmapd ARGS --output DIR fails with one line
# on stderr that contains the fixed strings NAMED (|-separated: the culprits,
# which may echo the command line) and matches the ERE WORDS (the problem
# itself, which must not match the command line: as expect_error's rule), and
# DIR stays empty.
nbad=0
bad_input() {
  local named=$1 words=$2 dir=$tmp/bad.$((++nbad))
  shift 2
  mkdir "$dir"
  if grep -qE -- "$words" <<< "$*"; then
    fail "bad_input: '$words' matches the command line ($*): match the problem text instead"
    return 0
  fi
  timeout 20 "$BIN" "$@" --output "$dir" > "$tmp/bad.out" 2> "$tmp/bad.err"
  local rc=$? lines msg
  lines=$(wc -l < "$tmp/bad.err")
  msg=$(head -c 300 "$tmp/bad.err" | tr '\n' '|')
  local missing='' p parts
  IFS='|' read -ra parts <<< "$named"
  for p in "${parts[@]}"; do grep -qF -- "$p" "$tmp/bad.err" || missing="$missing '$p'"; done
  check "'$*' is refused: non-zero exit, one line naming${named:+ $named and} /$words/ ($rc, $lines lines: $msg)" \
    '[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$lines" -eq 1 ] && [ -z "$missing" ] && grep -qE -- "$words" "$tmp/bad.err"'
  check "'$*' writes nothing in --output ($(ls -A "$dir" | tr '\n' ' '))" '[ -z "$(ls -A "$dir")" ]'
}
# --by names the keys that exist; --sum the fields of the event (the issue).
bad_input nosuchkey 'cgroup' --by nosuchkey --duration 1
bad_input nosuchfield 'bytes_alloc' -e kmem:kmem_cache_alloc --sum nosuchfield --duration 1
bad_input 'kmem:nope*' 'tracepoint|match' -e 'kmem:nope*' --duration 1
bad_input '--offcpu|--profile' 'cannot|not both|combin|together|exclusive|excludes|conflict|either' \
  --offcpu --profile 99 --duration 1
bad_input --max-keys 'at least|out of range|more than|must be|positive|less|range|too small' \
  --max-keys 0 --duration 1

# --- 6. --folded with --by comm: the comm is the root frame --------------------
cp "$WORKLOAD" "$tmp/smtq_fold"
out=$tmp/folded
timeout 20 "$BIN" -e kmem:kmem_cache_alloc --by comm --folded - --duration 2 --output "$out" \
  > "$tmp/folded.txt" 2> "$tmp/folded.err" &
sp=$!
track $sp
wait_attached "$tmp/folded.err" $sp
"$tmp/smtq_fold" stat 2000 2> /dev/null
wait $sp
rc=$?
check "--folded - --by comm session exits 0 ($(tail -1 "$tmp/folded.err"))" '[ $rc -eq 0 ]'
hits=$(counted_of "$out/stack_map_stat")
check "--by comm: no (stack, comm) pair overflowed ($(j other "$out/stack_map.json") 'other' entries)" \
  '[ "$(j other "$out/stack_map.json")" -eq 0 ]'
check "folded: every line is 'comm;frame;...;frame count' (2 frames at least)" \
  '[ -s "$tmp/folded.txt" ] && [ "$(grep -cvE "^[^;]+(;[^ ;]+)+ [0-9]+\$" "$tmp/folded.txt")" -eq 0 ]'
check "folded: counts add up to the events (${hits:-?} hits, no weights)" \
  '[ "$(awk "{s += \$NF} END {print s + 0}" "$tmp/folded.txt")" -eq "${hits:--1}" ]'
check "folded: smtq_fold is the root frame of its syscalls' stacks" 'grep -qE "^smtq_fold;entry_SYSCALL_64[a-z_]*;" "$tmp/folded.txt"'
read -r c _ <<< "$(j by "$out/stack_map.json" comm=smtq_fold)"
check "folded: the lines rooted at smtq_fold count its JSON events ($c, at least its 2000 stat()s)" \
  '[ "$c" -ge 2000 ] && [ "$(awk "/^smtq_fold;/ {s += \$NF} END {print s + 0}" "$tmp/folded.txt")" -eq "$c" ]'
check "folded: no stack is rooted at the kernel's entry frames (each starts with a comm)" \
  '[ -s "$tmp/folded.txt" ] && [ "$(grep -cE "^entry_SYSCALL_64[a-z_]*;" "$tmp/folded.txt")" -eq 0 ]'

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --comm and --cgroup, as root on this kernel, against ftrace's own counts:
#   1. --comm NAME counts exactly what a tracefs instance filtered by
#      'comm == "NAME"' counts, while another process runs the same code;
#   2. --cgroup PARENT keeps a process in a cgroup below PARENT, exactly its
#      ftrace count (set_event_pid), and no process outside it;
#   3. two names in one --comm keep both (OR), --comm and --cgroup together
#      only what both keep (AND);
#   4. --offcpu --comm keeps the blocks of that name only;
#   5. bad values: one line naming the problem, a non-zero exit.
#   filters_test.sh STACKMAPD PYTHON ATTR_WORKLOAD
set -u
BIN=$1
PY=$2
WORKLOAD=$3

tmp=$(mktemp -d /tmp/H-filters.XXXXXX)
chmod 755 "$tmp"
T=/sys/kernel/tracing
inst=$T/instances/stackmapd_filters_$$
# The cgroup2 mount: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid system.
cg2=$(awk '$(NF-2) == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
cg=$cg2/stackmapd_filters_$$
bg_pids=
cleanup() {
  local p
  for p in $bg_pids; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  if [ -d "$inst" ]; then
    echo 0 > "$inst/tracing_on"
    echo 0 > "$inst/events/enable"
    rmdir "$inst" || echo "cannot remove the tracefs instance $inst"
  fi
  [ -d "$cg/inner" ] && rmdir "$cg/inner"
  [ -d "$cg" ] && rmdir "$cg"
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"
track() { bg_pids="$bg_pids $1"; }

# ftrace_start FILE VALUE: kmem:kmem_cache_alloc in an instance of our own,
# with VALUE written to the instance's FILE (the event's filter, set_event_pid).
ftrace_start() {
  mkdir "$inst" || return 1
  echo 0 > "$inst/tracing_on"
  echo 8192 > "$inst/buffer_size_kb"
  echo "$2" > "$inst/$1"
  echo 1 > "$inst/events/kmem/kmem_cache_alloc/enable"
  echo 1 > "$inst/tracing_on"
}
ftrace_stop() {  # the instance's events in $tmp/ftrace.txt, its losses in $ftrace_lost
  echo 0 > "$inst/tracing_on"
  grep -v '^#' "$inst/trace" > "$tmp/ftrace.txt"
  ftrace_lost=$(grep -hE '^(overrun|commit overrun|dropped events):' "$inst"/per_cpu/cpu*/stats |
    awk '{s += $NF} END {print s + 0}')
  echo 0 > "$inst/events/enable"
  echo 0 > "$inst/events/kmem/kmem_cache_alloc/filter"
  echo > "$inst/set_event_pid"
  rmdir "$inst"
}

# record OUT ARGS...: stackmapd ARGS --output OUT around the go of the workloads
# already started ($go: their pids), until they are done; sets $rc.
record() {
  local out=$1 p
  shift
  "$BIN" "$@" --duration 30 --output "$out" 2> "$out.err" &
  local sp=$!
  track $sp
  wait_tracing "$out.err" "$*"
  for p in $go; do kill -USR1 "$p"; done
  for p in $go; do wait "$p"; done
  kill -TERM $sp 2> /dev/null
  wait $sp
  rc=$?
}

# by FILE KEY: "VALUE=COUNT ..." of the JSON export's "by" entries, summed by KEY's value.
by() {
  "$PY" - "$1" "$2" << 'EOF'
import json, sys
from collections import Counter
doc = json.load(open(sys.argv[1]))
c = Counter()
for s in doc["stacks"]:
    for e in s.get("by", []):
        c[str(e.get(sys.argv[2]))] += e["count"]
print(" ".join(f"{k}={v}" for k, v in sorted(c.items())))
EOF
}
total() { "$PY" -c 'import json,sys; print(sum(s["ref_count"] for s in json.load(open(sys.argv[1]))["stacks"]))' "$1"; }

N=5000
# --- 1. --comm: exactly ftrace's 'comm == NAME' -------------------------------
if start_workload keep --comm smtf-keep stat $N; then
  go=$wpid
  start_workload other --comm smtf-other stat $N && go="$go $wpid"
  ftrace_start events/kmem/kmem_cache_alloc/filter 'comm == "smtf-keep"'
  record "$tmp/comm" -e kmem:kmem_cache_alloc --comm smtf-keep --by comm
  ftrace_stop
  ft=$(grep -c ' kmem_cache_alloc: ' "$tmp/ftrace.txt")
  mine=$(total "$tmp/comm/stack_map.json")
  check "--comm smtf-keep exits 0 ($(tail -1 "$tmp/comm.err"))" '[ $rc -eq 0 ]'
  check "ftrace lost no event ($ftrace_lost)" '[ "$ftrace_lost" -eq 0 ]'
  check "--comm: only smtf-keep is counted ($(by "$tmp/comm/stack_map.json" comm))" \
    '[ "$(by "$tmp/comm/stack_map.json" comm)" = "smtf-keep=$mine" ]'
  check "--comm: ftrace's count exactly ($mine events, ftrace $ft), at least the $N stat()s" \
    '[ "$mine" -eq "$ft" ] && [ "$mine" -ge $N ]'
fi

# --- 2. --cgroup: a process in a cgroup below the one given -------------------
if [ -z "$cg2" ] || [ ! -f "$cg2/cgroup.procs" ]; then
  fail "no cgroup2 mount in /proc/self/mountinfo: --cgroup cannot be tested"
  exit 1
fi
mkdir -p "$cg/inner"
if start_workload inside --comm smtf-inside stat $N; then
  inside=$wpid
  echo $inside > "$cg/inner/cgroup.procs"
  go=$inside
  start_workload outside --comm smtf-outside stat $N && go="$go $wpid"
  ftrace_start set_event_pid $inside
  record "$tmp/cgroup" -e kmem:kmem_cache_alloc --cgroup "/stackmapd_filters_$$" --by pid
  ftrace_stop
  ft=$(grep -c ' kmem_cache_alloc: ' "$tmp/ftrace.txt")
  mine=$(total "$tmp/cgroup/stack_map.json")
  check "--cgroup /stackmapd_filters_$$ exits 0 ($(tail -1 "$tmp/cgroup.err"))" '[ $rc -eq 0 ]'
  check "--cgroup: only pid $inside, in $cg/inner, is counted ($(by "$tmp/cgroup/stack_map.json" pid))" \
    '[ "$(by "$tmp/cgroup/stack_map.json" pid)" = "$inside=$mine" ]'
  check "--cgroup: ftrace's count of that pid exactly ($mine events, ftrace $ft)" \
    '[ "$mine" -eq "$ft" ] && [ "$mine" -ge $N ]'
fi

# --- 3. OR within a kind, AND across kinds ------------------------------------
if start_workload a --comm smtf-a stat 2000; then
  a=$wpid
  go=$a
  start_workload b --comm smtf-b stat 2000 && go="$go $wpid"
  start_workload c --comm smtf-c stat 2000 && go="$go $wpid"
  echo $a > "$cg/inner/cgroup.procs"
  record "$tmp/or" -e kmem:kmem_cache_alloc --comm smtf-a,smtf-b --by comm
  got=$(by "$tmp/or/stack_map.json" comm | sed -E 's/=[0-9]+//g')
  check "--comm smtf-a,smtf-b: both and only they ($got)" '[ $rc -eq 0 ] && [ "$got" = "smtf-a smtf-b" ]'
fi
if start_workload a2 --comm smtf-a stat 2000; then
  a=$wpid
  go=$a
  start_workload b2 --comm smtf-b stat 2000 && go="$go $wpid"
  echo $a > "$cg/inner/cgroup.procs"
  record "$tmp/and" -e kmem:kmem_cache_alloc --comm smtf-a,smtf-b --cgroup "$cg" --by comm
  got=$(by "$tmp/and/stack_map.json" comm | sed -E 's/=[0-9]+//g')
  check "--comm smtf-a,smtf-b --cgroup $cg: only smtf-a, the one inside ($got)" \
    '[ $rc -eq 0 ] && [ "$got" = "smtf-a" ]'
fi

# --- 4. --offcpu --comm -------------------------------------------------------
if start_workload sleeper --comm smtf-sleep sleep 20 10; then
  go=$wpid
  start_workload sleeper2 --comm smtf-sleep2 sleep 20 10 && go="$go $wpid"
  record "$tmp/offcpu" --offcpu --comm smtf-sleep --by comm
  got=$(by "$tmp/offcpu/stack_map.json" comm)
  check "--offcpu --comm smtf-sleep: its 20 sleeps and no other task ($got)" \
    '[ $rc -eq 0 ] && [[ "$got" =~ ^smtf-sleep=([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 20 ]'
fi

# --- 5. bad values --------------------------------------------------------------
for bad in "--cgroup /no/such/cgroup_$$" "--cgroup /$(basename "$cg")/../x" "--comm ,"; do
  # shellcheck disable=SC2086  # the words of $bad are options
  "$BIN" $bad --duration 1 > "$tmp/bad.out" 2> "$tmp/bad.err"
  brc=$?
  check "$bad: refused in one line ($(head -1 "$tmp/bad.err"))" \
    '[ $brc -ne 0 ] && [ "$(wc -l < "$tmp/bad.err")" -eq 1 ] && [ ! -s "$tmp/bad.out" ]'
done

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

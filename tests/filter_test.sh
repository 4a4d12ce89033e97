#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --filter, as root on this kernel, against ftrace's own filter: for each
# (event, filter) a tracefs instance with the filter in the event's `filter`
# file and stackmapd -e EVENT --filter FILTER trace the same workloads at the
# same time, and must count the same events. Every filter keeps only the
# test's own tasks (by their names), so both see all of them and nothing
# else: numbers (signed, hex, &), strings (==, globs, ftrace's "*x" on char
# arrays), __data_loc strings, &&, ||, ! and parentheses. Then bad filters:
# one line, exit non-zero, nothing traced.
#   filter_test.sh STACKMAPD PYTHON ATTR_WORKLOAD
set -u
BIN=$1
PY=$2
WORKLOAD=$3

tmp=$(mktemp -d /tmp/H-filter.XXXXXX)
chmod 755 "$tmp"
T=/sys/kernel/tracing
inst=$T/instances/stackmapd_filter_$$
bg_pids=
event=
cleanup() {
  local p
  for p in $bg_pids; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  if [ -d "$inst" ]; then
    echo 0 > "$inst/tracing_on"
    echo 0 > "$inst/events/enable"
    [ -n "$event" ] && echo 0 > "$inst/events/$event/filter"
    rmdir "$inst" || echo "cannot remove the tracefs instance $inst"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"
track() { bg_pids="$bg_pids $1"; }
total() { "$PY" -c 'import json,sys; print(sum(s["ref_count"] for s in json.load(open(sys.argv[1]))["stacks"]))' "$1"; }

# The workloads of one case, blocked until their go ($go: their pids).
workloads() {
  go=
  case $1 in
    stat)
      start_workload keep --comm smtf-keep stat 3000 && go=$wpid
      start_workload other --comm smtf-other stat 2000 && go="$go $wpid" ;;
    sleep)
      start_workload sleepy --comm smtf-sleepy sleep 40 2 && go=$wpid
      start_workload sleepx --comm smtf-sleepx sleep 40 2 && go="$go $wpid" ;;
    vfork)
      start_workload vfork --comm smtf-vfork vfork 40 2 && go=$wpid ;;
    exec)
      ln -sf "$(readlink -f "$WORKLOAD")" "$tmp/smtf-exec"
      ln -sf "$(readlink -f "$WORKLOAD")" "$tmp/smtf-other"
      start_workload e1 --comm smtf-pre stat 10 "$tmp/smtf-exec" 10 && go=$wpid
      start_workload e2 --comm smtf-pre stat 10 "$tmp/smtf-exec" 10 && go="$go $wpid"
      start_workload e3 --comm smtf-pre stat 10 "$tmp/smtf-other" 10 && go="$go $wpid" ;;
  esac
}

# same_count WORKLOADS EVENT FILTER [MIN]: both tracers count the same events,
# at least MIN of them.
same_count() {
  local kind=$1 filter=$3 min=${4:-1} out=$tmp/case p sp rc ft mine
  event=${2/://}
  rm -rf "$out" "$out.err"
  workloads "$kind" || return
  mkdir "$inst" || { fail "cannot create $inst"; return; }
  echo 0 > "$inst/tracing_on"
  echo 8192 > "$inst/buffer_size_kb"
  echo "$filter" > "$inst/events/$event/filter" || fail "ftrace refuses '$filter'"
  echo 1 > "$inst/events/$event/enable"
  echo 1 > "$inst/tracing_on"
  "$BIN" -e "$2" --filter "$filter" --duration 60 --output "$out" 2> "$out.err" &
  sp=$!
  track $sp
  wait_tracing "$out.err" "--filter '$filter'"
  for p in $go; do kill -USR1 "$p"; done
  for p in $go; do wait "$p"; done
  kill -TERM $sp 2> /dev/null
  wait $sp
  rc=$?
  echo 0 > "$inst/tracing_on"
  ft=$(grep -v '^#' "$inst/trace" | grep -c " ${event#*/}: ")
  local lost
  lost=$(grep -hE '^(overrun|commit overrun|dropped events):' "$inst"/per_cpu/cpu*/stats |
    awk '{s += $NF} END {print s + 0}')
  echo 0 > "$inst/events/enable"
  echo 0 > "$inst/events/$event/filter"
  rmdir "$inst"
  mine=$( [ -f "$out/stack_map.json" ] && total "$out/stack_map.json" || echo missing)
  check "-e $2 --filter '$filter': exits 0, ftrace lost nothing ($lost)" '[ $rc -eq 0 ] && [ "$lost" -eq 0 ]'
  check "-e $2 --filter '$filter': ftrace's count exactly ($mine events, ftrace $ft, at least $min)" \
    '[ "$mine" = "$ft" ] && [ "$ft" -ge "$min" ]'
}

# Numbers: a compare, a mask, signed and hex constants; strings: ==, "x*".
same_count stat kmem:kmem_cache_alloc 'bytes_alloc >= 4096 && comm == "smtf-keep"' 3000
same_count stat kmem:kmem_cache_alloc '(gfp_flags & 0x400) && comm ~ "smtf-k*" && node < 0' 3000
# && binds tighter than ||; "*x*"; !.
same_count stat kmem:kmem_cache_alloc \
  'comm ~ "*mtf-oth*" || comm == "smtf-keep" && !(bytes_req >= 0x1000)' 2000
same_count stat kmem:kmem_cache_alloc \
  '(comm == "smtf-keep" || comm == "smtf-other") && bytes_req == 4096' 5000
# A __data_loc string field: the cache's name.
same_count stat kmem:kmem_cache_alloc 'name == "names_cache" && comm ~ "smtf-*"' 5000
# char[16] fields: ftrace's "*x" compares the bytes before the array's last
# one, so "*sleepy" matches no short name; a full glob with a class.
same_count sleep sched:sched_switch 'prev_comm ~ "*sleepy" || prev_comm == "smtf-sleepy" && prev_state & 1' 40
same_count sleep sched:sched_switch 'prev_comm ~ "smtf-sl[a-y]epy" && prev_prio > -1' 40
same_count sleep sched:sched_switch 'prev_comm ~ "smtf-sleep?" && prev_comm != "smtf-sleepx"' 40
# prev_state & 2, D: a parent waiting out its vfork child, as docs/usage.md's
# example asks (no disk needed); its child sleeps in S (1), not counted.
same_count vfork sched:sched_switch 'prev_comm ~ "smtf-v*" && prev_state & 2' 40
# __data_loc strings: "*x" is the string's own end; a glob with ?.
same_count exec sched:sched_process_exec 'filename ~ "*/smtf-exec" && old_pid > 0' 2
same_count exec sched:sched_process_exec 'filename ~ "/tmp/*/smtf-?xec" || filename ~ "*smtf-oth*"' 3

# --- bad filters: one line, non-zero, nothing traced -------------------------------
expect_error "field not found: 'nosuch' (kmem:kmem_cache_alloc has: call_site" \
  "$BIN" -e kmem:kmem_cache_alloc --filter 'nosuch == 1' --duration 1
check "an unknown field: the exact line" '[ "$(cat "$tmp/bad.err")" = "stackmapd: -e kmem:kmem_cache_alloc --filter: field not found: '"'"'nosuch'"'"' (kmem:kmem_cache_alloc has: call_site, ptr, name, bytes_req, bytes_alloc, gfp_flags, node, accounted, common_pid, comm, cpu) at column 1: nosuch == 1" ]'
expect_error "expecting numeric field: bytes_alloc is a number at column 16" \
  "$BIN" -e kmem:kmem_cache_alloc --filter 'bytes_alloc == "4096"' --duration 1
expect_error "illegal operation for field type: ~ takes strings at column 13" \
  "$BIN" -e kmem:kmem_cache_alloc --filter 'bytes_alloc ~ 4096' --duration 1
expect_error "expecting string field: comm is a string" \
  "$BIN" -e kmem:kmem_cache_alloc --filter 'comm == 4096' --duration 1
expect_error "expected a predicate after this at column 20" \
  "$BIN" -e kmem:kmem_cache_alloc --filter 'bytes_alloc > 1 && ' --duration 1
expect_error "too many '(': this one is not closed at column 1" \
  "$BIN" -e kmem:kmem_cache_alloc --filter '(bytes_alloc > 1' --duration 1
expect_error "-e kmem:kfree --filter: field not found: 'gfp_flags'" \
  "$BIN" -e kmem:kmem_cache_alloc -e kmem:kfree --filter 'gfp_flags & 1' --duration 1
expect_error "-f and --profile events have none" "$BIN" --profile 99 --filter 'cpu == 0' --duration 1
expect_error "--offcpu has none of its own" "$BIN" --offcpu --filter 'cpu == 0' --duration 1
expect_error "the pinned one has no filter program" \
  "$BIN" --pinned /sys/fs/bpf/none --filter 'cpu == 0' --duration 1
huge=$(head -c 100000 /dev/zero | tr '\0' '(')
expect_error "--filter is 100000 bytes long, more than 4096" \
  "$BIN" -e kmem:kmem_cache_alloc --filter "$huge" --duration 1
deep="$(head -c 40 /dev/zero | tr '\0' '(')cpu == 0"
expect_error "nested too deep: at most 32" "$BIN" -e kmem:kmem_cache_alloc --filter "$deep" --duration 1

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

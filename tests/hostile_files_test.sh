#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Files an unprivileged user (nobody) controls, put where the root daemon
# reads them while tracing that user's process with --user-stacks:
#   1. the traced binary moved away and a FIFO put at its path: the export
#      copies binaries/ through the path; it must neither wait on the FIFO
#      nor copy another file, and must still finish the session;
#   2. the process's /tmp/perf-PID.map (its JIT names) replaced by a FIFO:
#      the capture must not wait on it (it holds the lock exports need).
# On the code before these checks both hung the daemon for good.
#   hostile_files_test.sh STACKMAPD USTACK_WORKLOAD BRIEF_WORKLOAD
set -u
BIN=$1
USTACK=$2
BRIEF=$3

tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"
nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"

# 1. A FIFO at the traced binary's path.
mkdir "$tmp/home"
chown 65534:65534 "$tmp/home"
$nobody cp "$USTACK" "$tmp/home/q4"
$nobody "$tmp/home/q4" 30 > "$tmp/q4.out" &
q4=$!
pids+=($q4)
for _ in $(seq 100); do grep -q ready "$tmp/q4.out" 2> /dev/null && break; sleep 0.05; done
timeout 40 "$BIN" --user-stacks --pid $q4 -e kmem:kmem_cache_alloc --duration 3 \
  --output "$tmp/out1" > /dev/null 2> "$tmp/one.err" &
daemon=$!
sleep 1.5  # its stacks captured, the binary named
$nobody sh -c "mv '$tmp/home/q4' '$tmp/home/q4.moved' && mkfifo '$tmp/home/q4'"
wait $daemon
rc=$?
check "a FIFO at the traced binary's path: the session ends and exports (rc $rc: $(tail -1 "$tmp/one.err"))" \
  '[ $rc -eq 0 ] && [ -s "$tmp/out1/stack_map.json" ] && [ -s "$tmp/out1/binaries/index" ]'
check "... one line says the FIFO was not copied, and why" \
  'grep -q "home/q4 not copied: a FIFO, not a regular file" "$tmp/one.err"'
q4_id=$(awk '/home\/q4$/ {print $1}' "$tmp/out1/binaries/index")
check "... indexed ($q4_id) but no copy of it in binaries/" \
  '[ -n "$q4_id" ] && [ ! -e "$tmp/out1/binaries/$q4_id" ]'
check "... its frames kept the names found live" \
  'grep -q "\"ustack_level_three+0x" "$tmp/out1/stack_map.json"'

# 2. A FIFO as the JIT's perf map (x86_64: the workload's JIT is).
if [ "$(uname -m)" = x86_64 ]; then
  $nobody "$BRIEF" 8000 jit &
  jit=$!
  pids+=($jit)
  map=/tmp/perf-$jit.map
  for _ in $(seq 100); do [ -s "$map" ] && break; sleep 0.02; done
  $nobody sh -c "rm -f '$map' && mkfifo '$map'"
  timeout 40 "$BIN" --user-stacks --pid $jit -e raw_syscalls:sys_enter --duration 2 \
    --output "$tmp/out2" > /dev/null 2> "$tmp/two.err"
  rc=$?
  rm -f "$map"
  check "a FIFO as the JIT's perf map: the session ends and exports (rc $rc: $(tail -1 "$tmp/two.err"))" \
    '[ $rc -eq 0 ] && [ -s "$tmp/out2/stack_map.json" ]'
  check "... one line says the map is a FIFO and not read" \
    'grep -q "perf-[0-9]*.map: a FIFO, not a regular file; its JIT frames stay unnamed" "$tmp/two.err"'
fi
[ "$failures" -eq 0 ] || { echo "--- one.err"; tail -n 5 "$tmp/one.err"; echo "--- two.err"; tail -n 5 "$tmp/two.err" 2> /dev/null; }
echo "$failures failure(s)"
[ "$failures" -eq 0 ]

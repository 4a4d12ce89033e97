#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Files an unprivileged user (nobody) controls, put where the root daemon
# reads them while tracing that user's process with --user-stacks:
#   1. the traced binary moved away and a FIFO put at its path: the export
#      checks the path (is the binary still there?); it must neither wait on
#      the FIFO nor copy it, copy the file mapped instead (the process still
#      runs), and still finish the session;
#   2. the process's /tmp/perf-PID.map (its JIT names) replaced by a FIFO:
#      the capture must not wait on it (it holds the lock exports need);
#   3. the parser sandbox's helpers crashed and hung mid-session.
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
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
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
tracing() {  # tracing ERR: waits until the session traces, then 0.7 s (its stacks captured)
  for _ in $(seq 200); do grep -q "^stackmapd: tracing" "$1" 2> /dev/null && break; sleep 0.05; done
  sleep 0.7
}
tracing "$tmp/one.err"
$nobody sh -c "mv '$tmp/home/q4' '$tmp/home/q4.moved' && mkfifo '$tmp/home/q4'"
wait $daemon
rc=$?
check "a FIFO at the traced binary's path: the session ends and exports (rc $rc: $(tail -1 "$tmp/one.err"))" \
  '[ $rc -eq 0 ] && [ -s "$tmp/out1/stack_map.json" ] && [ -s "$tmp/out1/binaries/index" ]'
q4_id=$(awk '/home\/q4$/ {print $1}' "$tmp/out1/binaries/index")
check "... indexed ($q4_id), and the copy in binaries/ is the file mapped, not the FIFO" \
  '[ -n "$q4_id" ] && [ -f "$tmp/out1/binaries/$q4_id" ] && cmp -s "$tmp/out1/binaries/$q4_id" "$tmp/home/q4.moved"'
check "... its frames kept the names found live" \
  'grep -q "\"ustack_level_three+0x" "$tmp/out1/stack_map.json"'
kill $q4 2> /dev/null

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
[ "$failures" -eq 0 ] || for f in one two three; do echo "--- $f.err"; tail -n 5 "$tmp/$f.err" 2> /dev/null; done
# 3. The parser sandbox's helpers crash (SIGSEGV, as a parser bug would) and
#    hang (SIGSTOP: a file that makes the parser loop) in a system-wide
#    session among new processes: the session still ends on time and
#    exports, each loss said in one line.
( while :; do /bin/true; ls / > /dev/null; sleep 0.01; done ) &
churn=$!
pids+=($churn)
timeout 60 "$BIN" --user-stacks -e raw_syscalls:sys_enter --duration 8 --top 30 \
  --output "$tmp/out3" > "$tmp/three.top" 2> "$tmp/three.err" &
waiter=$!
for _ in $(seq 100); do daemon=$(pgrep -P $waiter stackmapd) && break; sleep 0.05; done
helper_of() { pgrep -f -- "--sandboxed-parser $1 [a-z ]*$daemon "; }
tracing "$tmp/three.err"
crashed=$(helper_of symbols)
hung=$(helper_of build)
kill -SEGV $crashed
kill -STOP $hung
# New binaries (new inodes: their build ids are not cached) for the
# stopped helper to be asked about.
for i in 1 2 3; do cp /bin/ls "$tmp/fresh$i" && "$tmp/fresh$i" -R /usr/share > /dev/null; done &
start=$SECONDS
wait $waiter
rc=$?
took=$((SECONDS - start))
kill $churn 2> /dev/null
check "helpers crashed ($crashed) and hung ($hung): the session ends (rc $rc, ${took} s after) and exports" \
  '[ $rc -eq 0 ] && [ $took -le 40 ] && [ -s "$tmp/out3/stack_map.json" ]'
check "... the crash is said in one line" \
  'grep -q "failed in the parser sandbox (killed by signal 11)" "$tmp/three.err"'
check "... the hang is cut at its time limit and said" \
  'grep -qE "parsing .* failed in the parser sandbox \(no reply within 5000 ms" "$tmp/three.err"'
# The binary whose parse was lost stays unnamed; the others are named by
# the helpers started after.
named=$(grep -cE "^    [A-Za-z_][^ ]*\+0x[0-9a-f]+ \([^)]+\)" "$tmp/three.top")
check "... new helpers named frames after ($named named user frames in --top 30)" \
  '[ "$named" -gt 0 ]'
lost=$(stat_of user_parse_failures "$tmp/out3/stack_map_stat")
check "... stack_map_stat counts both losses (user_parse_failures: $lost)" '[ "${lost:-0}" -ge 2 ]'
check "... no helper outlives the daemon" '! pgrep -f -- "--sandboxed-parser .* $daemon " > /dev/null'

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

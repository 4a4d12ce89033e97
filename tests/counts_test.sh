#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# What a run says it counted, as root on this kernel:
#   - --profile: the summary line's total and stacks are --top's, and samples
#     taken in user mode are said as such, never as drops;
#   - a ring buffer too small for two bursts of events: one log line per
#     burst naming --ringbuf-kb, whose counts sum to drop_ringbuf_full.
#   counts_test.sh STACKMAPD [PYTHON]
set -u
BIN=$1
PY=${2:-python3}

tmp=$(mktemp -d /tmp/H-counts.XXXXXX)
chmod 755 "$tmp"
pids=
cleanup() {
  for p in $pids; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

# --- --profile: one total -----------------------------------------------------
# One process spinning in user mode, one in syscalls: both kinds of samples.
"$PY" -c 'import time
end = time.time() + 4
while time.time() < end: pass' &
pids="$pids $!"
"$PY" -c 'import os, time
end = time.time() + 4
while time.time() < end:
    fd = os.open("/proc/self/stat", os.O_RDONLY); os.read(fd, 256); os.close(fd)' &
pids="$pids $!"
"$BIN" --profile 99 --duration 2 --top 5 --output "$tmp/profile" > "$tmp/top.txt" 2> "$tmp/profile.err"
rc=$?
check "--profile 99 --top 5 exits 0 ($(tail -1 "$tmp/profile.err"))" '[ $rc -eq 0 ]'
st=$tmp/profile/stack_map_stat
summary=$(grep -E '^stackmapd: [0-9]+ events, [0-9]+ unique stacks' "$tmp/profile.err" | tail -1)
header=$(head -1 "$tmp/top.txt")
sum_events=$(sed -nE 's/^stackmapd: ([0-9]+) events.*/\1/p' <<< "$summary")
sum_stacks=$(sed -nE 's/^stackmapd: [0-9]+ events, ([0-9]+) unique stacks.*/\1/p' <<< "$summary")
sum_user=$(sed -nE 's/.* \(([0-9]+) events sampled in user mode: no kernel frames\).*/\1/p' <<< "$summary")
sum_dropped=$(sed -nE 's/.*, ([0-9]+) dropped.*/\1/p' <<< "$summary")
top_events=$(sed -nE 's/^([0-9]+) events, .*/\1/p' <<< "$header")
top_stacks=$(sed -nE 's/^[0-9]+ events, ([0-9]+) unique stacks.*/\1/p' <<< "$header")
user_mode=$(stat_of drop_no_kernel_stack "$st")
check "the summary's total is --top's ('$summary' / '$header')" \
  '[ -n "$top_events" ] && [ "$sum_events" = "$top_events" ] && [ "$top_events" -gt 10 ]'
check "so are its unique stacks" '[ -n "$top_stacks" ] && [ "$sum_stacks" = "$top_stacks" ]'
check "samples were taken in user mode ($user_mode)" '[ "${user_mode:-0}" -gt 10 ]'
check "the summary says them as such" '[ "$sum_user" = "$user_mode" ]'
check "they are not dropped ($sum_dropped dropped)" \
  '[ -n "$sum_dropped" ] && [ "$sum_dropped" -lt "$user_mode" ] && [ "$sum_dropped" -le "$(stat_of drops "$st")" ]'
check "they are listed: --top's empty kernel stack holds them all" \
  'grep -qE "^#[0-9]+ stack_id 4294967293: $user_mode events .*depth 0\$" "$tmp/top.txt"'
check "listed + dropped = every event ($(stat_of events "$st"))" \
  '[ $((sum_events + sum_dropped)) -eq "$(stat_of events "$st")" ]'
drop_lines=$(grep -E '^drop_' "$st" | awk '{s += $2} END {print s}')
check "the stat's drops leave user mode out ($(stat_of drops "$st") = $drop_lines - $user_mode)" \
  '[ "$(stat_of drops "$st")" -eq $((drop_lines - user_mode)) ]'

# --- a full ring buffer: one line per burst -----------------------------------
# Every event sends a record with --trace: a 16 KiB ring overflows at once.
burst() { "$PY" -c 'import os, time
end = time.time() + 1.5
while time.time() < end: os.getppid()'; }
"$BIN" -e syscalls:sys_enter_getppid --trace /dev/null --ringbuf-kb 16 --duration 9 \
  --output "$tmp/ring" 2> "$tmp/ring.err" &
run=$!
pids="$pids $run"
for _ in $(seq 100); do
  grep -q '^stackmapd: tracing' "$tmp/ring.err" && break
  sleep 0.1
done
burst
sleep 3.5  # quiet: the first burst ends and is said
# On a loaded machine a burst may stall past the quiet period: it then
# counts as two, no more.
first=$(grep -c "^stackmapd: ring buffer full:" "$tmp/ring.err")
check "the first burst is said once it ends ($first lines)" '[ "$first" -ge 1 ] && [ "$first" -le 2 ]'
burst
wait $run
rc=$?
check "the run exits 0 ($(tail -1 "$tmp/ring.err"))" '[ $rc -eq 0 ]'
lines=$(grep -E '^stackmapd: ring buffer full: [0-9]+ events dropped in [0-9.]+ s; raise --ringbuf-kb \(now 16\)$' "$tmp/ring.err")
said=$(awk '{s += $5} END {print s + 0}' <<< "$lines")
ringfull=$(stat_of drop_ringbuf_full "$tmp/ring/stack_map_stat")
all=$(grep -c "^stackmapd: ring buffer full:" "$tmp/ring.err")
check "the second burst is said too, each line naming --ringbuf-kb ($all lines)" \
  '[ "$all" -gt "$first" ] && [ "$all" -le 4 ] && [ "$(wc -l <<< "$lines")" -eq "$all" ]'
check "the lines say every ring-full drop ($said of $ringfull)" \
  '[ "${ringfull:-0}" -gt 1000 ] && [ "$said" -eq "$ringfull" ]'

[ $failures -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"

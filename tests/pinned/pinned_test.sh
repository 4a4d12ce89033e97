#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `stackmapd --pinned DIR` on this kernel, as on an Android user build: one
# family's bpfloader object (FAMILY/stackmapd.o, -DSMT_BPFLOADER) is loaded
# and pinned by pin_loader as that family's bpfloader would, then stackmapd
# runs against the pins without creating a map or loading a program, and
# attaches without BPF links, as Android's own clients do (checked with
# strace). Usage: pinned_test.sh STACKMAPD PIN_LOADER FAMILY OBJECT OWN_OBJECT
set -u
BIN=$1
LOADER=$2
FAMILY=$3
OBJ=$4
OWN_OBJ=$5

tmp=$(mktemp -d)
pins=/sys/fs/bpf/stackmapd-pinned-$FAMILY-$$
cleanup() { rm -rf "$tmp" "$pins" "$pins-own" "$pins-bad"; }
trap cleanup EXIT
source "$(dirname "$0")/../check_lib.sh"
busy() { # busy SECONDS: open/read/close as fast as one CPU allows (kernel stacks galore)
  timeout "$1" sh -c 'while :; do cat /proc/self/stat > /dev/null; done' 2> /dev/null
}

mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

# --- the loader's side ------------------------------------------------------
mkdir "$tmp/own" && cp "$OWN_OBJ" "$tmp/own/stackmapd.o"
"$LOADER" "$FAMILY" "$tmp/own/stackmapd.o" "$pins-own" 2> "$tmp/own.err"
check "the family-$FAMILY loader refuses the daemon's own object ($(grep -m1 BTF "$tmp/own.err"))" \
  'grep -q "libbpf BTF maps" "$tmp/own.err" && [ ! -e "$pins-own" ]'
# A copy with a nonzero map offset 20 (U+ abort(), a boot loop) is refused.
mkdir "$tmp/bad" && python3 - "$OBJ" "$tmp/bad/stackmapd.o" <<'PYEOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
hdr = lambda i: struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize)
names = hdr(shstrndx)[4]
for i in range(shnum):
    h = hdr(i)
    if b[names + h[0]:b.index(0, names + h[0])] == b"maps":
        struct.pack_into("<I", b, h[4] + 20, 1000)
open(sys.argv[2], "wb").write(b)
PYEOF
"$LOADER" "$FAMILY" "$tmp/bad/stackmapd.o" "$pins-bad" 2> "$tmp/bad.err"
check "the loader refuses a map definition that would abort U+ ($(grep -m1 abort "$tmp/bad.err"))" \
  'grep -q "abort()" "$tmp/bad.err" && [ ! -e "$pins-bad" ]'
"$LOADER" "$FAMILY" "$OBJ" "$pins" 2> "$tmp/load.err"
rc=$?
check "$FAMILY/stackmapd.o loads and pins like bpfloader ($(tail -1 "$tmp/load.err"))" '[ $rc -eq 0 ]'
# Owners and modes as the definitions say: root's, the system group's (1000)
# where the daemon opens them; BPF-only maps root's alone; programs 0440.
for p in map_stackmapd_slots map_stackmapd_pool map_stackmapd_batches map_stackmapd_ids \
         map_stackmapd_settings map_stackmapd_globals map_stackmapd_names map_stackmapd_cookies; do
  check "pinned as $p, 660 root:system ($(stat -c '%a %u:%g' "$pins/$p" 2>&1))" \
    '[ "$(stat -c "%a %u:%g" "$pins/$p")" = "660 0:1000" ]'
done
for p in map_stackmapd_scratch map_stackmapd_nesting; do
  check "pinned as $p, 600 root:root" '[ "$(stat -c "%a %u:%g" "$pins/$p")" = "600 0:0" ]'
done
# One copy of the tracepoint program per tracepoint attached at once: no
# cookies without BPF links, so the program is what tells sources apart.
for slot in 0 1 2 3 4 5 6 7; do
  p=prog_stackmapd_tracepoint_stackmapd_$slot
  check "pinned as $p, 440 root:system" '[ "$(stat -c "%a %u:%g" "$pins/$p")" = "440 0:1000" ]'
done
if [ "$FAMILY" = r ]; then
  # Android 11's loader knows no perf_event/ section (from 13 on they load).
  check "the R loader leaves the sampling program out" \
    '[ ! -e "$pins/prog_stackmapd_perf_event_stackmapd" ] && grep -q "ignores section perf_event" "$tmp/load.err"'
else
  check "pinned as prog_stackmapd_perf_event_stackmapd, 440 root:system" \
    '[ "$(stat -c "%a %u:%g" "$pins/prog_stackmapd_perf_event_stackmapd")" = "440 0:1000" ]'
fi
prog_ids=$(for slot in 0 1; do
  bpftool -j prog show pinned "$pins/prog_stackmapd_tracepoint_stackmapd_$slot" |
    sed -n 's/^{"id":\([0-9]*\),.*/\1/p'
done)

# --- the daemon on the pins -------------------------------------------------
busy 4 &
strace -f -e trace=bpf,ioctl -o "$tmp/strace.txt" \
  "$BIN" --pinned "$pins" -e kmem:kmem_cache_alloc -e syscalls:sys_enter_openat --by source \
  --duration 2 --output "$tmp/out1" 2> "$tmp/run1.err"
rc=$?
wait
check "a session on the pins exits 0 ($(tail -1 "$tmp/run1.err"))" '[ $rc -eq 0 ]'
check "it opened the pins (BPF_OBJ_GET)" 'grep -q BPF_OBJ_GET "$tmp/strace.txt"'
check "it attached with PERF_EVENT_IOC_SET_BPF, as Android's clients do" \
  '[ "$(grep -c PERF_EVENT_IOC_SET_BPF "$tmp/strace.txt")" -eq 2 ]'
check "it created no BPF link (5.15+ only) and used no cookie" '! grep -q BPF_LINK_CREATE "$tmp/strace.txt"'
check "each event's source is known from its common_type ($(tr -d '\n ' < "$tmp/out1/stack_map.json" | grep -o '"source":"[^"]*"' | sort | uniq -c | tr -s ' ' | tr '\n' ' '))" \
  'python3 - "$tmp/out1/stack_map.json"' <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
counts = {}
for s in doc["stacks"]:
    for e in s.get("by", []):
        src = e.get("source")
        if src is not None:
            counts[src] = counts.get(src, 0) + e["count"]
want = {"kmem:kmem_cache_alloc", "syscalls:sys_enter_openat"}
sys.exit(0 if set(counts) == want and all(counts[k] > 0 for k in want) else 1)
PYEOF
check "it loaded no program and created no map (what SELinux forbids it on Android)" \
  '[ "$(grep -cE "BPF_PROG_LOAD|BPF_MAP_CREATE" "$tmp/strace.txt")" -eq 0 ]'
st=$tmp/out1/stack_map_stat
hits1=$(stat_of hits "$st")
check "stat: the table is the object's, 4096 stacks ($(grep '^entries:' "$st"))" \
  'grep -qE "^entries: +[0-9]+ / 4096\$" "$st"'
check "stat: hits > entries > 0 ($hits1)" '[ "${hits1:-0}" -gt "$(stat_of entries "$st")" ]'
check "stat: every event is a hit or a named drop" \
  '[ "$(stat_of events "$st")" -eq $(( hits1 + $(stat_of drops "$st") )) ]'
check "stack_map symbolizes the allocator's callers" 'grep -q "kmem_cache_alloc" "$tmp/out1/stack_map"'
check "stack_map_bin decodes" '"$BIN" decode "$tmp/out1/stack_map_bin" > "$tmp/dec1.txt" 2> /dev/null'

# A second session continues the same table: ids and counts carry on.
busy 3 &
"$BIN" --pinned "$pins" -e kmem:kmem_cache_alloc --duration 1 --output "$tmp/out2" 2> "$tmp/run2.err"
rc=$?
wait
hits2=$(stat_of hits "$tmp/out2/stack_map_stat")
check "a second session exits 0" '[ $rc -eq 0 ]'
check "it continues the table ($(grep -o 'continuing.*' "$tmp/run2.err"))" 'grep -q "continuing the table" "$tmp/run2.err"'
check "counts carry on ($hits1 -> $hits2)" '[ "${hits2:-0}" -gt "${hits1:-0}" ]'
"$BIN" decode "$tmp/out2/stack_map_bin" > "$tmp/dec2.txt" 2> /dev/null
check "every stack of the first session has the same id and frames in the second" 'python3 - "$tmp/dec1.txt" "$tmp/dec2.txt"' <<'PYEOF'
import re, sys
def stacks(path):
    out, cur = {}, None
    for line in open(path):
        m = re.match(r"stack_id (\d+)", line)
        if m:
            cur = int(m.group(1)); out[cur] = []
        elif cur is not None and line.startswith("  "):
            out[cur].append(line.split()[-1])
    return out
a, b = stacks(sys.argv[1]), stacks(sys.argv[2])
sys.exit(0 if a and all(b.get(k) == v for k, v in a.items()) else 1)
PYEOF
check "no program of ours is left attached after the sessions (no link, no perf event)" \
  '[ -z "$( (bpftool -j link show; bpftool -j perf show) | grep -oE "\"prog_id\":($(echo $prog_ids | tr " " "|"))[,}]")" ]'

# Sampling through the pinned perf_event program (Android 13+ loaders).
if [ "$FAMILY" = r ]; then
  expect_error "perf_event_stackmapd is missing" "$BIN" --pinned "$pins" --profile 199 --duration 1
else
  busy 4 &
  strace -f -e trace=bpf,ioctl -o "$tmp/strace3.txt" \
    "$BIN" --pinned "$pins" --profile 199 --duration 2 --output "$tmp/out3" 2> "$tmp/run3.err"
  rc=$?
  wait
  check "--profile on the pins exits 0 ($(tail -1 "$tmp/run3.err"))" '[ $rc -eq 0 ]'
  check "--profile on the pins records sampled stacks" '[ "$(stat_of hits "$tmp/out3/stack_map_stat")" -gt 0 ]'
  check "--profile attached each CPU with PERF_EVENT_IOC_SET_BPF" \
    '[ "$(grep -c PERF_EVENT_IOC_SET_BPF "$tmp/strace3.txt")" -eq "$(nproc)" ] && ! grep -q BPF_LINK_CREATE "$tmp/strace3.txt"'
fi

# The service on the pins: snapshots on a timer, pins left to the loader.
"$BIN" daemon --config /dev/null --pinned "$pins" --export-dir "$tmp/svc" --snapshot-interval 0.3 \
  -e kmem:kmem_cache_alloc 2> "$tmp/svc.err" &
pid=$!
busy 2
kill -TERM $pid
wait $pid
rc=$?
check "the daemon runs on the pins and stops cleanly" '[ $rc -eq 0 ]'
check "the daemon's export continues the table" \
  '[ "$(stat_of hits "$tmp/svc/stack_map_stat" 2> /dev/null || echo 0)" -gt "${hits2:-0}" ]'
check "the pins stay for the loader after the daemon stops" '[ -e "$pins/map_stackmapd_pool" ]'

# --- bad input: one line naming the problem and the fix ---------------------
expect_error "bpfloader" "$BIN" --pinned /sys/fs/bpf/no-such-dir --duration 1
mkdir -p "$tmp/half"
expect_error "map_stackmapd_pool is missing" "$BIN" --pinned "$tmp/half" --duration 1
expect_error "--pinned use -e" "$BIN" --pinned "$pins" -f vfs_read --duration 1
expect_error "at most 8 tracepoints at once" "$BIN" --pinned "$pins" --duration 1 \
  -e kmem:kmem_cache_alloc -e kmem:kmem_cache_free -e kmem:kmalloc -e kmem:kfree \
  -e kmem:mm_page_alloc -e kmem:mm_page_free -e sched:sched_switch -e sched:sched_wakeup \
  -e syscalls:sys_enter_read
expect_error "drop --backend tracefs" "$BIN" --pinned "$pins" --backend tracefs --duration 1
# Two readers of one table would each count half of the events.
"$BIN" --pinned "$pins" --duration 3 2> /dev/null &
pid=$!
sleep 1
expect_error "another stackmapd uses" "$BIN" --pinned "$pins" --duration 1
wait $pid

echo "pinned_$FAMILY: $failures failure(s)"
[ $failures -eq 0 ]

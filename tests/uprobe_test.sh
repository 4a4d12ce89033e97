#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# -u user-space probes, as root on this kernel, on tests/workloads/uprobe_workload.c
# (-O2 -fomit-frame-pointer), which waits for SIGUSR1 and then calls
# uprobe_target A times from uprobe_call_a and B times from uprobe_call_b:
#   1. -u PROG:uprobe_target counts exactly A + B, every event's user stack
#      uprobe_target <- uprobe_call_a|b <- main, A and B of each: the caller
#      comes from the return address (unwind tables, CFA = rsp+8 at entry);
#   2. with --user-unwind fp the caller comes from the return address at the
#      stack's top (a probe at an entry says so in its cookie); 3 bytes into
#      the function the frame-pointer walk skips it: what the tables are for,
#      and proof that check 1 can fail;
#   3. uprobe_target+OFF, past its first instruction: the same counts and stacks;
#   4. without --pid (a probe for every process): the same count;
#   5. a glob: -u 'PROG:uprobe_call_?' is one source per function, 1 event
#      each, and a site that another -u names again is probed once;
#   6. a library by soname through --pid's maps: libc:getppid counts A + B;
#   7. USDT stackmapd_test:tick, whose sites the workload reaches only while
#      its semaphore is set: counted exactly, as many as the workload saw it
#      set (A + B), and 0 ticks in a run without -u on it;
#   8. --hist arg0 at uprobe_target's entry and at the USDT site: each bucket
#      what the workload's arguments put there;
#   9. bad input: one line each, non-zero exit.
#   uprobe_test.sh STACKMAPD UPROBE_WORKLOAD PYTHON
set -u
BIN=$1
WORKLOAD=$2
PY=${3:-python3}
A=1234
B=567

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

# run NAME STACKMAPD_ARGS...: a fresh workload blocked on its go signal,
# stackmapd on it with --pid (its tables loaded before the first event) until
# the workload has made its calls; the workload's output in $tmp/NAME.out, the
# export in $tmp/NAME/, stackmapd's status in $rc.
run() {
  local name=$1 wpid spid
  shift
  "$WORKLOAD" $A $B > "$tmp/$name.out" 2>&1 &
  wpid=$!
  pids+=("$wpid")
  for _ in $(seq 200); do
    [ "$(cut -d' ' -f1 "/proc/$wpid/syscall" 2> /dev/null)" = 128 ] && break  # rt_sigtimedwait
    sleep 0.05
  done
  local args=()
  for a in "$@"; do args+=("${a//@PID@/$wpid}"); done
  "$BIN" "${args[@]}" --output "$tmp/$name" > /dev/null 2> "$tmp/$name.err" &
  spid=$!
  pids+=("$spid")
  wait_tracing "$tmp/$name.err" "$name"
  kill -USR1 "$wpid"
  for _ in $(seq 200); do grep -q ticks "$tmp/$name.out" && break; sleep 0.05; done
  # The session ends while the workload lives: its maps name its frames.
  kill -INT "$spid"
  wait "$spid"
  rc=$?
  kill -USR1 "$wpid"
  wait "$wpid"
}

# summary DIR: "EVENTS", "N whole" (events whose user stack reached its
# end), then one line per (user stack's first three function
# names, source): "COUNT name<-name<-name SOURCE", from stack_map.json.
summary() {
  "$PY" - "$1/stack_map.json" << 'PYEOF'
import collections, json, sys
d = json.load(open(sys.argv[1]))
us = {s["user_stack_id"]: s for s in d.get("user_stacks", {}).get("stacks", [])}
lines = collections.Counter()
total = whole = 0
for s in d["stacks"]:
    for e in s.get("by", []):
        u = us.get(e.get("user_stack_id"), {"frames": []})
        names = [f["symbols"][-1].split("+")[0] if f["symbols"] else "?" for f in u["frames"]]
        lines["<-".join(names[:3]) + " " + str(e.get("source", "-"))] += e["count"]
        total += e["count"]
        whole += e["count"] * (bool(u["frames"]) and not u.get("truncated", True))
print(total)
print(whole, "whole")
for k, n in sorted(lines.items()):
    print(n, k)
PYEOF
}

count_prefix() {  # count_prefix SUMMARY_FILE "name<-name" SOURCE: events whose stack starts so
  awk -v p="$2" -v s="$3" '{ c = $1; if (index($2, p) == 1 && $3 == s) t += c } END { print t + 0 }' "$1"
}

count_of() {  # count_of SUMMARY_FILE "name<-name<-name SOURCE": its count, 0 if none
  awk -v k="$2" '{c = $1; $1 = ""; sub(/^ /, ""); if ($0 == k) { print c; f = 1 } } END { if (!f) print 0 }' "$1"
}

prog=$(readlink -f "$WORKLOAD")
# uprobe_target's second instruction, by objdump's reading of its code.
off=$(objdump -d --no-show-raw-insn "$WORKLOAD" | awk '/<uprobe_target>:/ {f = 1; next} f && NF {print $1}' |
  head -2 | tr -d : | { read -r x; read -r y; echo $((0x$y - 0x$x)); })
osrc=$(printf '%s:uprobe_target+0x%x' "$prog" "$off")

# 1. entry of uprobe_target, the caller from the unwind tables.
run entry -u "$prog:uprobe_target" --pid @PID@ --by source
check "-u $prog:uprobe_target runs (rc $rc: $(tail -1 "$tmp/entry.err"))" '[ $rc -eq 0 ]'
summary "$tmp/entry" > "$tmp/entry.sum"
echo "  $(tr '\n' ';' < "$tmp/entry.sum")"
src="$prog:uprobe_target"
na=$(count_of "$tmp/entry.sum" "uprobe_target<-uprobe_call_a<-main $src")
nb=$(count_of "$tmp/entry.sum" "uprobe_target<-uprobe_call_b<-main $src")
check "uprobe_target counts exactly $A + $B events ($(head -1 "$tmp/entry.sum"))" \
  '[ "$(head -1 "$tmp/entry.sum")" -eq $((A + B)) ]'
check "stat: hits = $((A + B))" '[ "$(counted_of "$tmp/entry/stack_map_stat")" -eq $((A + B)) ]'
check "its user stacks: uprobe_target <- uprobe_call_a <- main $A times ($na), <- uprobe_call_b $B times ($nb)" \
  '[ "$na" -eq $A ] && [ "$nb" -eq $B ]'
check "every one of them whole, to _start ($(count_of "$tmp/entry.sum" whole))" \
  '[ "$(count_of "$tmp/entry.sum" whole)" -eq $((A + B)) ]'
check "the log names the probe as a source" 'grep -q "tracing $src" "$tmp/entry.err"'

# 2. frame pointers: at the entry the caller from the return address; past
# the first instruction (a push) frame pointers alone skip it.
run fp -u "$prog:uprobe_target" --pid @PID@ --by source --user-unwind fp
summary "$tmp/fp" > "$tmp/fp.sum"
echo "  $(tr '\n' ';' < "$tmp/fp.sum")"
fa=$(count_prefix "$tmp/fp.sum" "uprobe_target<-uprobe_call_a" "$src")
fb=$(count_prefix "$tmp/fp.sum" "uprobe_target<-uprobe_call_b" "$src")
check "fp at the entry: $((A + B)) ($(head -1 "$tmp/fp.sum")), the caller from the return address ($fa, $fb)" \
  '[ "$(head -1 "$tmp/fp.sum")" -eq $((A + B)) ] && [ "$fa" -eq $A ] && [ "$fb" -eq $B ]'
run fp_inside -u "$prog:uprobe_target+$off" --pid @PID@ --by source --user-unwind fp
summary "$tmp/fp_inside" > "$tmp/fp_inside.sum"
echo "  $(tr '\n' ';' < "$tmp/fp_inside.sum")"
fa=$(count_prefix "$tmp/fp_inside.sum" "uprobe_target<-uprobe_call_" "$osrc")
check "fp inside the function: $((A + B)) ($(head -1 "$tmp/fp_inside.sum")), the caller skipped ($fa)" \
  '[ "$(head -1 "$tmp/fp_inside.sum")" -eq $((A + B)) ] && [ "$fa" -eq 0 ]'

# 3. OFF bytes into the function: past its first instruction (a push, so the
# CFA is rsp+16 there).
run offset -u "$prog:uprobe_target+$off" --pid @PID@ --by source
summary "$tmp/offset" > "$tmp/offset.sum"
echo "  $(tr '\n' ';' < "$tmp/offset.sum")"
check "uprobe_target+$off: $((A + B)) events, as $osrc, callers whole" \
  '[ "$(head -1 "$tmp/offset.sum")" -eq $((A + B)) ] && [ "$(count_of "$tmp/offset.sum" "uprobe_target<-uprobe_call_a<-main $osrc")" -eq $A ] && [ "$(count_of "$tmp/offset.sum" "uprobe_target<-uprobe_call_b<-main $osrc")" -eq $B ]'

# 4. without --pid: attached for every process, the same exact count.
run nopid -u "$prog:uprobe_target"
summary "$tmp/nopid" > "$tmp/nopid.sum"
check "without --pid: exactly $((A + B)) ($(head -1 "$tmp/nopid.sum"))" '[ "$(head -1 "$tmp/nopid.sum")" -eq $((A + B)) ]'

# 5. a glob: one source per function; a site named twice is probed once.
run glob -u "$prog:uprobe_call_?" -u "$prog:uprobe_call_a" --pid @PID@ --by source
summary "$tmp/glob" > "$tmp/glob.sum"
echo "  $(tr '\n' ';' < "$tmp/glob.sum")"
check "glob uprobe_call_? and uprobe_call_a again: 2 events, one each, as two sources" \
  '[ "$(head -1 "$tmp/glob.sum")" -eq 2 ] && [ "$(count_of "$tmp/glob.sum" "uprobe_call_a<-main<-__libc_start_call_main $prog:uprobe_call_a")" -eq 1 ] && [ "$(count_of "$tmp/glob.sum" "uprobe_call_b<-main<-__libc_start_call_main $prog:uprobe_call_b")" -eq 1 ]'

# 6. a library by soname, found in the process's maps.
run lib -u libc:getppid --pid @PID@ --by source
summary "$tmp/lib" > "$tmp/lib.sum"
echo "  $(tr '\n' ';' < "$tmp/lib.sum")"
libc_src=$(grep -o '/[^ ]*libc.so.6:getppid' "$tmp/lib.sum" | head -1)
check "libc:getppid (as $libc_src): exactly $((A + B)), called from uprobe_target" \
  '[ -n "$libc_src" ] && [ "$(head -1 "$tmp/lib.sum")" -eq $((A + B)) ] && [ "$(count_of "$tmp/lib.sum" "getppid<-uprobe_target<-uprobe_call_a $libc_src")" -eq $A ]'

# 7. USDT with a semaphore.
run usdt -u "$prog:usdt:stackmapd_test:tick" --pid @PID@ --by source
summary "$tmp/usdt" > "$tmp/usdt.sum"
echo "  $(tr '\n' ';' < "$tmp/usdt.sum")"
ticks=$(awk '/^ticks/ {print $2}' "$tmp/usdt.out")
check "USDT: the workload saw its semaphore set $((A + B)) times ($ticks)" '[ "$ticks" = $((A + B)) ]'
check "USDT stackmapd_test:tick counts exactly $((A + B)) ($(head -1 "$tmp/usdt.sum")), from main" \
  '[ "$(head -1 "$tmp/usdt.sum")" -eq $((A + B)) ] && grep -q "^$((A + B)) main<-.* $prog:usdt:stackmapd_test:tick$" "$tmp/usdt.sum"'
ticks=$(awk '/^ticks/ {print $2}' "$tmp/lib.out")
check "without a probe on it the semaphore stays 0 (ticks $ticks)" '[ "$ticks" = 0 ]'

# 8. --hist arg0: uprobe_target's argument, i from uprobe_call_a (0..A-1) and
# 2i+1 from uprobe_call_b; the tick's, i for 0..A+B-1 (its note: -8@%rax).
# hist_of DIR I: "FUNCTION BUCKET COUNT" lines, by the user stack's
# function I (0: where the probe is); expected_hist WHAT: the same, from the
# workload's arithmetic.
hist_of() {
  "$PY" - "$1/stack_map.json" "$2" << 'PYEOF'
import collections, json, sys
d = json.load(open(sys.argv[1]))
us = {s["user_stack_id"]: s for s in d.get("user_stacks", {}).get("stacks", [])}
h = collections.Counter()
for s in d["stacks"]:
    for e in s.get("by", []):
        f = us.get(e.get("user_stack_id"), {"frames": []})["frames"]
        names = [x["symbols"][-1].split("+")[0] if x["symbols"] else "?" for x in f]
        i = int(sys.argv[2])
        h[(names[i] if len(names) > i else "?", e["bucket"])] += e["count"]
for (c, b), n in sorted(h.items()):
    print(c, b, n)
PYEOF
}
expected_hist() {
  "$PY" - "$1" $A $B << 'PYEOF'
import collections, sys
what, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lower = lambda v: 0 if v == 0 else 1 << (v.bit_length() - 1)
h = collections.Counter()
if what == "target":
    for i in range(a): h[("uprobe_call_a", lower(i))] += 1
    for i in range(b): h[("uprobe_call_b", lower(2 * i + 1))] += 1
else:
    for i in range(a + b): h[("main", lower(i))] += 1
for (c, bk), n in sorted(h.items()):
    print(c, bk, n)
PYEOF
}
run hist -u "$prog:uprobe_target" --pid @PID@ --hist arg0
check "-u uprobe_target --hist arg0 runs (rc $rc: $(tail -1 "$tmp/hist.err"))" '[ $rc -eq 0 ]'
hist_of "$tmp/hist" 1 > "$tmp/hist.got"
expected_hist target > "$tmp/hist.want"
check "--hist arg0: each caller's buckets are its arguments' ($(wc -l < "$tmp/hist.want") buckets; first difference: $(diff "$tmp/hist.want" "$tmp/hist.got" | grep -m1 '^[<>]'))" \
  'cmp -s "$tmp/hist.want" "$tmp/hist.got"'
run usdt_hist -u "$prog:usdt:stackmapd_test:tick" --pid @PID@ --hist arg0
check "USDT tick --hist arg0 runs (rc $rc: $(tail -1 "$tmp/usdt_hist.err"))" '[ $rc -eq 0 ]'
hist_of "$tmp/usdt_hist" 0 > "$tmp/usdt_hist.got"
expected_hist tick > "$tmp/usdt_hist.want"
check "USDT --hist arg0 (-8@%rax): the buckets of 0..$((A + B - 1)) (first difference: $(diff "$tmp/usdt_hist.want" "$tmp/usdt_hist.got" | grep -m1 '^[<>]'))" \
  'cmp -s "$tmp/usdt_hist.want" "$tmp/usdt_hist.got"'

# 9. bad input.
expect_error "no such binary" "$BIN" -u /nonexistent/prog:main --duration 1
# A FIFO or a device is said for what it is (opening it would block or read forever).
mkfifo "$tmp/fifo"
expect_error "is a FIFO, not an executable or shared library" "$BIN" -u "$tmp/fifo:main" --duration 1
expect_error "is a character device, not an executable" "$BIN" -u /dev/zero:main --duration 1
expect_error "has no function no_such_fn in its symbol tables: see nm -D" \
  "$BIN" -u "$WORKLOAD:no_such_fn" --duration 1
expect_error "has no USDT probe stackmapd_test:nope; its probes (PROVIDER:NAME): stackmapd_test:tick" \
  "$BIN" -u "$WORKLOAD:usdt:stackmapd_test:nope" --duration 1
expect_error "it has no USDT probes at all" "$BIN" -u "$(command -v env):usdt:a:b" --duration 1
expect_error "use BINARY:SYMBOL[+OFFSET] or BINARY:usdt:PROVIDER:NAME" "$BIN" -u "$WORKLOAD" --duration 1
expect_error "a USDT probe is PROVIDER:NAME" "$BIN" -u "$WORKLOAD:usdt:tick" --duration 1
libc=$(ldd "$WORKLOAD" | awk '/libc\.so/ {print $3}')
expect_error "is an indirect function (IFUNC)" "$BIN" -u "$libc:strlen" --duration 1
expect_error "bytes long in" "$BIN" -u "$WORKLOAD:uprobe_target+0x100000" --duration 1
expect_error "the offset is a number of bytes" "$BIN" -u "$WORKLOAD:uprobe_target+x" --duration 1
expect_error "in PATH or in the library directories (/etc/ld.so.conf.d): give its path" \
  "$BIN" -u stackmapd_no_such_program:main --duration 1
for weigh in "--sum bytes_alloc" "--hist bytes_alloc"; do
  expect_error "${weigh}: -u events are weighed by an argument, arg0 to arg5 (as bpftrace names them)" \
    "$BIN" -u "$WORKLOAD:uprobe_target" $weigh --duration 1
done
expect_error "-u events are weighed by an argument (arg0..arg5), tracepoints by a field" \
  "$BIN" -u "$WORKLOAD:uprobe_target" -e kmem:kmalloc --sum arg0 --duration 1
expect_error "is inside its function: arg0 is read at a function's entry" \
  "$BIN" -u "$osrc" --hist arg0 --duration 1
expect_error "has 1 argument(s) in its USDT note: there is no arg1" \
  "$BIN" -u "$prog:usdt:stackmapd_test:tick" --hist arg1 --duration 1

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

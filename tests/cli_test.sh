#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The stackmapd command end to end, as root on this kernel: a real session's
# exports against DESIGN.md's contracts, the RFC's stackmap_dump.py on our FSMB
# file, and one clear line plus a non-zero exit for every bad input.
set -u
BIN=$1
SRC=$2
PY=${3:-python3}
RFC_DUMP=$SRC/tests/rfc/stackmap_dump.py

tmp=$(mktemp -d)
chmod 755 "$tmp"
load_pid=
cleanup() { [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

start_load() {
  ( while :; do for _ in $(seq 200); do cat /proc/self/stat > /dev/null; done; done ) &
  load_pid=$!
}
stop_load() { kill "$load_pid" 2>/dev/null; wait "$load_pid" 2>/dev/null; load_pid=; }

# --- a real session ---------------------------------------------------------
out=$tmp/out
start_load
"$BIN" -e kmem:kmem_cache_alloc -e sched:sched_switch --duration 3 --output "$out" 2> "$tmp/run.err"
rc=$?
stop_load
check "session exits 0 ($(tail -1 "$tmp/run.err"))" '[ $rc -eq 0 ]'
for f in stack_map stack_map_stat stack_map_bin stack_map.json stack_map.kernel; do
  check "$f written" '[ -s "$out/$f" ]'
done
check "no temporary files left" '[ "$(ls -A "$out" | wc -l)" -eq 5 ]'
check "stack_map.kernel is 0640 (it holds where _text is)" '[ "$(stat -c %a "$out/stack_map.kernel")" = 640 ]'
check "stack_map_bin is 0640 (raw addresses)" '[ "$(stat -c %a "$out/stack_map_bin")" = 640 ]'
check "stack_map.json is 0640 (raw addresses)" '[ "$(stat -c %a "$out/stack_map.json")" = 640 ]'

entries=$(grep '^entries:' "$out/stack_map_stat" | awk '{print $2}')
hits=$(grep '^hits:' "$out/stack_map_stat" | awk '{print $2}')
check "stat: entries is a positive number ($entries)" '[ "${entries:-0}" -gt 0 ]'
check "stat: hits > entries ($hits)" '[ "${hits:-0}" -gt "${entries:-0}" ]'
check "stat: the RFC's five lines first, in order" \
  '[ "$(head -5 "$out/stack_map_stat" | cut -d: -f1 | tr "\n" " ")" = "entries table_size hits drops hit_rate " ]'
drops=$(stat_of drops "$out/stack_map_stat")
check "stat: hit_rate is the RFC's hits * 100 / (hits + drops) ($(stat_of hit_rate "$out/stack_map_stat"))" \
  '[ "$(stat_of hit_rate "$out/stack_map_stat")" = "$((hits * 100 / (hits + drops)))%" ]'
check "stat: our reuse_rate on a line of its own after the RFC's five" \
  '[ "$(sed -n 6p "$out/stack_map_stat" | cut -d: -f1)" = reuse_rate ]'

# FSMB v2 header, byte-exact.
header=$("$PY" -c 'import struct,sys; print(*struct.unpack_from("<IIII", open(sys.argv[1],"rb").read()))' "$out/stack_map_bin")
check "FSMB header: magic, version 2, nr_stacks = entries, reserved 0 ($header)" \
  '[ "$header" = "$((0x464D5342)) 2 $entries 0" ]'

# The RFC's own reader, unchanged, and our decoder print the same text.
"$PY" "$RFC_DUMP" "$out/stack_map_bin" > "$tmp/rfc.txt" 2> "$tmp/rfc.err"
rc=$?
check "stackmap_dump.py parses our file" '[ $rc -eq 0 ]'
check "stackmap_dump.py counts $entries stacks" 'grep -qx "Total: $entries unique stacks" "$tmp/rfc.err"'
# Alone, without the stack_map.kernel that says which boot it is from: raw frames.
mkdir "$tmp/alone" && cp "$out/stack_map_bin" "$tmp/alone/"
"$BIN" decode "$tmp/alone/stack_map_bin" > "$tmp/ours.txt" 2> "$tmp/decode.err"
check "decode = stackmap_dump.py, line for line" 'cmp -s "$tmp/rfc.txt" "$tmp/ours.txt"'
check "decode says which revision it read" 'grep -q "FSMB v2" "$tmp/decode.err"'
check "decode says it has no symbols and what to pass" 'grep -q "no symbols: .*pass --kallsyms" "$tmp/decode.err"'
# Beside its stack_map.kernel of this boot: the running kernel's symbols.
"$BIN" decode "$out/stack_map_bin" > "$tmp/same_boot.txt" 2> "$tmp/same_boot.err"
check "decode on the same boot = the stack_map export" 'cmp -s "$tmp/same_boot.txt" "$out/stack_map"'
check "decode says it used the running kernel" 'grep -q "symbols: the running kernel (same boot as" "$tmp/same_boot.err"'
"$BIN" decode "$out/stack_map_bin" --kallsyms /proc/kallsyms > "$tmp/sym.txt" 2>/dev/null
check "decode --kallsyms = the stack_map export" 'cmp -s "$tmp/sym.txt" "$out/stack_map"'

# JSON export: the fields the issue names, consistent with the binary export.
"$PY" - "$out/stack_map.json" "$out/stack_map_bin" "$hits" <<'PYEOF'
import json, struct, sys, re
doc = json.load(open(sys.argv[1]))
data = open(sys.argv[2], "rb").read()
for key in ("bits", "hash_seed", "table_size", "stats", "stacks"):
    assert key in doc, key
assert doc["table_size"] == 1 << (doc["bits"] + 1)
assert doc["stats"]["hits"] == int(sys.argv[3])
assert sum(s["ref_count"] for s in doc["stacks"]) == doc["stats"]["hits"]
_, _, n, _ = struct.unpack_from("<IIII", data)
off, ids = 16, []
for _ in range(n):
    sid, nr, ref, _ = struct.unpack_from("<IIII", data, off)
    ids.append((sid, ref, nr))
    off += 16 + 8 * nr
assert ids == [(s["stack_id"], min(s["ref_count"], 2**32 - 1), s["depth"]) for s in doc["stacks"]]
sym = re.compile(r"^([\w.$]+\+0x[0-9a-f]+/0x[0-9a-f]+( \[\w+\])?|0x[0-9a-f]+)$")
resolved = 0
for s in doc["stacks"]:
    assert len(s["ips"]) == len(s["symbols"]) == s["depth"]
    for ip, name in zip(s["ips"], s["symbols"]):
        assert ip.startswith("0xffff"), ip
        assert sym.match(name), name
        resolved += not name.startswith("0x")
assert resolved > 0
assert any(n.startswith("kmem_cache_alloc") for s in doc["stacks"] for n in s["symbols"])
PYEOF
rc=$?
check "stack_map.json matches the contract and the binary export" '[ $rc -eq 0 ]'

# --top: most frequent first, symbolized.
start_load
"$BIN" --top 5 --duration 2 > "$tmp/top.txt" 2> "$tmp/top.err"
rc=$?
stop_load
check "--top exits 0" '[ $rc -eq 0 ]'
check "--top header" 'grep -qE "^[0-9]+ events, [0-9]+ unique stacks; top 5:\$" "$tmp/top.txt"'
check "--top shows five ranked stacks" \
  '[ "$(grep -cE "^#[1-5] stack_id [0-9]+: [0-9]+ events \([0-9.]+%\), depth [0-9]+\$" "$tmp/top.txt")" -eq 5 ]'
check "--top symbolizes like %pS" 'grep -qE "^    kmem_cache_alloc[a-z_]*\+0x[0-9a-f]+/0x[0-9a-f]+\$" "$tmp/top.txt"'
counts=$(grep -E '^#' "$tmp/top.txt" | sed -E 's/.*: ([0-9]+) events.*/\1/' | tr '\n' ' ')
check "--top is sorted ($counts)" '[ "$(echo $counts | tr " " "\n" | sort -rn | tr "\n" " ")" = "$counts" ]'

# Without --duration: runs until SIGINT, then writes the exports (one before
# it traces records nothing: tests/sigint_test.sh).
"$BIN" --output "$tmp/sigint" 2> "$tmp/sigint.err" &
pid=$!
wait_tracing "$tmp/sigint.err" "until SIGINT"
sleep 1
kill -INT $pid
wait $pid
rc=$?
check "SIGINT ends a session with exit 0" '[ $rc -eq 0 ]'
check "SIGINT still writes the exports" '[ -s "$tmp/sigint/stack_map_bin" ]'

wait_attached() {  # wait_attached STDERR_FILE
  for _ in $(seq 100); do grep -q "tracing " "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# A stopped consumer: the ring buffer fills, the loss is counted, and the
# session recovers once the daemon runs again.
"$BIN" --ringbuf-kb 64 --duration 5 --output "$tmp/stopped" 2> "$tmp/stopped.err" &
pid=$!
wait_attached "$tmp/stopped.err"
kill -STOP $pid
start_load
sleep 2
kill -CONT $pid
sleep 1
stop_load
wait $pid
rc=$?
check "a stopped consumer's session still exits 0" '[ $rc -eq 0 ]'
st=$tmp/stopped/stack_map_stat
check "lost records are counted ($(stat_of drop_ringbuf_full "$st"))" '[ "$(stat_of drop_ringbuf_full "$st")" -gt 0 ]'
check "the daemon recovered: more hits ($(stat_of hits "$st")) than the stalled ring holds (4096)" \
  '[ "$(stat_of hits "$st")" -gt 4096 ]'
check "events = hits + drops after an overflow" \
  '[ "$(stat_of events_total "$st")" -eq $(( $(stat_of hits "$st") + $(stat_of drops "$st") )) ]'
check "the overflow is reported with its fix" 'grep -q "raise --ringbuf-kb" "$tmp/stopped.err"'

# SIGUSR1 resets a running session; --verify checks samples against the table.
"$BIN" --verify 5 --duration 4 --output "$tmp/reset" 2> "$tmp/reset.err" &
pid=$!
wait_attached "$tmp/reset.err"
start_load
sleep 1.5
kill -USR1 $pid
sleep 1.5
stop_load
wait $pid
rc=$?
check "a reset session exits 0" '[ $rc -eq 0 ]'
st=$tmp/reset/stack_map_stat
check "SIGUSR1 reset the table once" '[ "$(stat_of resets "$st")" -eq 1 ]'
check "the reset is logged" 'grep -q "reset: epoch 0 ended with" "$tmp/reset.err"'
check "no stale records after a reset" '[ "$(stat_of stale_records "$st")" -eq 0 ]'
check "--verify checked samples ($(stat_of verify_ok "$st"))" '[ "$(stat_of verify_ok "$st")" -gt 100 ]'
check "--verify found no mismatch" '[ "$(stat_of verify_mismatch "$st")" -eq 0 ]'
check "hits since the reset are fewer than all events" \
  '[ "$(stat_of hits "$st")" -lt "$(stat_of events_total "$st")" ]'

# --profile: sampling every CPU while a syscall-heavy loop runs shows its kernel path.
LOOP='
import os, sys, time
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(1000):
        fd = os.open("/proc/self/stat", os.O_RDONLY); os.read(fd, 256); os.close(fd)'
syscall_loop() { "$PY" -c "$LOOP" "$1"; }  # open/read/close for $1 s, as fast as one CPU allows
syscall_loop 4 &
loop_pid=$!
"$BIN" --profile 99 --duration 3 --output "$tmp/profile" 2> "$tmp/profile.err"
rc=$?
check "--profile 99 exits 0" '[ $rc -eq 0 ]'
wait $loop_pid
check "--profile recorded samples ($(grep '^hits:' "$tmp/profile/stack_map_stat"))" \
  '[ "$(grep "^hits:" "$tmp/profile/stack_map_stat" | awk "{print \$2}")" -gt 10 ]'
check "--profile shows the loop's syscalls" \
  'grep -qE "\"(__x64_sys_(openat|read|close)|ksys_read|do_sys_openat2)\+" "$tmp/profile/stack_map.json"'
check "samples taken in user space are counted, not lost" \
  'grep -qE "^drop_no_kernel_stack: [0-9]+\$" "$tmp/profile/stack_map_stat"'

# --trace: one ftrace-style line per event; every <stack_id N> resolves.
syscall_loop 4 &
loop_pid=$!
"$BIN" -e kmem:kmem_cache_alloc -e sched:sched_switch --trace "$tmp/trace.txt" --duration 2 \
  --output "$tmp/traced" 2> "$tmp/trace.err"
rc=$?
check "--trace exits 0" '[ $rc -eq 0 ]'
wait $loop_pid
# Each event traced is a hit, or a drop sent whole (a slot another CPU was
# writing) whose line made it into the ring after its frames.
hits=$(stat_of hits "$tmp/traced/stack_map_stat")
counted=$(counted_of "$tmp/traced/stack_map_stat")
traced=$(sed -n 's/.*trace: \([0-9]*\) events written.*/\1/p' "$tmp/trace.err")
lines=$(wc -l < "$tmp/trace.txt")
check "the trace has two lines per event it says it wrote ($traced, $lines lines)" \
  '[ "${traced:-0}" -gt 0 ] && [ "$lines" -eq $((2 * traced)) ]'
check "and those events are the hits, and at most the drops sent whole besides ($hits <= $traced <= $counted)" \
  '[ "$hits" -le "${traced:-0}" ] && [ "${traced:-0}" -le "$counted" ]'
check "every line is in ftrace's layout" \
  '[ "$(grep -cvE "^ *.+-[0-9]+ +\[[0-9]{3}\] \.{5} +[0-9]+\.[0-9]{6}: (kmem_cache_alloc: call_site=.* ptr=.* bytes_req=[0-9]+ .*|sched_switch: prev_comm=.* ==> next_comm=.*|<stack_id [0-9]+>)\$" "$tmp/trace.txt")" -eq 0 ]'
check "each event line is followed by its <stack_id N> line" \
  '[ "$(awk "NR % 2 == 1 && /<stack_id/ || NR % 2 == 0 && !/<stack_id/" "$tmp/trace.txt" | wc -l)" -eq 0 ]'
check "both sources appear" 'grep -q ": sched_switch: prev_comm=" "$tmp/trace.txt"'
grep -oE '<stack_id [0-9]+>' "$tmp/trace.txt" | grep -oE '[0-9]+' | sort -u > "$tmp/trace.ids"
grep -oE '^stack_id [0-9]+' "$tmp/traced/stack_map" | awk '{print $2}' | sort -u > "$tmp/map.ids"
check "every <stack_id N> in the trace resolves in stack_map" '[ -z "$(comm -23 "$tmp/trace.ids" "$tmp/map.ids")" ]'

# --pid and --cpu keep only that process's, that CPU's events.
"$PY" -c "$LOOP" 3 &
loop_pid=$!
"$BIN" --pid $loop_pid --trace "$tmp/pid.txt" --duration 2 2> /dev/null > /dev/null
wait $loop_pid
check "--pid: events recorded" '[ -s "$tmp/pid.txt" ]'
check "--pid: only that process" '[ "$(grep -cvE -- "-$loop_pid +\[" "$tmp/pid.txt")" -eq 0 ]'

# --pid with several processes, in each of its forms, for every kind of source:
# only those processes' events, and events of each. A third process runs beside.
PIDLOOP='
import os, sys, time
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(200):
        fd = os.open("/proc/self/stat", os.O_RDONLY); os.read(fd, 256); os.close(fd)
    time.sleep(0.001)'
by_pids() {  # by_pids stack_map.json: the pids its "by" entries name, sorted, one line
  "$PY" -c 'import json, sys
print(*sorted({k["pid"] for s in json.load(open(sys.argv[1]))["stacks"] for k in s.get("by", []) if "pid" in k}))' "$1"
}
pid_loops() {  # three loops: $a and $b to trace, $other beside them
  "$PY" -c "$PIDLOOP" 4 & a=$!
  "$PY" -c "$PIDLOOP" 4 & b=$!
  "$PY" -c "$PIDLOOP" 4 & other=$!
}
traced_pids() { by_pids "$tmp/$1/stack_map.json"; }
want_pids() { echo $(printf "%s\n" $a $b | sort -n); }
pid_loops
"$BIN" -e kmem:kmem_cache_alloc --pid "$a $b" --duration 2 --by pid --output "$tmp/pids_tp" 2> /dev/null
wait $a $b $other
check "--pid \"A B\" (\"\$(pidof X)\"), -e: events of A and B only ($(traced_pids pids_tp); want $(want_pids))" \
  '[ "$(traced_pids pids_tp)" = "$(want_pids)" ]'
pid_loops
"$BIN" --offcpu --pid $a $b --duration 2 --by pid --output "$tmp/pids_offcpu" 2> /dev/null
wait $a $b $other
check "--pid A B (\$(pidof X)), --offcpu: blocks of A and B only ($(traced_pids pids_offcpu); want $(want_pids))" \
  '[ "$(traced_pids pids_offcpu)" = "$(want_pids)" ]'
pid_loops
"$BIN" --profile 499 --pid $a,$b --pid $b --duration 2 --by pid --output "$tmp/pids_profile" 2> /dev/null
wait $a $b $other
check "--pid A,B --pid B, --profile: samples of A and B only ($(traced_pids pids_profile); want $(want_pids))" \
  '[ "$(traced_pids pids_profile)" = "$(want_pids)" ]'
"$PY" -c 'import threading, time; threading.Thread(target=time.sleep, args=(30,)).start(); time.sleep(30)' &
threaded=$!
# Its second thread, once the interpreter has started it (seconds on a loaded machine).
thread=
for _ in $(seq 100); do
  thread=$(ls /proc/$threaded/task 2> /dev/null | grep -vx $threaded | head -1)
  [ -n "$thread" ] && break
  sleep 0.1
done
check "the threaded helper has a second thread ($thread)" '[ -n "$thread" ]'
expect_error "--pid 4194303: no such process: give the pid of a running process" "$BIN" --pid "$$ 4194303" --duration 1
expect_error "is a thread of process $threaded: give $threaded" "$BIN" --pid "$thread" --duration 1
kill $threaded
expect_error "--pid 'x12' is not a process id: give numbers" "$BIN" --pid 1,x12 --duration 1
expect_error "--pid '' names no process" "$BIN" --pid "" --duration 1
expect_error "--pid: 65 processes, at most 64 at once" "$BIN" --pid "$(seq 1 65 | paste -sd,)" --duration 1
expect_error "--pid needs the BPF backend" "$BIN" --backend tracefs --pid $$ --duration 1
expect_error "--comm needs the BPF backend" "$BIN" --backend tracefs --comm bash --duration 1
expect_error "--pid and --user-stacks need the BPF backend: drop them for --backend tracefs" \
  "$BIN" --backend tracefs --user-stacks --pid $$ --duration 1
"$BIN" --cpu 1 -e sched:sched_switch --trace "$tmp/cpu.txt" --duration 1 2> /dev/null > /dev/null
check "--cpu 1: events recorded" '[ -s "$tmp/cpu.txt" ]'
check "--cpu 1: only CPU 1" '[ "$(grep -cv " \[001\] " "$tmp/cpu.txt")" -eq 0 ]'

# Flame graphs: --folded and --svg from a session, and from its exports.
"$PY" -c "$LOOP" 3 &
loop_pid=$!
"$BIN" --duration 2 --output "$tmp/flame" --folded "$tmp/flame.folded" --svg "$tmp/flame.svg" 2> "$tmp/flame.err"
check "a session writes --folded and --svg" '[ -s "$tmp/flame.folded" ] && [ -s "$tmp/flame.svg" ]'
check "... and says where, as for the other outputs" \
  'grep -qx "stackmapd: wrote the folded stacks to $tmp/flame.folded" "$tmp/flame.err" &&
   grep -qx "stackmapd: wrote the flame graph to $tmp/flame.svg (open it in a browser)" "$tmp/flame.err"'
wait $loop_pid
hits=$(grep '^hits:' "$tmp/flame/stack_map_stat" | awk '{print $2}')
check "folded lines are 'root;...;leaf count'" '[ "$(grep -cvE "^[^ ;]+(;[^ ;]+)* [0-9]+\$" "$tmp/flame.folded")" -eq 0 ]'
check "folded counts add up to the hits ($hits)" '[ "$(awk "{s += \$NF} END {print s}" "$tmp/flame.folded")" -eq "$hits" ]'
check "folded stacks start at the root" 'grep -qE "^entry_SYSCALL_64[a-z_]*;" "$tmp/flame.folded"'
check "the SVG is XML" '"$PY" -c "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])" "$tmp/flame.svg"'
"$BIN" decode "$tmp/flame/stack_map.json" --folded - > "$tmp/json.folded" 2> /dev/null
check "decode of stack_map.json gives the same folded stacks" 'cmp -s "$tmp/flame.folded" "$tmp/json.folded"'
"$BIN" decode "$tmp/flame/stack_map_bin" --kallsyms /proc/kallsyms --folded - > "$tmp/bin.folded" 2> /dev/null
check "decode of stack_map_bin gives the same folded stacks" 'cmp -s "$tmp/flame.folded" "$tmp/bin.folded"'

# One rule for stdout: the stack_map text goes there only when no other output is asked for.
start_load  # an idle machine may make no allocation in a second
"$BIN" --duration 1 > "$tmp/plain.out" 2> /dev/null
stop_load
check "no output asked for: the stack_map text on stdout" 'grep -q "^stack_id " "$tmp/plain.out"'
for opt in "--top 3" "--folded $tmp/r.folded" "--svg $tmp/r.svg" "--pprof $tmp/r.pb.gz" "--otlp $tmp/r.pb" \
  "--perfetto $tmp/r.pftrace" "--trace $tmp/r.trace" "--output $tmp/r.out" "--trace -" "--folded -"; do
  start_load
  "$BIN" --duration 1 $opt > "$tmp/rule.out" 2> /dev/null
  rc=$?
  stop_load
  check "${opt/$tmp\//}: exits 0, no stack_map text on stdout ($(grep -c "^stack_id " "$tmp/rule.out") lines)" \
    '[ $rc -eq 0 ] && ! grep -q "^stack_id " "$tmp/rule.out"'
done
check "--folded -: stdout is the folded stacks alone ($(wc -l < "$tmp/rule.out") lines; first other: $(grep -m1 -vE "^[^ ;]+(;[^ ;]+)* [0-9]+\$" "$tmp/rule.out" | head -c 300))" \
  '[ -s "$tmp/rule.out" ] && [ "$(grep -cvE "^[^ ;]+(;[^ ;]+)* [0-9]+\$" "$tmp/rule.out")" -eq 0 ]'

# Offline symbolization: what the export records lets a kallsyms from another
# boot (another KASLR slide) or a vmlinux resolve the raw frames.
text_addr=$(awk '$3 == "_text" {print $1; exit}' /proc/kallsyms | sed 's/^0*//')
check "stack_map.kernel records the release, build id and _text (0x$text_addr)" \
  'grep -q "^release $(uname -r)\$" "$out/stack_map.kernel" && grep -qE "^build_id [0-9a-f]{40}\$" "$out/stack_map.kernel" &&
   grep -qx "text 0x$text_addr" "$out/stack_map.kernel"'
check "stack_map.json carries the same" 'grep -q "\"build_id\": \"[0-9a-f]\{40\}\"" "$out/stack_map.json"'
"$PY" - /proc/kallsyms "$tmp/other_boot.kallsyms" <<'PYEOF'
import sys
# The same kernel on a boot with another KASLR slide: core symbols move 1 GiB.
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as dst:
    for line in src:
        addr, rest = line.split(" ", 1)
        if "[" not in rest:
            addr = "%016x" % ((int(addr, 16) - (1 << 30)) % (1 << 64))
        dst.write(addr + " " + rest)
PYEOF
"$BIN" decode "$out/stack_map_bin" --kallsyms "$tmp/other_boot.kallsyms" > "$tmp/slid.txt" 2> "$tmp/slid.err"
check "a kallsyms from another boot resolves the frames after the recorded slide" 'cmp -s "$tmp/slid.txt" "$out/stack_map"'
check "decode says it applied the slide" 'grep -q "applying that KASLR slide" "$tmp/slid.err"'
cat > "$tmp/k.c" <<'CEOF'
void _text(void) {}
void alpha(void) { __asm__ volatile("nop; nop; nop; nop; nop; nop; nop; nop"); }
void beta(void) { __asm__ volatile("nop; nop; nop; nop; nop; nop; nop; nop"); }
void omega(void) {}
CEOF
gcc -O0 -nostdlib -static -no-pie -fno-pic -mcmodel=kernel -Wl,-Ttext=0xffffffff81000000 \
  -Wl,-e,_text -o "$tmp/vmlinux" "$tmp/k.c"
mkdir -p "$tmp/device"
"$PY" - "$tmp/vmlinux" "$tmp/device" <<'PYEOF'
import struct, subprocess, sys
syms = {l.split()[2]: int(l.split()[0], 16) for l in subprocess.check_output(["nm", sys.argv[1]], text=True).splitlines()}
slide = 0x2a00000  # where this boot's KASLR put the kernel
ips = [syms["beta"] + 3 + slide, syms["alpha"] + 5 + slide]
data = struct.pack("<IIII", 0x464D5342, 2, 1, 0) + struct.pack("<IIII", 77, len(ips), 9, 0)
data += b"".join(struct.pack("<Q", ip) for ip in ips)
open(sys.argv[2] + "/stack_map_bin", "wb").write(data)
open(sys.argv[2] + "/stack_map.kernel", "w").write("release test\nbuild_id -\ntext 0x%x\n" % (syms["_text"] + slide))
PYEOF
"$BIN" decode "$tmp/device/stack_map_bin" --vmlinux "$tmp/vmlinux" > "$tmp/vmlinux.txt" 2> /dev/null
check "--vmlinux with the recorded slide resolves the frames" \
  '[ "$(sed -n 2,3p "$tmp/vmlinux.txt" | tr -s " " | tr "\n" "|")" = " [0] beta+0x3/0xf| [1] alpha+0x5/0xf|" ]'

# Always-on history: timed snapshots kept under export-dir/history within a disk cap.
"$BIN" daemon --config /dev/null --export-dir "$tmp/always" --pin-dir "" --snapshot-interval 0.3 \
  --history-max-kb 4096 2> "$tmp/always.err" &
pid=$!
"$PY" -c "$LOOP" 4
# The control client's options go before its subcommand or after it.
for args in "--socket $tmp/always/control.sock ctl stat" "ctl --socket $tmp/always/control.sock stat" \
  "ctl stat --socket $tmp/always/control.sock"; do
  "$BIN" $args > "$tmp/ctl.out" 2> "$tmp/ctl.err"
  rc=$?
  check "${args//$tmp\/always\//}: the daemon's stat (rc $rc, $(head -1 "$tmp/ctl.err"))" \
    '[ $rc -eq 0 ] && grep -q "^entries:" "$tmp/ctl.out"'
done
kill -TERM $pid
wait $pid
rc=$?
check "the daemon stops cleanly on SIGTERM" '[ $rc -eq 0 ]'
hist=$tmp/always/history
check "history keeps several snapshots ($(ls "$hist" | grep -c stack_map_bin))" \
  '[ "$(ls "$hist" | grep -c "^[0-9]\{8\}T[0-9]\{6\}Z\.stack_map_bin\$")" -ge 2 ]'
check "history stays within 4096 KiB ($(cat "$hist"/* | wc -c) bytes; pruning: unit test history)" \
  '[ "$(cat "$hist"/* | wc -c)" -le 4194304 ]'
newest=$(ls "$hist" | grep stack_map_bin | tail -1)
check "the newest history snapshot decodes" '"$BIN" decode "$hist/$newest" > /dev/null 2>&1'
check "the final snapshot is written on shutdown" 'grep -q "^entries:" "$tmp/always/stack_map_stat"'

# --- bad input: one line, non-zero exit, nothing lost -----------------------
before=$(md5sum "$out"/* | md5sum)
expect_error "--bits 25 is out of range: use 10..20" "$BIN" --bits 25 --output "$out"
expect_error "--bits 9 is out of range: use 10..20" "$BIN" --bits 9
expect_error "no such tracepoint 'kmem:nope'" "$BIN" -e kmem:nope --output "$out"
expect_error "bad event 'kmem_cache_alloc': use CATEGORY:NAME" "$BIN" -e kmem_cache_alloc
expect_error "--duration must be more than 0 seconds" "$BIN" --duration 0
expect_error "cannot create output directory /proc/stackmapd/out" "$BIN" --output /proc/stackmapd/out --duration 1
expect_error "argument was not expected: --bogus" "$BIN" --bogus
# --pid $(pidof NAME) when no NAME runs: the shell gives --pid the next option.
expect_error "--pid was given no pid (the next word is the option '--duration'): the pid list is empty" \
  "$BIN" --pid --duration 1
check "--version names the version and the source revision" \
  '"$BIN" --version | grep -qx "stackmapd [0-9.]* (revision $(git -C "$SRC" describe --always --dirty --abbrev=12 2> /dev/null || echo unknown))"'
expect_error "--ringbuf-kb 100 is not a power of two" "$BIN" --ringbuf-kb 100
expect_error "this kernel has no ftrace stackmap" "$BIN" --backend tracefs --duration 1
expect_error "--backend: nope not in" "$BIN" --backend nope
expect_error "--trace and --verify cannot be combined" "$BIN" --trace "$tmp/x.txt" --verify 3
expect_error "cannot write the trace" "$BIN" --trace /proc/nope/trace.txt --duration 1
expect_error "--cpu 4096 does not exist" "$BIN" --cpu 4096 --duration 1
expect_error "--svg /proc/nope/f.svg: cannot write in /proc/nope" "$BIN" --svg /proc/nope/f.svg --duration 1
expect_error "is a JSON export" "$BIN" decode "$tmp/flame/stack_map.json"
expect_error "is not an ELF file" "$BIN" decode "$out/stack_map_bin" --vmlinux "$tmp/other_boot.kallsyms"
expect_error "not both" "$BIN" decode "$out/stack_map_bin" --vmlinux "$tmp/vmlinux" --kallsyms /proc/kallsyms
# -f's mechanisms and refusals: function_probes_test.sh.
check "failed runs left the earlier exports untouched" '[ "$(md5sum "$out"/* | md5sum)" = "$before" ]'
mkdir "$tmp/empty"
expect_error "no such tracepoint 'sched:nope'" "$BIN" -e sched:nope --output "$tmp/empty"
check "a failed run writes nothing" '[ -z "$(ls -A "$tmp/empty")" ]'

cp "$BIN" "$tmp/stackmapd" && chmod 755 "$tmp/stackmapd"
expect_error "CAP_BPF" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
  --bounding-set=-all "$tmp/stackmapd" --duration 1

bin=$out/stack_map_bin
: > "$tmp/empty.bin"
head -c 10 "$bin" > "$tmp/short.bin"
head -c $(( $(stat -c %s "$bin") - 5 )) "$bin" > "$tmp/truncated.bin"
"$PY" -c 'import sys; d=bytearray(open(sys.argv[1],"rb").read()); d[4]=3; open(sys.argv[2],"wb").write(d)' "$bin" "$tmp/version.bin"
"$PY" -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<IIII",0x464D5342,2,0xffffffff,0))' "$tmp/absurd.bin"
cp "$bin" "$tmp/trailing.bin" && printf 'xx' >> "$tmp/trailing.bin"
expect_error "empty FSMB file (0 bytes)" "$BIN" decode "$tmp/empty.bin"
expect_error "10 bytes, the header alone needs 16" "$BIN" decode "$tmp/short.bin"
expect_error "truncated FSMB v2 (magic 0x464d5342) file: record" "$BIN" decode "$tmp/truncated.bin"
expect_error "not a stack_map_bin file" "$BIN" decode "$BIN"
expect_error "unsupported FSMB version 3" "$BIN" decode "$tmp/version.bin"
expect_error "nr_stacks 4294967295, no stack table holds more" "$BIN" decode "$tmp/absurd.bin"
expect_error "2 trailing bytes" "$BIN" decode "$tmp/trailing.bin"
expect_error "cannot open FSMB file: No such file or directory" "$BIN" decode "$tmp/missing.bin"
printf 'not kallsyms\n' > "$tmp/bad.kallsyms"
expect_error "line 1 is malformed" "$BIN" decode "$bin" --kallsyms "$tmp/bad.kallsyms"
# Malformed JSON exports: these aborted (exit 134) or read out of bounds.
printf '{"stacks":[{"stack_id":1,"ref_count":1e400,"ips":[]}]}' > "$tmp/overflow.json"
printf '{"stacks":[],"user_stacks":{}}' > "$tmp/user.json"
expect_error "number overflow parsing '1e400'" "$BIN" decode "$tmp/overflow.json" --folded -
expect_error "number overflow parsing '1e400'" "$BIN" decode "$tmp/overflow.json" --svg "$tmp/o.svg"
expect_error "user_stacks has no \"binaries\" array" "$BIN" decode "$tmp/user.json" --folded -
expect_error "user_stacks has no \"binaries\" array" "$BIN" decode "$tmp/user.json" --pprof "$tmp/u.pb.gz"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

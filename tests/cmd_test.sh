#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# stackmapd [OPTIONS] -- CMD ARGS..., as root on this kernel:
#   1. a command's process tree (sh, then a process, its thread, child and
#      grandchild, followed through fork and exec) is counted exactly per
#      process, and an unrelated process making the same calls meanwhile
#      not at all;
#   2. --profile with -- CMD: every sample is of the command's processes;
#   3. the command's exit status is stackmapd's (exit 7 -> 7, SIGKILL -> 137);
#   4. SIGINT to stackmapd goes to the command, whose exit ends the session
#      with the outputs written; a terminal's ^C, which reaches both, once;
#   5. a command that cannot run: one line, 127 (126 when not executable),
#      nothing written; bad combinations: one line, non-zero.
#   cmd_test.sh STACKMAPD PYTHON CMD_WORKLOAD
set -u
BIN=$1
PY=$2
WORKLOAD=$3

tmp=$(mktemp -d /tmp/H-cmd.XXXXXX)
chmod 755 "$tmp"
bg_pids=
cleanup() {
  local p
  for p in $bg_pids; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

# by_pid DIR: "PID COUNT" lines, each process's events summed over its stacks.
by_pid() {
  "$PY" - "$1/stack_map.json" << 'PYEOF'
import collections, json, sys
counts = collections.Counter()
for s in json.load(open(sys.argv[1]))["stacks"]:
    for k in s.get("by", []):
        counts[k["pid"]] += k["count"]
for pid, n in sorted(counts.items()):
    print(pid, n)
PYEOF
}

# An unrelated process making the same calls all along, started first.
"$WORKLOAD" "$tmp/spin.report" spin &
spin=$!
bg_pids="$bg_pids $spin"
for _ in $(seq 50); do [ -s "$tmp/spin.report" ] && break; sleep 0.1; done

# 1. sh forks two processes, one of which forks a child and a grandchild and
# calls by a thread: four processes of known counts, and the shell.
"$BIN" -e syscalls:sys_enter_getppid --by pid --output "$tmp/tree" -- \
  sh -c "'$WORKLOAD' '$tmp/tree.report' tree 300 200 100 & '$WORKLOAD' '$tmp/tree.report' calls 50; wait" \
  > "$tmp/tree.out" 2> "$tmp/tree.err"
rc=$?
check "-- CMD: exit 0 passes through" '[ $rc -eq 0 ]'
by_pid "$tmp/tree" > "$tmp/tree.counts"
# The shell is the processes' parent; it makes getppid calls of its own.
sh_pid=$(awk '$3 == 301 || $3 == 51 {print $2}' "$tmp/tree.report" | sort -u)
check "the shell is the parent of both top processes ($sh_pid)" '[ "$(echo $sh_pid | wc -w)" -eq 1 ]'
check "four processes reported" '[ "$(wc -l < "$tmp/tree.report")" -eq 4 ]'
while read -r pid ppid calls; do
  got=$(awk -v p="$pid" '$1 == p {print $2}' "$tmp/tree.counts")
  check "process $pid (parent $ppid): $calls calls counted exactly (got ${got:-none})" '[ "${got:-0}" -eq "$calls" ]'
done < "$tmp/tree.report"
others=$(awk 'NR == FNR {known[$1] = 1; next} !($1 in known) && $1 != '"$sh_pid"' {print}' \
  "$tmp/tree.report" "$tmp/tree.counts")
check "no process outside the command's tree is counted (${others:-none})" '[ -z "$others" ]'
check "the unrelated process, calling all along, is not counted" \
  '! awk -v p=$spin '\''$1 == p {found = 1} END {exit !found}'\'' "$tmp/tree.counts"'
check "it was calling meanwhile" 'kill -0 $spin'

# 2. --profile: every sample is of the command's processes (a busy parent and child).
"$BIN" --profile 99 --user-stacks --by pid --output "$tmp/prof" -- \
  "$WORKLOAD" "$tmp/prof.report" busy 500 > /dev/null 2> "$tmp/prof.err"
rc=$?
check "--profile -- CMD: exit 0" '[ $rc -eq 0 ]'
by_pid "$tmp/prof" > "$tmp/prof.counts"
samples=$(awk '{s += $2} END {print s + 0}' "$tmp/prof.counts")
mine=$(awk 'NR == FNR {known[$1] = 1; next} $1 in known {s += $2} END {print s + 0}' \
  "$tmp/prof.report" "$tmp/prof.counts")
check "--profile: samples of the command ($samples; 2 x 0.5 s of CPU at 99 Hz)" '[ "$samples" -ge 40 ]'
check "--profile: all $samples samples are of the command's processes ($mine)" '[ "$mine" -eq "$samples" ]'
while read -r pid ppid _; do
  got=$(awk -v p="$pid" '$1 == p {print $2}' "$tmp/prof.counts")
  check "--profile: busy process $pid (parent $ppid) sampled (${got:-0} of ~50)" '[ "${got:-0}" -ge 15 ]'
done < "$tmp/prof.report"

# 3. The exit status, and death by a signal as a shell reports it.
"$BIN" -e syscalls:sys_enter_getppid --output "$tmp/seven" -- sh -c 'exit 7' 2> /dev/null > /dev/null
rc=$?
check "the command's exit 7 is stackmapd's" '[ $rc -eq 7 ]'
check "and the outputs are written" '[ -s "$tmp/seven/stack_map_stat" ]'
"$BIN" -e syscalls:sys_enter_getppid --top 3 -- sh -c 'kill -KILL $$' 2> /dev/null > /dev/null
rc=$?
check "a command killed by SIGKILL: 137" '[ $rc -eq 137 ]'

# 4. SIGINT to stackmapd reaches the command, which traps it and exits 3.
"$BIN" -e syscalls:sys_enter_getppid --output "$tmp/int" -- \
  sh -c "trap 'exit 3' INT; echo \$\$ > '$tmp/started'; while :; do sleep 0.1; done" \
  > /dev/null 2> "$tmp/int.err" &
pid=$!
bg_pids="$bg_pids $pid"
for _ in $(seq 100); do [ -s "$tmp/started" ] && break; sleep 0.1; done
bg_pids="$bg_pids $(cat "$tmp/started")"  # the command, should it outlive stackmapd
kill -INT $pid
for _ in $(seq 100); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
ended=yes
if kill -0 $pid 2> /dev/null; then ended="no, killed after 10 s"; kill -KILL $pid; fi
wait $pid
rc=$?
check "stackmapd ended with the command ($ended)" '[ "$ended" = yes ]'
check "SIGINT went to the command: its exit 3 is stackmapd's ($rc)" '[ "$rc" = 3 ]'
check "and the outputs are written" '[ -s "$tmp/int/stack_map_bin" ]'

# 4b. A terminal's ^C goes to its whole foreground process group, the command
# included: stackmapd, in that group too, must not send it a second one.
"$PY" - "$BIN" "$tmp" << 'PYEOF' > "$tmp/tty.out" 2>&1
import os, pty, sys, time
binary, tmp = sys.argv[1], sys.argv[2]
# Counts the SIGINTs it gets for 3 s after the first, then exits 5.
prog = ("import os, signal, time\n"
        "n = []\n"
        "signal.signal(signal.SIGINT, lambda s, f: n.append(time.time()))\n"
        "open(%r, 'w').close()\n"
        "while not n or time.time() - n[0] < 3: time.sleep(0.01)\n"
        "open(%r, 'w').write(str(len(n)))\n"
        "os._exit(5)\n") % (tmp + "/tty.ready", tmp + "/tty.count")
pid, fd = pty.fork()
if pid == 0:
    os.execv(binary, [binary, "-e", "syscalls:sys_enter_getppid", "--output", tmp + "/tty",
                      "--", sys.executable, "-c", prog])
end = time.time() + 30
while not os.path.exists(tmp + "/tty.ready") and time.time() < end:
    time.sleep(0.05)
os.write(fd, b"\x03")  # ^C, as typed
while True:
    try:
        if not os.read(fd, 4096):
            break
    except OSError:
        break
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
PYEOF
rc=$(tail -1 "$tmp/tty.out")
check "a terminal's ^C: the command's status 5 is stackmapd's ($rc)" '[ "$rc" = 5 ]'
check "the command got that ^C once ($(cat "$tmp/tty.count" 2> /dev/null))" \
  '[ "$(cat "$tmp/tty.count" 2> /dev/null)" = 1 ]'

# 5. Commands that cannot run, and bad combinations.
expect_error "No such file or directory" "$BIN" --output "$tmp/none" -- /nonexistent/cmd
rc=$(
  "$BIN" --output "$tmp/none" -- /nonexistent/cmd 2> /dev/null
  echo $?
)
check "a missing command: exit 127" '[ "$rc" -eq 127 ]'
check "and nothing written" '[ ! -e "$tmp/none/stack_map" ]'
printf '#!/bin/sh\n' > "$tmp/noexec"
chmod 644 "$tmp/noexec"
rc=$(
  "$BIN" --output "$tmp/none" -- "$tmp/noexec" 2> "$tmp/noexec.err"
  echo $?
)
check "a command that is not executable: exit 126 ($(cat "$tmp/noexec.err"))" \
  '[ "$rc" -eq 126 ] && grep -q "Permission denied" "$tmp/noexec.err"'
rc=$(
  PATH=/nonexistent "$BIN" --output "$tmp/none" -- true 2> "$tmp/path.err"
  echo $?
)
check "a name not in PATH: exit 127" '[ "$rc" -eq 127 ] && [ "$(wc -l < "$tmp/path.err")" -eq 1 ]'
expect_error "no command after it" "$BIN" --
expect_error "both end the session" "$BIN" --duration 1 -- true
expect_error "needs the BPF backend" "$BIN" --backend tracefs -- true
expect_error "own BPF object" "$BIN" --pinned /sys/fs/bpf/nothing -- true
expect_error "tracing session of its own" "$BIN" decode x -- true

echo "$failures failures"
[ "$failures" -eq 0 ]

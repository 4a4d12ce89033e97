#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The daemon's one loop against the clients and signals that used to stop it
#, as root on this kernel: slow, silent and non-reading control
# clients, more clients than it serves, a SIGUSR1 reset that fails; and the
# foreground loop ending on SIGINT/SIGTERM with its exports written.
set -u
BIN=$1
PY=${2:-python3}

tmp=$(mktemp -d /tmp/B-control.XXXXXX)
chmod 755 "$tmp"
pid=
clients=()
cleanup() {
  for c in "${clients[@]}"; do kill "$c" 2> /dev/null; done
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

dir=$tmp/run
sock=$dir/control.sock
# A control client in Python: MODE slow (one byte of "stat\n" and more every
# 0.9 s), partial (sends "sta", then waits), lazy (asks for the whole table,
# never reads), many (40 connections at once, silent; one reply line each).
# Prints what it got back.
# Each one touches OUT.started once it has connected and sent its first bytes.
client() {  # client MODE OUT
  "$PY" - "$sock" "$1" "$2.started" > "$2" 2>&1 << 'PYEOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
mode = sys.argv[2]
started = lambda: open(sys.argv[3], "w").close()
if mode == "slow":
    try:
        for i, b in enumerate(b"stat" + b"x" * 15 + b"\n"):
            s.send(bytes([b]))
            if i == 0:
                started()
            time.sleep(0.9)
    except OSError:
        pass
elif mode == "partial":
    s.send(b"sta")
    started()
elif mode == "lazy":
    s.send(b"top 100000\n")
    started()
    time.sleep(30)
    sys.exit(0)
elif mode == "many":  # 40 at once from one process, each then silent
    socks = [s] + [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(39)]
    for c in socks[1:]:
        c.connect(sys.argv[1])
    started()
    for c in socks:
        c.settimeout(10)
        out = b""
        try:
            while d := c.recv(65536):
                out += d
        except OSError:
            pass
        print(out.decode(errors="replace").split("\n")[1] if b"\n" in out else "(nothing)")
    sys.exit(0)
else:
    started()
out = b""
while True:
    try:
        d = s.recv(65536)
    except OSError:
        break
    if not d:
        break
    out += d
sys.stdout.write(out.decode(errors="replace"))
PYEOF
  clients+=($!)
}
wait_started() {  # wait_started OUT... : until each client has started (at most 10 s)
  local f
  for f in "$@"; do
    for _ in $(seq 100); do [ -e "$f.started" ] && break; sleep 0.1; done
  done
}
# Seconds that `ctl stat` takes from another client (at most 20); its reply in $tmp/stat.out.
stat_seconds() {
  local t0 t1
  t0=$(date +%s%N)
  timeout 20 "$BIN" --socket "$sock" ctl stat > "$tmp/stat.out" 2>&1
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 ))
}
alive() { kill -0 "$pid" 2> /dev/null; }

"$BIN" daemon --config /dev/null --export-dir "$dir" --pin-dir "" --snapshot-interval 3600 \
  2> "$tmp/daemon.err" &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && grep -q "tracing " "$tmp/daemon.err" && break; sleep 0.1; done
check "the daemon serves its control socket" '[ -S "$sock" ]'
( for _ in $(seq 3000); do cat /proc/self/stat > /dev/null; ls /proc > /dev/null; done ) &
clients+=($!)

# --- `--top N` alone is the daemon's to answer, not with an option that shapes a recording
"$BIN" --socket "$sock" --top 3 > "$tmp/asked.out" 2> "$tmp/asked.err"
rc=$?
check "--top 3 alone prints the daemon's answer (exit $rc; $(head -1 "$tmp/asked.out"))" \
  '[ $rc -eq 0 ] && grep -q "top 3:" "$tmp/asked.out" && ! grep -q "tracing " "$tmp/asked.err"'
timeout 60 "$BIN" --socket "$sock" --top 3 --user-stacks > "$tmp/own.out" 2> "$tmp/own.err"
rc=$?
check "--top 3 --user-stacks runs a session of its own (exit $rc; $(grep -m1 "tracing " "$tmp/own.err"))" \
  '[ $rc -eq 0 ] && grep -q "top 3:" "$tmp/own.out" && grep -q "tracing .* for 5 s" "$tmp/own.err"'

# --- a slow client (one byte every 0.9 s) -----------------------------------
client slow "$tmp/slow.out"
wait_started "$tmp/slow.out"
sleep 0.3
ms=$(stat_seconds)
check "ctl stat answers within 2.5 s beside a slow client (${ms} ms)" '[ "$ms" -lt 2500 ]'
check "and its reply is the stat" 'grep -q "^entries:" "$tmp/stat.out"'
sleep 3.5
check "the slow client is cut off at its deadline ($(tr '\n' ' ' < "$tmp/slow.out"))" \
  'grep -q "^no request line within 3 s" "$tmp/slow.out"'

# --- clients that never finish their line, several at once -------------------
for i in 1 2 3 4 5 6 7 8; do client partial "$tmp/partial$i.out"; done
wait_started $(for i in 1 2 3 4 5 6 7 8; do echo "$tmp/partial$i.out"; done)
sleep 0.3
ms=$(stat_seconds)
check "ctl stat answers within 2.5 s beside 8 clients that never end their line (${ms} ms)" \
  '[ "$ms" -lt 2500 ]'
sleep 3.5
check "each of them gets one error line at its deadline" \
  '[ "$(cat "$tmp"/partial?.out | grep -c "^no request line within 3 s")" -eq 8 ]'

# --- clients that never read their reply --------------------------------------
for i in 1 2 3 4 5 6; do client lazy "$tmp/lazy$i.out"; done
wait_started $(for i in 1 2 3 4 5 6; do echo "$tmp/lazy$i.out"; done)
sleep 0.5
ms=$(stat_seconds)
check "ctl stat answers within 2.5 s beside 6 clients that never read (${ms} ms)" '[ "$ms" -lt 2500 ]'

# --- more clients than it serves -------------------------------------------
sleep 5  # the lazy ones are dropped by now
client many "$tmp/many.out"
wait_started "$tmp/many.out"
sleep 1
check "the daemon survived 40 clients at once" 'alive'
sleep 4
evicted=$(grep -c "^no request line yet: a newer client took this slot$" "$tmp/many.out")
timedout=$(grep -c "^no request line within 3 s" "$tmp/many.out")
check "of 40 silent clients of one user the last 12 (its cap) keep their slot until their deadline ($timedout), the 28 older ones are evicted with one line ($evicted)" \
  '[ "$evicted" -eq 28 ] && [ "$timedout" -eq 12 ]'
ms=$(stat_seconds)
check "once they time out, ctl stat answers again (${ms} ms)" \
  '[ "$ms" -lt 2500 ] && grep -q "^entries:" "$tmp/stat.out"'

# --- a SIGUSR1 reset that fails -------------------------------------------
# A directory where the export goes: the reset's export cannot replace it.
rm -f "$dir/stack_map.json"
mkdir -p "$dir/stack_map.json/in-the-way"
kill -USR1 "$pid"
sleep 1
check "a failed SIGUSR1 reset leaves the daemon running" 'alive'
check "and says why in one line ($(grep "SIGUSR1" "$tmp/daemon.err"))" \
  '[ "$(grep -c "SIGUSR1 reset failed, still tracing: .*stack_map.json" "$tmp/daemon.err")" -eq 1 ]'
ms=$(stat_seconds)
check "ctl stat still answers after it (${ms} ms)" 'grep -q "^entries:" "$tmp/stat.out"'
rm -rf "$dir/stack_map.json"
check "ctl snapshot works once the way is clear" \
  'timeout 10 "$BIN" --socket "$sock" ctl snapshot > /dev/null 2>&1 && [ -f "$dir/stack_map.json" ]'

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "the daemon stops cleanly on SIGTERM (exit $rc)" '[ "$rc" -eq 0 ]'

# --- the foreground loop: SIGINT and SIGTERM end a session with its exports --
for sig in INT TERM; do
  "$BIN" --output "$tmp/fg-$sig" 2> "$tmp/fg-$sig.err" &
  fg=$!
  for _ in $(seq 100); do grep -q "tracing " "$tmp/fg-$sig.err" && break; sleep 0.1; done
  sleep 0.5
  kill -"$sig" "$fg"
  wait "$fg"
  rc=$?
  check "SIG$sig ends a foreground session with exit 0 (exit $rc)" '[ "$rc" -eq 0 ]'
  check "SIG$sig: the exports are written" \
    '[ -s "$tmp/fg-$sig/stack_map_bin" ] && grep -q "^entries:" "$tmp/fg-$sig/stack_map_stat"'
done

echo "$failures failures"
[ "$failures" -eq 0 ]

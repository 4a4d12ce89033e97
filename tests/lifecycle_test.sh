#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The daemon's start, stop and signals against a careless operator and an
# unprivileged user, as root on this kernel:
# a SIGHUP storm keeps neither the watchdog nor the exports from their turn; a
# failed start leaves no table pinned; a second daemon on the same pin dir
# changes nothing of the first's; directories are refused, never changed;
# stale files of ours are cleaned; bad values get one line.
set -u
BIN=$1
PY=${2:-python3}

tmp=$(mktemp -d /tmp/life-test.XXXXXX)
chmod 755 "$tmp"
pins=/sys/fs/bpf/life-test-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null; done
  "$BIN" unpin --pin-dir "$pins" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

# The sd_notify datagrams a daemon sends, one "SECONDS MESSAGE" line each.
notify_listener() {  # notify_listener SOCKET OUT
  "$PY" - "$1" "$2" << 'PYEOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "w") as out:
    while True:
        for line in s.recv(4096).decode(errors="replace").splitlines():
            out.write("%.3f %s\n" % (time.monotonic(), line))
            out.flush()
PYEOF
  pids+=($!)
  for _ in $(seq 50); do [ -S "$1" ] && break; sleep 0.1; done
}
wait_ready() {  # wait_ready EXPORT_DIR LOG: until it traces (at most 30 s)
  for _ in $(seq 300); do grep -q "tracing " "$2" && [ -S "$1/control.sock" ] && return; sleep 0.1; done
}

# --- a SIGHUP storm (item 4) -------------------------------------------------
storm=$tmp/storm
notify_listener "$tmp/notify.sock" "$tmp/notify.log"
NOTIFY_SOCKET=$tmp/notify.sock WATCHDOG_USEC=2000000 "$BIN" daemon --config /dev/null \
  --export-dir "$storm" --pin-dir "$pins" --snapshot-interval 0.5 2> "$tmp/storm.err" &
daemon=$!
pids+=($daemon)
wait_ready "$storm" "$tmp/storm.err"
check "the daemon is ready" 'grep -q "^[0-9.]* READY=1" "$tmp/notify.log"'
( while :; do cat /proc/self/stat > /dev/null; done ) &  # events to count
load=$!
pids+=($load)
started=$("$PY" -c 'import time; print("%.3f" % time.monotonic())')
for _ in $(seq 240); do kill -HUP "$daemon"; sleep 0.05; done  # 12 s of one every 50 ms
ended=$("$PY" -c 'import time; print("%.3f" % time.monotonic())')
sleep 1.5
kill "$load"
# Watchdog pings and timed exports (STATUS=, with the event count) within the storm.
awk -v a="$started" -v b="$ended" '$1 >= a && $1 <= b' "$tmp/notify.log" > "$tmp/storm.log"
gap=$(awk -v a="$started" -v b="$ended" '/WATCHDOG=1/ { if ($1 - a > g) g = $1 - a; a = $1 }
  END { if (b - a > g) g = b - a; printf "%.1f", g }' "$tmp/storm.log")
statuses=$(grep -c "STATUS=" "$tmp/storm.log")
first=$(grep -m1 -o "STATUS=[0-9]*" "$tmp/storm.log" | cut -d= -f2)
last=$(grep -o "STATUS=[0-9]*" "$tmp/storm.log" | tail -1 | cut -d= -f2)
reloads=$(grep -c "reloaded /dev/null" "$tmp/storm.err")
# A ping waits for the reload under way (~1 s here) and, at worst, one more.
check "the watchdog hears from the loop at least every 6 s during 12 s of SIGHUPs (longest gap ${gap} s)" \
  'awk -v g="$gap" "BEGIN { exit !(g < 6) }"'
check "the timed exports go on during the storm (${statuses} of them, want 6 or more)" \
  '[ "$statuses" -ge 6 ]'
check "and count events meanwhile (${first:-none} -> ${last:-none})" \
  '[ -n "$first" ] && [ -n "$last" ] && [ "$last" -gt "$first" ]'
check "the reloads are coalesced, and each one runs (${reloads} reloads for 240 SIGHUPs)" \
  '[ "$reloads" -ge 1 ] && [ "$reloads" -le 240 ]'
kill -TERM "$daemon"
wait "$daemon"
rc=$?
check "the daemon ends with exit 0 after the storm (exit $rc)" '[ "$rc" -eq 0 ]'
check "and removes its pins" '[ ! -e "$pins" ]'

# --- a failed start undoes what it did (item 7) -------------------------------
"$PY" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(120)' > "$tmp/port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
expect_error "another program listens there" "$BIN" daemon --config /dev/null --bits 20 \
  --export-dir "$tmp/busy" --pin-dir "$pins" --listen "127.0.0.1:$port"
check "a start whose port is taken pins nothing" '[ ! -e "$pins" ]'
check "and leaves no pid file or socket" \
  '[ ! -e "$tmp/busy/stackmapd.pid" ] && [ ! -e "$tmp/busy/control.sock" ]'
# Fails after the table is loaded and pinned: the metrics file cannot be written.
expect_error "No such file" "$BIN" daemon --config /dev/null --bits 16 \
  --export-dir "$tmp/late" --pin-dir "$pins" --metrics-textfile "$tmp/missing/metrics.prom"
check "a start that fails once pinned removes its pins" '[ ! -e "$pins" ]'
check "and leaves no pid file or socket" \
  '[ ! -e "$tmp/late/stackmapd.pid" ] && [ ! -e "$tmp/late/control.sock" ]'

# --- an export dir of somebody else's (item 6), and stale files (item 10) ----
shared=$tmp/shared
mkdir -m 1777 "$shared"
"$PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$shared/control.sock"
echo torn > "$shared/stack_map.json.tmp-AbC123"  # as a SIGKILL mid-write leaves it
echo theirs > "$shared/notes.tmp-AbC123"
mkdir -m 750 "$shared/binaries"
echo torn > "$shared/binaries/.0123abcd.tmp"
"$BIN" daemon --config /dev/null --export-dir "$shared" --pin-dir "$pins" \
  --snapshot-interval 0.5 2> "$tmp/first.err" &
first=$!
pids+=($first)
wait_ready "$shared" "$tmp/first.err"
check "a shared sticky export dir keeps its mode (1777: $(stat -c %a "$shared"))" \
  '[ "$(stat -c %a "$shared")" = 1777 ]'
check "the stale control socket is replaced by the daemon's" \
  '"$BIN" --socket "$shared/control.sock" ctl stat | grep -q "^entries:"'
check "temp files of ours left by a kill are removed" \
  '[ ! -e "$shared/stack_map.json.tmp-AbC123" ] && [ ! -e "$shared/binaries/.0123abcd.tmp" ]'
check "a file of another name stays" '[ "$(cat "$shared/notes.tmp-AbC123")" = theirs ]'
expect_error "give top a count" "$BIN" --socket "$shared/control.sock" ctl top -1

# --- a second daemon on the same pin dir (item 8) ------------------------------
expect_error "already uses the table pinned" "$BIN" daemon --config /dev/null \
  --export-dir "$tmp/second" --pin-dir "$pins"
expect_error "already uses the table pinned" "$BIN" unpin --pin-dir "$pins"
check "unpin leaves a running daemon's pins" '[ -e "$pins/slots" ]'
fails=0
for _ in $(seq 8); do
  "$BIN" --socket "$shared/control.sock" ctl snapshot > /dev/null 2>&1 || fails=$((fails + 1))
  sleep 0.5
done
check "the first daemon's snapshots keep working ($fails of 8 failed)" '[ "$fails" -eq 0 ]'
check "and it logged no error" '! grep -qi "error\|fail" "$tmp/first.err"'
kill -TERM "$first"
wait "$first"
rc=$?
check "the first daemon ends with exit 0 (exit $rc)" '[ "$rc" -eq 0 ]'

# --- unsafe directories are refused, nothing changed (item 6) ------------------
mkdir -m 777 "$tmp/open"
expect_error "writable by every user" "$BIN" daemon --config /dev/null --export-dir "$tmp/open" \
  --pin-dir ""
check "its mode is unchanged" '[ "$(stat -c %a "$tmp/open")" = 777 ] && [ -z "$(ls -A "$tmp/open")" ]'
mkdir -m 755 "$tmp/nobodys"
chown 65534 "$tmp/nobodys"
expect_error "belongs to user 65534" "$BIN" daemon --config /dev/null --export-dir "$tmp/nobodys" \
  --pin-dir ""
mkdir -m 755 "$tmp/file"
echo mine > "$tmp/file/control.sock"
expect_error "is not a socket" "$BIN" daemon --config /dev/null --export-dir "$tmp/file" --pin-dir ""
check "a regular file named control.sock is kept, the mode too" \
  '[ "$(cat "$tmp/file/control.sock")" = mine ] && [ "$(stat -c %a "$tmp/file")" = 755 ]'
mkdir -m 755 "$tmp/plain"
expect_error "is not a bpf filesystem" "$BIN" daemon --config /dev/null --export-dir "$tmp/plain-run" \
  --pin-dir "$tmp/plain/pins"
check "nothing is mounted over an ordinary parent" '! mountpoint -q "$tmp/plain"'
check "and the pin dir is not made" '[ ! -e "$tmp/plain/pins" ]'

# bpffs as stackmapd mounts it, where nothing did (a container): in a mount
# namespace of its own, /sys/fs/bpf covered, so nothing outside is touched.
unshare -m --propagation private bash -c '
  set -u
  mount -t tmpfs none /sys/fs/bpf
  "$0" daemon --config /dev/null --export-dir "$1/ns" --pin-dir /sys/fs/bpf/stackmapd \
    --snapshot-interval 3600 2> "$1/ns.err" &
  d=$!
  for _ in $(seq 300); do grep -q "tracing " "$1/ns.err" && break; sleep 0.1; done
  stat -c %a /sys/fs/bpf > "$1/ns.mode"
  kill -TERM $d; wait $d
  # Another user prepares the next start'"'"'s names, which must not work.
  setpriv --reuid 65534 --regid 65534 --clear-groups mkdir -p /sys/fs/bpf/stackmapd/slots \
    2> /dev/null && echo made > "$1/ns.mkdir"
  "$0" daemon --config /dev/null --export-dir "$1/ns" --pin-dir /sys/fs/bpf/stackmapd \
    --snapshot-interval 3600 2> "$1/ns2.err" &
  d=$!
  for _ in $(seq 300); do grep -q "tracing " "$1/ns2.err" && break; sleep 0.1; done
  kill -TERM $d; wait $d; echo $? > "$1/ns2.rc"
' "$BIN" "$tmp"
# bpffs adds the sticky bit to any mode: 1700 is systemd's 0700.
check "bpffs mounted by stackmapd is for root only ($(cat "$tmp/ns.mode" 2> /dev/null))" \
  '[ "$(cat "$tmp/ns.mode" 2> /dev/null)" = 1700 ]'
check "another user cannot make the pin dir's names" '[ ! -e "$tmp/ns.mkdir" ]'
check "the next start works (exit $(cat "$tmp/ns2.rc" 2> /dev/null))" \
  '[ "$(cat "$tmp/ns2.rc" 2> /dev/null)" = 0 ]'

# --- values that used to pass silently (item 10) -------------------------------
expect_error "and at most" timeout 20 "$BIN" --duration 1e400 -e kmem:kmem_cache_alloc --output "$tmp/o"
expect_error "not in range" timeout 20 "$BIN" --top -1 -e kmem:kmem_cache_alloc
expect_error "no such process" timeout 20 "$BIN" --pid 4194300 -e kmem:kmem_cache_alloc --duration 1

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `systemctl start stackmapd` for real: boots systemd in a container
# (systemd-nspawn over a cached Debian rootfs) with the project's units and
# binary, then checks the service end to end. Root required.
#   systemd_test.sh SOURCE_DIR STACKMAPD_BINARY [PYTHON]
set -u
SRC=$1
BIN=$2
PY=${3:-python3}
# The daemon's shared libraries' packages; the cached rootfs is named after
# them, so a new library builds a new one.
PACKAGES=systemd,systemd-sysv,dbus,libbpf1,libspdlog1.10,libelf1,libdw1,libsystemd0
ROOTFS=${STACKMAPD_ROOTFS:-/var/cache/stackmapd-test/rootfs-$(md5sum <<< "$PACKAGES" | cut -c1-8)}
MIRROR=${STACKMAPD_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

source "$(dirname "$0")/../check_lib.sh"
die() { echo "FAIL: $*"; exit 1; }

# --- the container ----------------------------------------------------------
if [ ! -x "$ROOTFS/lib/systemd/systemd" ]; then
  echo "building the container rootfs in $ROOTFS (about 2 minutes, cached afterwards)"
  rm -rf "$ROOTFS.tmp"
  mkdir -p "$(dirname "$ROOTFS")"
  debootstrap --variant=minbase \
    --include="$PACKAGES" \
    bookworm "$ROOTFS.tmp" "$MIRROR" > /tmp/stackmapd-debootstrap.log 2>&1 ||
    die "debootstrap failed: see /tmp/stackmapd-debootstrap.log"
  mv "$ROOTFS.tmp" "$ROOTFS"
fi

lab=$(mktemp -d)
mkdir -p "$lab/etc" "$lab/units"
cp "$BIN" "$lab/stackmapd"
cp "$SRC/packaging/etc/stackmapd.conf" "$lab/etc/"
cp "$SRC"/packaging/systemd/*.service "$lab/units/"
binds=(--bind-ro="$lab/stackmapd:/usr/sbin/stackmapd" --bind="$lab/etc:/etc/stackmapd" --bind="$lab:/lab")
for unit in "$lab"/units/*.service; do
  binds+=(--bind-ro="$unit:/etc/systemd/system/$(basename "$unit")")
done

# Each container from a cgroup of its own, or two would share one (see
# shared/notes/systemd-in-a-container.md).
cg=
if [ -d /sys/fs/cgroup/systemd ]; then
  cg=/sys/fs/cgroup/systemd/stackmapd-test-$$
  mkdir -p "$cg"
fi
(
  [ -n "$cg" ] && echo $BASHPID > "$cg/cgroup.procs"
  exec systemd-nspawn -b -D "$ROOTFS" --register=no --keep-unit --capability=all \
    --system-call-filter='bpf perf_event_open' --volatile=overlay "${binds[@]}"
) > "$lab/console.log" 2>&1 &
nspawn=$!
cleanup() {
  kill "$nspawn" 2>/dev/null
  wait "$nspawn" 2>/dev/null
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null
  rm -rf "$lab"
}
trap cleanup EXIT

leader=
for _ in $(seq 100); do
  leader=$(pgrep -P "$nspawn" -x systemd | head -1)
  [ -n "$leader" ] && break
  sleep 0.1
done
[ -n "$leader" ] || die "the container did not boot: $(tail -5 "$lab/console.log")"
inside() { nsenter -t "$leader" -a "$@"; }
state=
for _ in $(seq 300); do  # systemctl answers once dbus is up
  state=$(inside systemctl is-system-running 2>/dev/null)
  case $state in running|degraded) break ;; esac
  sleep 0.2
done
check "the container's systemd is up ($state)" '[ "$state" = running ]'

# --- units as systemd sees them ----------------------------------------------
out=$(inside systemd-analyze verify --man=no /etc/systemd/system/stackmapd.service \
  /etc/systemd/system/stackmapd-bpffs.service 2>&1)
check "systemd-analyze verify says nothing about the units${out:+: $out}" '[ -z "$out" ]'

main_pid() { inside systemctl show -p MainPID --value stackmapd; }
restarts() { inside systemctl show -p NRestarts --value stackmapd; }
wait_active_pid() {  # wait_active_pid OLD_PID: until a new main process is up and READY
  for _ in $(seq 150); do
    local pid
    pid=$(main_pid)
    if [ "$pid" != 0 ] && [ "$pid" != "$1" ] && [ "$(inside systemctl is-active stackmapd)" = active ]; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}
journal_count() { inside journalctl -u stackmapd -o cat | grep -c -- "$1"; }
wait_journal() {  # wait_journal PATTERN COUNT: journald writes asynchronously
  for _ in $(seq 50); do [ "$(journal_count "$1")" -ge "$2" ] && return 0; sleep 0.1; done
  return 1
}
load() { inside sh -c 'for i in $(seq 3000); do cat /proc/self/stat > /dev/null; done'; }
stat_of() { inside cat /run/stackmapd/stack_map_stat | awk -v k="$1:" '$1 == k {print $2}'; }
signal_main() {  # signal_main SIG PID: PID 0 (no daemon) would signal this test's own process group
  if [ "${2:-0}" -gt 0 ]; then inside sh -c "kill -$1 $2"; else fail "no daemon to send SIG$1 to"; fi
}

# --- start ---------------------------------------------------------------------
inside systemctl start stackmapd
rc=$?
[ $rc -eq 0 ] || inside journalctl -u stackmapd -u stackmapd-bpffs -o cat --no-pager | tail -20
check "systemctl start stackmapd" '[ $rc -eq 0 ]'
check "is-active" '[ "$(inside systemctl is-active stackmapd)" = active ]'
status=$(inside systemctl show -p StatusText --value stackmapd)
check "STATUS= reports events and stacks ($status)" 'grep -qE "^[0-9]+ events, [0-9]+ unique stacks" <<< "$status"'
check "the daemon logs to the journal" 'inside journalctl -u stackmapd -o cat | grep -q "tracing kmem:kmem_cache_alloc"'
# CAP_BPF CAP_PERFMON CAP_SYSLOG CAP_SYS_PTRACE CAP_CHECKPOINT_RESTORE, and
# CAP_SETUID CAP_SETGID for the parser helpers (which become nobody).
check "its capabilities are the unit's seven" \
  '[ "$(inside grep CapEff /proc/"$(main_pid)"/status | awk "{print \$2}")" = 000001c4000800c0 ]'

load
top=$(inside stackmapd --top 20)
check "stackmapd --top 20 prints the top 20" 'grep -qE "^[0-9]+ events, [0-9]+ unique stacks; top 20:\$" <<< "$top"'
check "--top shows kmem stacks, symbolized" 'grep -qE "^    kmem_cache_alloc[a-z_]*\+0x[0-9a-f]+/0x[0-9a-f]+\$" <<< "$top"'
first_id=$(grep -m1 -oE '^#1 stack_id [0-9]+' <<< "$top" | awk '{print $3}')
inside stackmapd ctl snapshot > /dev/null
check "the top stack id is the daemon's (in its stack_map)" \
  'inside grep -q "^stack_id $first_id " /run/stackmapd/stack_map'

# --- live exports ---------------------------------------------------------------
for f in stack_map stack_map_stat stack_map_bin stack_map.json; do
  check "/run/stackmapd/$f is 0640" '[ "$(inside stat -c %a /run/stackmapd/$f)" = 640 ]'
done
# The daemon rewrites its exports every few seconds, each file renamed into
# place alone: a bin read between two equal stat reads is of that count.
for _ in 1 2 3 4 5; do
  entries=$(stat_of entries)
  inside cat /run/stackmapd/stack_map_bin > "$lab/bin"
  [ "$(stat_of entries)" = "$entries" ] && break
done
"$PY" "$SRC/tests/rfc/stackmap_dump.py" "$lab/bin" > /dev/null 2> "$lab/dump.err"
check "the RFC's stackmap_dump.py reads the live stack_map_bin" 'grep -qx "Total: $entries unique stacks" "$lab/dump.err"'
inside cat /run/stackmapd/stack_map.json > "$lab/json"
json_check='
import json, sys
d = json.load(open(sys.argv[1]))
assert {"bits", "hash_seed", "table_size", "stats", "stacks"} <= d.keys()
# Live: events keep coming between reading the counters and the stacks.
assert 0 < sum(s["ref_count"] for s in d["stacks"]) <= d["stats"]["hits"]'
check "stack_map.json parses, with bits, hash_seed, stats, stacks, counts" '"$PY" -c "$json_check" "$lab/json"'

# --- reset ------------------------------------------------------------------------
hits_before=$(stat_of hits)
reply=$(inside stackmapd ctl reset)
check "ctl reset ($reply)" 'grep -q "^reset: epoch 0 ended with" <<< "$reply"'
check "the exports were emptied: resets 1, hits $(stat_of hits) < $hits_before" \
  '[ "$(stat_of resets)" = 1 ] && [ "$(stat_of hits)" -lt "$hits_before" ]'

# --- kill -9: systemd restarts it, the pinned table survives -----------------------
load
inside stackmapd ctl snapshot > /dev/null
inside cat /run/stackmapd/stack_map_bin > "$lab/before.bin"
pid=$(main_pid)
signal_main 9 "$pid"
wait_active_pid "$pid"
check "kill -9: systemd restarted the daemon (restarts $(restarts))" '[ "$(restarts)" -ge 1 ]'
inside stackmapd ctl snapshot > /dev/null
inside cat /run/stackmapd/stack_map_bin > "$lab/after.bin"
check "the restarted daemon continued the table" \
  'inside journalctl -u stackmapd -o cat | grep -q "continuing the table pinned in /sys/fs/bpf/stackmapd"'
check "every stack id survived with its frames and at least its count" '"$PY" - "$lab/before.bin" "$lab/after.bin"' <<'PYEOF'
import struct, sys
def read(path):
    d = open(path, "rb").read()
    _, _, n, _ = struct.unpack_from("<IIII", d)
    off, out = 16, {}
    for _ in range(n):
        sid, nr, ref, _ = struct.unpack_from("<IIII", d, off)
        out[sid] = (ref, struct.unpack_from(f"<{nr}Q", d, off + 16))
        off += 16 + 8 * nr
    return out
before, after = read(sys.argv[1]), read(sys.argv[2])
assert before, "no stacks before the kill"
for sid, (ref, ips) in before.items():
    assert sid in after, f"stack_id {sid} lost"
    assert after[sid][1] == ips, f"stack_id {sid} now names another stack"
    assert after[sid][0] >= ref, f"stack_id {sid} count went back"
PYEOF
check "the reset count survived too" '[ "$(stat_of resets)" = 1 ]'

# --- reload with another event list ------------------------------------------------
inside sed -i 's/^event = .*/event = ["kmem:kmem_cache_alloc", "sched:sched_switch"]/' /etc/stackmapd/stackmapd.conf
pid=$(main_pid)
inside systemctl reload stackmapd
rc=$?
check "systemctl reload" '[ $rc -eq 0 ]'
check "reload kept the process ($pid)" '[ "$(main_pid)" = "$pid" ]'
check "reload re-attached, table kept" \
  'inside journalctl -u stackmapd -o cat |
     grep -q "reloaded /etc/stackmapd/stackmapd.conf: tracing kmem:kmem_cache_alloc, sched:sched_switch (table kept)"'
load
check "sched_switch stacks now arrive" 'inside stackmapd ctl top 100000 | grep -q "^    __schedule+"'
inside sed -i 's/^bits = .*/bits = 99/' /etc/stackmapd/stackmapd.conf
inside systemctl reload stackmapd 2> /dev/null
rc=$?
check "systemctl reload fails on a bad config" '[ $rc -ne 0 ]'
# It still answers (a daemon that dies on the refusal can look active to systemd for a moment).
check "and the daemon keeps running" \
  'inside stackmapd ctl stat > /dev/null && [ "$(inside systemctl is-active stackmapd)" = active ] &&
   [ "$(main_pid)" = "$pid" ]'
check "saying what is wrong" 'inside journalctl -u stackmapd -o cat | grep -q "bits 99 is out of range"'
refusals=$(journal_count "reload failed, keeping the running configuration")
signal_main HUP "$pid"
check "SIGHUP with a bad config is refused the same way" \
  'wait_journal "reload failed, keeping the running configuration" $((refusals + 1))'
inside sed -i 's/^bits = .*/bits = 14/' /etc/stackmapd/stackmapd.conf

# --- one daemon per runtime directory ----------------------------------------------
second=$(inside timeout 10 stackmapd daemon 2>&1)
check "a second daemon refuses ($second)" 'grep -q "another stackmapd (pid $(main_pid)) already runs on /run/stackmapd" <<< "$second"'

# --- the watchdog ---------------------------------------------------------------------
pid=$(main_pid)
before=$(restarts)
signal_main STOP "$pid"
wait_active_pid "$pid"
sleep 0.5
check "the watchdog killed the stopped daemon and systemd restarted it" '[ "$(restarts)" -gt "$before" ]'
check "the journal says why" 'inside journalctl -u stackmapd -o cat | grep -q "Watchdog timeout"'

# --- stop -------------------------------------------------------------------------------
check "the running daemon's table is pinned in /sys/fs/bpf/stackmapd" 'inside test -e /sys/fs/bpf/stackmapd'
inside systemctl stop stackmapd
check "systemctl stop" '[ "$(inside systemctl is-active stackmapd)" = inactive ]'
check "a clean stop removes the pinned table (keep-pins = false)" 'inside test ! -e /sys/fs/bpf/stackmapd'

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

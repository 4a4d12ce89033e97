#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A failed reload leaves the daemon exactly as it was: the
# same session, config and attached events, still counting, `ctl stat`
# answering. Each refused reload below fails at another stage:
#   - the new session cannot be built: `pinned = /nonexistent`;
#   - the new session cannot be built: `bits = 20` needs ~530 MiB of maps,
#     more than the memory cgroup the daemon runs in allows (a real limit on
#     phones and in containers);
#   - the re-attach fails: ftrace:print is in tracefs (so the config passes
#     its checks) but BPF cannot attach to ftrace's own events.
# Then reloads that should work still do. As root on a BPF-capable kernel.
#   reload_test.sh STACKMAPD
set -u
BIN=$1

tmp=$(mktemp -d /tmp/A-reload.XXXXXX)
chmod 755 "$tmp"
cg=/sys/fs/cgroup/memory/stackmapd-reload-test-$$
pid= load_pid=
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2> /dev/null
  [ -n "$pid" ] && kill -9 "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  [ -d "$cg" ] && rmdir "$cg" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

conf=$tmp/stackmapd.conf
run=$tmp/run
base='snapshot-interval = 0.5'
ctl() { timeout 10 "$BIN" --socket "$run/control.sock" ctl "$@" 2>&1; }
stat_now() { ctl stat | awk -v f="$1:" '$1 == f { print $2 }'; }

( while :; do for _ in $(seq 200); do cat /proc/self/stat > /dev/null; done; done ) &
load_pid=$!

# The daemon runs in a memory cgroup of 256 MiB: room for its default table
# (~17 MiB of maps), not for 2^20 stacks. cgroup v1 here; v2 where mounted so.
if [ -d /sys/fs/cgroup/memory ]; then
  mkdir -p "$cg" && echo $((256 << 20)) > "$cg/memory.limit_in_bytes"
else
  cg=/sys/fs/cgroup/stackmapd-reload-test-$$
  echo +memory > /sys/fs/cgroup/cgroup.subtree_control 2> /dev/null
  mkdir -p "$cg" && echo $((256 << 20)) > "$cg/memory.max"
fi
check "a memory cgroup for the daemon ($cg)" '[ -w "$cg/cgroup.procs" ]'

# A daemon of its own for each case, so that each shows its own failure.
start_daemon() {
  printf '%s\nevent = ["kmem:kmem_cache_alloc"]\n' "$base" > "$conf"
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
    "$BIN" daemon --config "$conf" --export-dir "$run" --pin-dir "" 2>> "$tmp/daemon.err" &
  pid=$!
  for _ in $(seq 100); do
    [ -n "$(stat_now events)" ] && break
    sleep 0.1
  done
}

stop_daemon() {  # stop_daemon LABEL
  local rc
  kill -TERM "$pid" 2> /dev/null
  wait "$pid"
  rc=$?
  pid=
  check "$1: the daemon stops cleanly on SIGTERM (exit $rc)" '[ "$rc" -eq 0 ]'
}

# The daemon lives, answers `ctl stat`, its table is the one configured, and
# its events keep growing: the same events are still attached.
still_counting() {  # still_counting LABEL TABLE_SIZE
  local before after size want=$2
  before=$(stat_now events)
  sleep 1
  after=$(stat_now events)
  size=$(stat_now table_size)
  check "$1: the daemon is alive" 'kill -0 "$pid" 2> /dev/null'
  check "$1: ctl stat answers (events $before -> $after)" '[ -n "$before" ] && [ -n "$after" ]'
  check "$1: events are still counted" '[ "${after:-0}" -gt "${before:-0}" ]'
  check "$1: the table is the one configured (table_size $size)" '[ "$size" = "$want" ]'
}

reload_fails() {  # reload_fails LABEL CONFIG_LINES...: that reload is refused, nothing changes
  local label=$1 reply
  shift
  start_daemon
  still_counting "$label, before" 32768
  printf '%s\n' "$base" "$@" > "$conf"
  reply=$(ctl reload)
  check "$label: the reload is refused ($reply)" \
    'grep -q "reload failed, keeping the running configuration" <<< "$reply"'
  sleep 1.5  # the old code died a moment after its reply
  still_counting "$label" 32768
  stop_daemon "$label"
}

reload_fails "pinned = /nonexistent" 'event = ["kmem:kmem_cache_alloc"]' 'pinned = /nonexistent'
reload_fails "bits = 20 in a 256 MiB cgroup" 'event = ["kmem:kmem_cache_alloc"]' 'bits = 20'
reload_fails "event ftrace:print cannot attach" 'event = ["ftrace:print", "kmem:kmem_cache_alloc"]'
check "the failed re-attach is named in the log" 'grep -q "ftrace:print" "$tmp/daemon.err"'
reload_fails "by = nosuchkey" 'event = ["kmem:kmem_cache_alloc"]' 'by = nosuchkey'
reload_fails "sum = nosuchfield" 'event = ["kmem:kmem_cache_alloc"]' 'sum = nosuchfield'

# Reloads that can work still do: events alone (the table kept), then a new table.
start_daemon
printf '%s\nevent = ["kmem:kmem_cache_alloc", "kmem:kmalloc"]\n' "$base" > "$conf"
reply=$(ctl reload)
check "a good reload of the events works ($reply)" 'grep -q "(table kept)" <<< "$reply"'
still_counting "after the events' reload" 32768
printf '%s\nevent = ["kmem:kmem_cache_alloc"]\nbits = 12\n' "$base" > "$conf"
reply=$(ctl reload)
check "a good reload to bits = 12 works ($reply)" 'grep -q "(new table)" <<< "$reply"'
still_counting "after the new table" 8192
# Attribution from the config file: a new session, and `ctl top` splits by it.
printf '%s\nevent = ["kmem:kmem_cache_alloc"]\nby = comm\nsum = bytes_alloc\n' "$base" > "$conf"
reply=$(ctl reload)
check "a good reload to by = comm, sum = bytes_alloc works ($reply)" \
  'grep -q "(new table)" <<< "$reply"'
still_counting "after the attribution reload" 32768
top=$(ctl top 3)
check "ctl top ranks by bytes_alloc and splits each stack by comm" \
  'grep -q "bytes_alloc" <<< "$top" && grep -q "^  by comm:" <<< "$top"'
# --user-stacks is fixed in the BPF object: turning it on takes a new
# session (stat may lag: the user stacks are resolved by the resolver's
# worker thread, daemon/resolve/user_stacks.h).
printf '%s\nevent = ["kmem:kmem_cache_alloc"]\nby = comm\nsum = bytes_alloc\nuser-stacks = true\n' "$base" > "$conf"
ctl reload > /dev/null
for _ in $(seq 30); do [ -n "$(stat_now user_entries)" ] && break; sleep 1; done
check "after a reload to user-stacks = true, ctl stat counts user stacks" '[ -n "$(stat_now user_entries)" ]'
stop_daemon "good reloads"
[ "$failures" -eq 0 ] || { echo "--- daemon log"; tail -n 30 "$tmp/daemon.err"; }

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

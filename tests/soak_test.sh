#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Untrusted input and overload at once, as root on this kernel,
# in about 60 s: the daemon as a Type=notify service (NOTIFY_SOCKET and
# WATCHDOG_USEC as the unit's WatchdogSec=10 sets them, --by comm, --listen
# on loopback, its control socket) traces kmem:* under stress-ng while
# 32 TCP and 16 control clients trickle their requests a byte a second,
# 32 concurrent GET /stack_map.json arrive at once (twice), 200 SIGHUPs come
# 50 ms apart and a process named b"\xff-x" allocates. A checker asks
# /metrics and `stat` every 0.5 s as a well-behaved client would.
# Asserts: no watchdog gap of 10 s, every checker request answered within
# 1 s, events counted in every 5 s window, RSS and fds under the bounds
# below, exit 0 on SIGTERM. Prints the figures.
#   soak_test.sh STACKMAPD [PYTHON]
# SOAK_WITHOUT="slow burst storm badname" (any of them) leaves parts of the
# attack out, to tell which part breaks what; CI runs them all.
set -u
BIN=$1
PY=${2:-python3}
AGENTS=$(dirname "$0")/soak_agents.py

# Bounds: the daemon at rest is ~30 MB; the store's key pairs are capped at
# 3 MiB; two whole JSON documents may be built at once (the timed export's and
# HTTP's shared one), each ~11x its text; HTTP sends one shared buffer.
MAX_RSS_MB=224
MAX_FDS=128

tmp=$(mktemp -d /tmp/S-soak.XXXXXX)
chmod 755 "$tmp"
pid= agents=()
cleanup() {
  for p in "${agents[@]}"; do kill "$p" 2> /dev/null; done
  [ -n "$pid" ] && kill -9 "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

check "stress-ng is installed (scripts/deps.sh)" 'command -v stress-ng > /dev/null'
P_HTTP=19491
hp=127.0.0.1:$P_HTTP
run=$tmp/run
sock=$run/control.sock
conf=$tmp/stackmapd.conf
printf 'snapshot-interval = 1\nevent = ["kmem:*"]\nby = "comm"\nlisten = "%s"\n' "$hp" > "$conf"

"$PY" "$AGENTS" notify "$tmp/notify" "$tmp/notify.out" &
notify=$!
agents+=($notify)
for _ in $(seq 50); do [ -S "$tmp/notify" ] && break; sleep 0.1; done
NOTIFY_SOCKET=$tmp/notify WATCHDOG_USEC=10000000 \
  "$BIN" daemon --config "$conf" --export-dir "$run" --pin-dir "" 2> "$tmp/daemon.err" &
pid=$!
for _ in $(seq 150); do
  kill -0 "$pid" 2> /dev/null || break
  [ -S "$sock" ] && curl -s -o /dev/null --max-time 1 "http://$hp/metrics" && break
  sleep 0.1
done
check "the daemon starts and serves /metrics on $hp" 'curl -s -o /dev/null --max-time 5 "http://$hp/metrics"'
if ! kill -0 "$pid" 2> /dev/null; then
  cat "$tmp/daemon.err"
  exit 1
fi

without() { [[ " ${SOAK_WITHOUT:-} " == *" $1 "* ]]; }
[ -n "${SOAK_WITHOUT:-}" ] && echo "left out: $SOAK_WITHOUT"

# The load, the bad name and the well-behaved checker, for the whole run.
LOAD_S=45
stress-ng --fork 1 --vm 1 --vm-bytes 64M --timeout "${LOAD_S}s" --quiet > "$tmp/stress.out" 2>&1 &
agents+=($!)
if ! without badname; then
  "$PY" "$AGENTS" badname "$LOAD_S" &
  agents+=($!)
fi
"$PY" "$AGENTS" checker "$hp" "$sock" "$pid" "$tmp/checker.out" &
checker=$!
agents+=($checker)
sleep 3  # stacks to export before the attack

# The attack: trickling clients throughout, a burst of big requests, the
# signal storm, another burst while it lasts.
if ! without slow; then
  "$PY" "$AGENTS" slow "$hp" "$sock" 32 16 $((LOAD_S - 8)) &
  agents+=($!)
fi
burst() {
  without burst && return
  for i in $(seq 32); do
    curl -s -o /dev/null --max-time 60 -w '%{http_code} %{size_download}\n' \
      "http://$hp/stack_map.json" >> "$tmp/burst.out" &
  done
}
sleep 2
burst
sleep 3
for _ in $(seq 200); do
  without storm && break
  kill -HUP "$pid" 2> /dev/null
  sleep 0.05
done &
storm=$!
sleep 4
burst
wait "$storm"
sleep $((LOAD_S - 3 - 2 - 3 - 4 - 11))

# The gaps up to now: the stop that follows sends no pings.
kill "$checker" "$notify"
wait "$checker" "$notify"
kill -TERM "$pid"
rc=timeout
for _ in $(seq 200); do
  if ! kill -0 "$pid" 2> /dev/null; then
    wait "$pid"
    rc=$?
    pid=
    break
  fi
  sleep 0.1
done
for p in "${agents[@]}"; do kill "$p" 2> /dev/null; done
wait 2> /dev/null

fig() { awk -v k="$1" '$1 == k {print $2}' "$tmp/checker.out" "$tmp/notify.out"; }
echo "figures: max watchdog gap $(fig max_watchdog_gap_s) s ($(fig watchdog_pings) pings)," \
  "/metrics max $(fig metrics_max_s) s ($(fig metrics_bad) of $(fig metrics_n) late or failed)," \
  "stat max $(fig stat_max_s) s ($(fig stat_bad) of $(fig stat_n) late or failed)," \
  "RSS $(($(fig first_rss_kb) / 1024)) -> peak $(($(fig peak_rss_kb) / 1024)) MB," \
  "peak fds $(fig peak_fds), $(fig events_per_s) events/s," \
  "checker errors: $(fig errors), big GETs (count, status): $(sort "$tmp/burst.out" 2> /dev/null | awk '{print $1}' | uniq -c | tr '\n' ' ')"
check "the watchdog heard within 10 s all along (max gap $(fig max_watchdog_gap_s) s)" \
  'awk "BEGIN {exit !($(fig max_watchdog_gap_s) < 10 && $(fig watchdog_pings) > 3)}"'
check "every /metrics answered within 1 s ($(fig metrics_bad) of $(fig metrics_n) not)" \
  '[ "$(fig metrics_bad)" = 0 ] && [ "$(fig metrics_n)" -gt 40 ]'
check "every stat answered within 1 s ($(fig stat_bad) of $(fig stat_n) not)" \
  '[ "$(fig stat_bad)" = 0 ] && [ "$(fig stat_n)" -gt 40 ]'
check "events counted in every 5 s window ($(fig event_windows_stalled) stalled, $(fig events_per_s)/s)" \
  '[ "$(fig event_windows_stalled)" = 0 ] && [ "$(fig events_per_s)" -gt 1000 ]'
check "peak RSS under $MAX_RSS_MB MB ($(($(fig peak_rss_kb) / 1024)) MB)" \
  '[ "$(fig peak_rss_kb)" -lt $((MAX_RSS_MB * 1024)) ]'
check "peak fds under $MAX_FDS ($(fig peak_fds))" '[ "$(fig peak_fds)" -lt "$MAX_FDS" ]'
check "SIGTERM ends it with exit 0 (exit $rc)" '[ "$rc" = 0 ]'
check "it said nothing of a crash" '! grep -qiE "terminate called|abort|what\(\)" "$tmp/daemon.err"'
if [ "$failures" -ne 0 ]; then
  echo "--- daemon log (last 20 lines)"
  grep -v "matched .* tracepoints\|^stackmapd: reloaded" "$tmp/daemon.err" | tail -20
fi
echo "$failures failure(s)"
[ "$failures" -eq 0 ]

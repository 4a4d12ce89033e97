#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Untrusted clients and overload against the real daemon, as root on this
# kernel:
#   - slowloris: 32 TCP and 16 control clients trickling their request at
#     ~1 byte/s keep no well-behaved one out: /metrics and ctl stat each
#     answer within 1 s, every time;
#   - a burst: 32 concurrent GET /stack_map.json on a table of thousands of
#     stacks, all answered (a few after a 503's Retry-After); meanwhile /metrics and ctl stat answer within 1 s and the
#     watchdog (WATCHDOG_USEC=2 s: a ping a second) never misses 3 s;
#   - --user-stacks over TCP: no value of /stack_map.json is a raw address,
#     kernel or user, while a unix socket still serves them.
# Figures (latencies, VmHWM, the burst's time) go to the log. The timed
# export is left out (snapshot-interval 3600): it formats every export on the
# loop, a stall of its own that is not a client's doing.
#   overload_test.sh STACKMAPD USTACK_WORKLOAD [PYTHON]
set -u
BIN=$1
WORKLOAD=$2
PY=${3:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)

tmp=$(mktemp -d /tmp/H-overload.XXXXXX)
chmod 755 "$tmp"
pid= npid= wpid= fpid=
stop_daemon() {
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  pid=
}
cleanup() {
  for p in $fpid $wpid $npid; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null; done
  stop_daemon
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$HERE/check_lib.sh"

P_HTTP=  # the kernel's choice (listen on port 0), read from the daemon's log
run=$tmp/run
conf=$tmp/stackmapd.conf
sock=$run/control.sock
url=
code() { curl -s -o /dev/null --max-time 10 -w '%{http_code}' "$@"; }
figure() { awk -v k="$1" '$1 == k {print $2}' "$2"; }  # figure NAME FILE

"$PY" "$HERE/overload_clients.py" notify "$tmp/notify.sock" "$tmp/notify.log" &
npid=$!
start_daemon() {  # start_daemon CONFIG_LINE...: the daemon, pinging the watchdog
  printf '%s\n' "$@" > "$conf"
  NOTIFY_SOCKET=$tmp/notify.sock WATCHDOG_USEC=2000000 \
    "$BIN" daemon --config "$conf" --export-dir "$run" --pin-dir "" 2> "$tmp/daemon.err" &
  pid=$!
  for _ in $(seq 100); do
    kill -0 "$pid" 2> /dev/null || break
    P_HTTP=$(sed -nE 's/.*HTTP endpoints on 127\.0\.0\.1:([0-9]+).*/\1/p' "$tmp/daemon.err")
    url=http://127.0.0.1:$P_HTTP
    [ -n "$P_HTTP" ] && [ "$(code --max-time 1 "$url/metrics")" = 200 ] && [ -S "$sock" ] && break
    sleep 0.1
  done
  check "the daemon serves /metrics and its control socket ($(tail -1 "$tmp/daemon.err"))" \
    '[ "$(code "$url/metrics")" = 200 ] && [ -S "$sock" ]'
}
# Diverse kernel activity: many distinct stacks on the busy tracepoints (bench/run.py's filler).
filler() {
  while :; do
    ls -lR /sys/kernel/mm /proc/sys/net > /dev/null 2>&1
    cat /proc/self/maps /proc/slabinfo /proc/net/* > /dev/null 2>&1
    find /usr/lib -maxdepth 2 -newer /etc/hostname > /dev/null 2>&1
    tar cf - /usr/share/doc 2> /dev/null | head -c 2000000 > /dev/null
  done
}

# --- slowloris and a burst, on a big table ----------------------------------
start_daemon 'event = ["kmem:kmem_cache_alloc", "kmem:kmalloc", "kmem:kfree", "sched:sched_switch", "sched:sched_wakeup", "timer:timer_start"]' \
  'by = "comm,pid"' 'listen = "127.0.0.1:0"' 'snapshot-interval = 3600'
filler > /dev/null 2>&1 &
fpid=$!
sleep 12  # the table fills with thousands of stacks

"$PY" "$HERE/overload_clients.py" slowloris "$P_HTTP" "$sock" 8 > "$tmp/slow.out" 2>&1
echo "slowloris: $(tr '\n' ' ' < "$tmp/slow.out")"
for what in metrics stat; do
  worst=$(figure ${what}_worst_s "$tmp/slow.out")
  failed=$(figure ${what}_failed "$tmp/slow.out")
  check "beside 32 TCP and 16 control tricklers every $what answers, within 1 s (worst ${worst} s, $failed failed)" \
    '[ "$failed" = 0 ] && awk "BEGIN {exit !($worst < 1)}"'
done

"$PY" "$HERE/overload_clients.py" burst "$P_HTTP" "$sock" "$tmp/notify.log" "$pid" > "$tmp/burst.out" 2>&1
echo "burst: $(tr '\n' ' ' < "$tmp/burst.out")"
check "32 concurrent /stack_map.json all answered ($(figure burst_ok "$tmp/burst.out") of 32, $(figure stacks "$tmp/burst.out") stacks)" \
  '[ "$(figure burst_ok "$tmp/burst.out")" = 32 ] && [ "$(figure stacks "$tmp/burst.out")" -ge 2000 ]'
for what in metrics stat; do
  worst=$(figure ${what}_worst_s "$tmp/burst.out")
  failed=$(figure ${what}_failed "$tmp/burst.out")
  check "during the burst every $what answers, within 1 s (worst ${worst} s, $failed failed)" \
    '[ "$failed" = 0 ] && awk "BEGIN {exit !($worst < 1)}"'
done
gap=$(figure watchdog_gap_s "$tmp/burst.out")
check "the watchdog is pinged throughout the burst (longest gap ${gap} s, period 1 s)" \
  'awk "BEGIN {exit !($gap < 3)}"'
kill "$fpid" 2> /dev/null && wait "$fpid" 2> /dev/null
fpid=
check "the daemon lived through it" 'kill -0 "$pid" && [ "$(code "$url/metrics")" = 200 ]'
stop_daemon

# --- no raw address over TCP with --user-stacks -------------------------------
W=$tmp/ustack_copy
cp "$WORKLOAD" "$W"
"$W" 60 > "$tmp/w.out" &
wpid=$!
start_daemon 'event = ["kmem:kmem_cache_alloc"]' 'user-stacks = true' 'listen = "127.0.0.1:0"'
sleep 3
curl -s --max-time 30 "$url/stack_map.json" > "$tmp/tcp.json"
printf '%s\n' 'event = ["kmem:kmem_cache_alloc"]' 'user-stacks = true' "listen = \"unix:$run/http.sock\"" > "$conf"
timeout 10 "$BIN" --socket "$sock" ctl reload > /dev/null 2>&1
curl -s --max-time 30 --unix-socket "$run/http.sock" http://x/stack_map.json > "$tmp/unix.json"
"$PY" - "$tmp/tcp.json" "$tmp/unix.json" > "$tmp/addr.out" 2>&1 << 'PYEOF'
import json, re, sys
tcp_text = open(sys.argv[1]).read()
tcp, unix = json.loads(tcp_text), json.loads(open(sys.argv[2]).read())
# A raw address: a kernel one (0xffff...) or a user one (PIE and libraries
# live far above 256 MiB); file offsets and ELF addresses stay below.
def raw(v):
    return isinstance(v, str) and re.fullmatch(r"0x[0-9a-f]+", v) and int(v, 16) >= 1 << 28
def values(j, key=None):
    if isinstance(j, dict):
        for k, v in j.items():
            yield from values(v, k)
    elif isinstance(j, list):
        for v in j:
            yield from values(v, key)
    else:
        yield key, j
user_frames = sum(len(s["frames"]) for s in tcp.get("user_stacks", {}).get("stacks", []))
print("tcp_user_frames", user_frames)
print("tcp_raw", sum(1 for k, v in values(tcp) if raw(v)), [k for k, v in values(tcp) if raw(v)][:5])
unix_raw = {v for k, v in values(unix) if raw(v)}
print("unix_raw", len(unix_raw))
print("unix_user_addresses", sum(1 for k, v in values(unix) if k == "address" and raw(v)))
print("unix_raw_in_tcp", sum(1 for v in unix_raw if v in tcp_text))
PYEOF
echo "addresses: $(tr '\n' ' ' < "$tmp/addr.out")"
check "over TCP the export has user stacks ($(figure tcp_user_frames "$tmp/addr.out") frames)" \
  '[ "$(figure tcp_user_frames "$tmp/addr.out")" -gt 0 ]'
check "and no value in it is a raw address ($(grep tcp_raw "$tmp/addr.out"))" \
  '[ "$(figure tcp_raw "$tmp/addr.out")" = 0 ]'
check "nor any address the unix socket serves ($(figure unix_raw_in_tcp "$tmp/addr.out"))" \
  '[ "$(figure unix_raw_in_tcp "$tmp/addr.out")" = 0 ]'
check "through the unix socket the addresses stay, user frames' included" \
  '[ "$(figure unix_raw "$tmp/addr.out")" -gt 0 ] && [ "$(figure unix_user_addresses "$tmp/addr.out")" -gt 0 ]'

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "the daemon stops cleanly (exit $rc)" '[ "$rc" -eq 0 ]'
echo "$failures failure(s)"
[ "$failures" -eq 0 ]

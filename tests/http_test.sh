#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The daemon's HTTP endpoints against their real consumers, as
# root on this kernel: promtool lints /metrics and the textfile; a real
# Prometheus scrapes the daemon every second and the test reads a series
# back through its API; node-exporter's textfile collector reads the
# textfile without error; headless Chromium loads the live page and its DOM
# shows the counters, and /flame.json's heaviest path the event's kernel
# function (a screenshot is kept in ARTIFACTS; tests/page_test.sh drives the
# page itself); go's pprof reads the delta profile of
# /debug/pprof/stackmapd?seconds=2 and names the top kernel function. Then what must fail does: POST, an oversized head, a
# body, a client that never ends its head, one that never reads, more
# connections than the cap; a bad listen address on reload keeps the old one.
#   http_test.sh STACKMAPD ARTIFACTS_DIR [PYTHON]
set -u
BIN=$1
ART=$2
PY=${3:-python3}

tmp=$(mktemp -d /tmp/H-http.XXXXXX)
chmod 755 "$tmp"
pid= prom= nodex=
cleanup() {
  for p in $prom $nodex; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null; done
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

# Ports of this test only (9464 is the documented default for users).
P_HTTP=19481 P_HTTP2=19482 P_PROM=19483 P_NODE=19484
run=$tmp/run
conf=$tmp/stackmapd.conf
textdir=$tmp/textfile
mkdir -p "$textdir"
url=http://127.0.0.1:$P_HTTP
ctl() { timeout 10 "$BIN" --socket "$run/control.sock" ctl "$@" 2>&1; }
get() { curl -sS --max-time 10 "$@"; }
code() { http_code "$@"; }

PPROF=/usr/lib/go-1.19/pkg/tool/linux_amd64/pprof
export PPROF_TMPDIR=$tmp
for tool in promtool prometheus prometheus-node-exporter chromium curl "$PPROF"; do
  check "$tool is installed (scripts/deps.sh)" 'command -v "$tool" > /dev/null'
done

write_conf() {  # write_conf LISTEN
  printf 'snapshot-interval = 2\nevent = ["kmem:kmem_cache_alloc"]\nby = "comm,pid"\nlisten = "%s"\nmetrics-textfile = "%s"\n' \
    "$1" "$textdir/stackmapd.prom" > "$conf"
}
write_conf "127.0.0.1:$P_HTTP"
"$BIN" daemon --config "$conf" --export-dir "$run" --pin-dir "" 2> "$tmp/daemon.err" &
pid=$!
wait_http "$pid" "$url"
check "the daemon serves /metrics on 127.0.0.1:$P_HTTP" '[ "$(code "$url/metrics")" = 200 ]'
check "it says where in its log" 'grep -q "HTTP endpoints on 127.0.0.1:$P_HTTP" "$tmp/daemon.err"'
sleep 3  # a few snapshots: events, stacks, the textfile

# /metrics: the text format as promtool reads it, with the series we promise.
get "$url/metrics" > "$tmp/metrics.txt"
promtool check metrics < "$tmp/metrics.txt" > "$tmp/promtool.out" 2>&1
rc=$?
check "promtool check metrics accepts /metrics (exit $rc: $(head -3 "$tmp/promtool.out"))" '[ "$rc" -eq 0 ]'
for series in 'stackmapd_events_total [1-9]' 'stackmapd_source_events_total{source="kmem:kmem_cache_alloc"} [1-9]' \
  'stackmapd_drops_total{reason="pool_full"} ' 'stackmapd_unique_stacks [1-9]' 'stackmapd_pool_fill_ratio 0\.' \
  'stackmapd_resets_total 0' 'stackmapd_verify_total{result="ok"} ' 'stackmapd_ringbuf_fill_ratio ' \
  'stackmapd_bpf_program_runs_total{program="tracepoint"} ' 'process_cpu_seconds_total ' \
  'process_resident_memory_bytes [1-9]' 'process_open_fds [1-9]' 'process_start_time_seconds [1-9]' \
  "stackmapd_build_info{version=\"[0-9.]*\",revision=\"$(git -C "$(dirname "$0")/.." describe --always --dirty --abbrev=12 2> /dev/null || echo unknown)\"} 1"; do
  check "/metrics has $series" 'grep -q "^$series" "$tmp/metrics.txt"'
done
check "/metrics has no stack id, pid or comm label" '! grep -qE "stack_id|pid=|comm=" "$tmp/metrics.txt"'
check "/metrics says its content type" \
  'curl -sI --max-time 5 "$url/metrics" | grep -qi "^content-type: text/plain; version=0.0.4"'

# bpf_stats_enabled: the programs' run time counts only while it is set.
old_stats=$(cat /proc/sys/kernel/bpf_stats_enabled)
echo 1 > /proc/sys/kernel/bpf_stats_enabled
sleep 1
get "$url/metrics" > "$tmp/metrics2.txt"
echo "$old_stats" > /proc/sys/kernel/bpf_stats_enabled
check "with kernel.bpf_stats_enabled the programs' run time shows" \
  'grep -qE "^stackmapd_bpf_program_run_seconds_total\{program=\"tracepoint\"\} [0-9.e-]*[1-9]" "$tmp/metrics2.txt" && grep -q "^stackmapd_bpf_stats_enabled 1" "$tmp/metrics2.txt"'

# The textfile: promtool, then node-exporter's own collector.
check "the textfile is written" '[ -s "$textdir/stackmapd.prom" ]'
promtool check metrics < "$textdir/stackmapd.prom" > "$tmp/promtool2.out" 2>&1
rc=$?
check "promtool check metrics accepts the textfile (exit $rc: $(head -3 "$tmp/promtool2.out"))" '[ "$rc" -eq 0 ]'
check "no temporary files are left beside it" '[ "$(ls "$textdir")" = stackmapd.prom ]'
prometheus-node-exporter --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$textdir" --web.listen-address="127.0.0.1:$P_NODE" \
  > "$tmp/node.log" 2>&1 &
nodex=$!
for _ in $(seq 50); do
  get "http://127.0.0.1:$P_NODE/metrics" > "$tmp/node.txt" 2> /dev/null && grep -q textfile "$tmp/node.txt" && break
  sleep 0.2
done
check "node-exporter reads the textfile: node_textfile_scrape_error 0" \
  'grep -q "^node_textfile_scrape_error 0" "$tmp/node.txt"'
check "node-exporter exports stackmapd_events_total from it" 'grep -q "^stackmapd_events_total [1-9]" "$tmp/node.txt"'
# A family named like node-exporter's own (process_*) would be dropped with this in its log.
check "node-exporter gathered every family without error" '! grep -q "error gathering metrics" "$tmp/node.log"'

# A real Prometheus scrapes the daemon; the series comes back through its API.
cat > "$tmp/prometheus.yml" << YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: stackmapd
    static_configs:
      - targets: ['127.0.0.1:$P_HTTP']
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$P_PROM" > "$tmp/prom.log" 2>&1 &
prom=$!
value=
for _ in $(seq 60); do
  value=$(get -G "http://127.0.0.1:$P_PROM/api/v1/query" \
    --data-urlencode 'query=stackmapd_events_total{job="stackmapd"}' 2> /dev/null |
    "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2> /dev/null)
  [ -n "$value" ] && break
  sleep 0.5
done
check "Prometheus scraped stackmapd_events_total from the daemon (value $value)" '[ "${value:-0}" -gt 0 ] 2> /dev/null'
up=$(get -G "http://127.0.0.1:$P_PROM/api/v1/query" --data-urlencode 'query=max_over_time(up{job="stackmapd"}[1m])' |
  "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2> /dev/null)
check "its scrapes succeeded: up was 1 (max_over_time $up)" '[ "$up" = 1 ]'

# /stack_map.json: the JSON export, current, without raw addresses over TCP.
get "$url/stack_map.json" > "$tmp/live.json"
check "/stack_map.json is the JSON export with stacks" \
  '"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"stacks\"] and d[\"stats\"][\"events\"] > 0" "$tmp/live.json"'
check "over TCP it holds no raw address" '! grep -qE "\"ips\"|\"0x[0-9a-f]{8,}" "$tmp/live.json"'

# The delta profile: it takes the seconds asked, go's pprof accepts it, and
# its samples are the events of those seconds, not of the whole session.
start=$(date +%s.%N)
get -o "$tmp/p.pb.gz" -w '%{http_code} %{content_type}' "$url/debug/pprof/stackmapd?seconds=2" > "$tmp/p.code"
took=$(echo "$(date +%s.%N) - $start" | bc)
check "the profile endpoint answers 200 with a body ($(cat "$tmp/p.code"))" '[ "$(cut -d" " -f1 "$tmp/p.code")" = 200 ] && [ -s "$tmp/p.pb.gz" ]'
check "it took the 2 seconds asked (took $took s)" '[ "$(echo "$took >= 2 && $took < 8" | bc)" = 1 ]'
check "pprof -raw accepts it (pprof's own checks)" '"$PPROF" -raw "$tmp/p.pb.gz" > "$tmp/p.raw" 2> "$tmp/p.err"'
"$PPROF" -top -nodecount=5 "$tmp/p.pb.gz" > "$tmp/p.top" 2> /dev/null
check "pprof -top names a kmem_cache_alloc function first" \
  'awk "/flat%/ {getline; print \$NF; exit}" "$tmp/p.top" | grep -q "^kmem_cache_alloc"'
total=$(awk '/^Samples:/ {s = 1; next} /^Locations/ {s = 0} s && /^ *[0-9]+: / {sub(/:.*/, ""); t += $1} END {print t + 0}' "$tmp/p.raw")
session=$(get "$url/stack_map.json" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["stats"]["hits"])')
check "its samples are the 2 seconds' events: 0 < $total < the session's $session" '[ "$total" -gt 0 ] && [ "$total" -lt "$session" ]'
check "its labels leave out pid and tid: comm only" '! grep -qE "pid:|tid:" "$tmp/p.raw" && grep -q "comm:" "$tmp/p.raw"'
check "seconds=0 gets 400" '[ "$(code "$url/debug/pprof/stackmapd?seconds=0")" = 400 ]'
check "seconds=301 gets 400" '[ "$(code "$url/debug/pprof/stackmapd?seconds=301")" = 400 ]'
par=()
for i in 1 2 3 4 5; do
  code "$url/debug/pprof/stackmapd?seconds=4" > "$tmp/par.$i" &
  par+=($!)
done
sleep 1.5  # their first snapshots taken: now they wait on timers
check "while profiles record, /metrics answers" '[ "$(code --max-time 2 "$url/metrics")" = 200 ]'
wait "${par[@]}"
codes=$(for f in "$tmp"/par.*; do cat "$f"; echo; done | sort | tr "\n" " ")
check "a 5th profile at once gets 429 ($codes)" '[ "$codes" = "200 200 200 200 429 " ]'

# The live page in headless Chromium, as the browser built its DOM.
chrome() {  # chrome ARGS... URL
  HOME=$tmp timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$tmp")" --hide-scrollbars "$@" 2> "$tmp/chrome.log"
}
chrome --dump-dom "$url/?refresh=0" > "$tmp/dom.html"
check "the DOM shows the counters" \
  'grep -qE "<th>entries</th><td>[1-9][0-9]* / 16384</td>" "$tmp/dom.html" && grep -qE "<th>hits</th><td>[1-9]" "$tmp/dom.html"'
check "the page loads nothing from elsewhere" '! grep -qE "(src|href)=\"(https?:)?//" "$tmp/dom.html"'
check "the page updates in place, it does not reload itself" '! get "$url/" | grep -q "http-equiv"'
# Its data: the heaviest path of /flame.json runs into the event's kernel function.
top_fn=$(get "$url/flame.json" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
n, path = d["tree"], []
while n[2]:
    n = max(n[2], key=lambda c: c[1])
    path.append(d["names"][n[0]])
print(next((p for p in path if p.startswith("kmem_cache_alloc")), ""))')
check "the heaviest path of /flame.json holds kmem_cache_alloc* (got '$top_fn')" '[[ "$top_fn" == kmem_cache_alloc* ]]'
mkdir -p "$ART"
chrome --screenshot="$ART/http_page.png" --window-size=1280,1600 "$url/?refresh=0"
check "a screenshot of the page is kept: $ART/http_page.png" '[ -s "$ART/http_page.png" ]'

# What must fail, fails, and the loop keeps answering meanwhile.
check "POST gets 405" '[ "$(code -X POST -d x "$url/metrics")" = 405 ]'
check "an unknown path gets 404" '[ "$(code "$url/nope")" = 404 ]'
check "a head past 8 KiB gets 431" '[ "$(code -H "X-Big: $(head -c 9000 /dev/zero | tr "\0" a)" "$url/metrics")" = 431 ]'
check "a request body gets 413" '[ "$(code -X GET --data-binary hello "$url/metrics")" = 413 ]'
check "HEAD gets the headers only" 'curl -sI --max-time 5 "$url/metrics" | grep -q "^HTTP/1.1 200"'
"$PY" - "$P_HTTP" > "$tmp/clients.out" 2>&1 << 'PYEOF'
import socket, sys, time, urllib.request
port = int(sys.argv[1])
def conn(rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s
def quick():
    t = time.time()
    urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read()
    return time.time() - t
slow = conn(); slow.send(b"GET /metr")            # never ends its head
lazy = conn(4096); lazy.send(b"GET / HTTP/1.1\r\n\r\n")  # never reads its page
time.sleep(0.3)
print("quick_with_slow_clients %.2f" % quick())
held = [conn() for _ in range(60)]               # beyond one address' 48 slots
time.sleep(0.3)
evicted = 0
for s in held:
    s.settimeout(0.2)
    try:
        if s.recv(64).startswith(b"HTTP/1.1 408"):
            evicted += 1
    except OSError:
        pass
print("evicted", evicted)
for s in held:
    s.close()
time.sleep(0.3)
print("quick_after_cap %.2f" % quick())
slow.settimeout(10)
t = time.time()
print("slow_got", slow.recv(64).split(b"\r\n")[0].decode(), "after %.1f" % (time.time() - t))
PYEOF
check "a client that never ends its head and one that never reads do not hold up /metrics" \
  'awk "/^quick_with_slow_clients/ {exit !(\$2 < 1)}" "$tmp/clients.out"'
check "beyond one address' 48 connections each newcomer evicts the oldest incomplete one with 408 ($(grep evicted "$tmp/clients.out"))" \
  'awk "/^evicted/ {exit !(\$2 >= 8)}" "$tmp/clients.out"'
check "after the crowd hangs up /metrics answers again" 'awk "/^quick_after_cap/ {exit !(\$2 < 1)}" "$tmp/clients.out"'
check "the client that never ended its head gets 408 (evicted, or at its deadline)" 'grep -q "^slow_got HTTP/1.1 408" "$tmp/clients.out"'
check "the daemon lived through it" 'kill -0 "$pid" && [ "$(code "$url/metrics")" = 200 ]'

# Reload: a bad listen value keeps the old endpoint and says why in one line;
# a good one moves it.
write_conf "127.0.0.1:99999"
ctl reload > "$tmp/reload.out"
check "a reload with listen 127.0.0.1:99999 is refused in one line: $(cat "$tmp/reload.out")" \
  '[ "$(wc -l < "$tmp/reload.out")" -eq 1 ] && grep -q "no port number" "$tmp/reload.out"'
check "the old endpoint still answers" '[ "$(code "$url/metrics")" = 200 ]'
write_conf "127.0.0.1:$P_HTTP2"
ctl reload > "$tmp/reload.out"
check "a reload with a new port moves the endpoint" \
  '[ "$(code "http://127.0.0.1:$P_HTTP2/metrics")" = 200 ] && [ "$(code "$url/metrics")" = 000 ]'
write_conf "unix:$run/http.sock"
ctl reload > "$tmp/reload.out"
check "a unix socket: /metrics answers through it" \
  'curl -s --max-time 5 --unix-socket "$run/http.sock" http://x/metrics | grep -q "^stackmapd_events_total "'
check "the unix socket is 0660" '[ "$(stat -c %a "$run/http.sock")" = 660 ]'
check "through the socket (root and the export group) the JSON keeps its addresses" \
  'curl -s --max-time 5 --unix-socket "$run/http.sock" http://x/stack_map.json | grep -q "\"ips\""'

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "the daemon stops cleanly (exit $rc)" '[ "$rc" -eq 0 ]'
check "and removes its HTTP socket" '[ ! -e "$run/http.sock" ]'
# A port that is taken: the daemon does not start, and says so in one line.
# The holder takes a free port of its own: the test's port may still be held
# (a connection of the stopped daemon's in TIME_WAIT, another program).
"$PY" -c 'import socket,sys,time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1])); __import__("os").rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(30)' "$tmp/taken_port" &
holder=$!
for _ in $(seq 100); do [ -s "$tmp/taken_port" ] && break; sleep 0.1; done
taken=$(cat "$tmp/taken_port" 2> /dev/null)
check "a program holds port ${taken:-none}" '[ -n "$taken" ]'
expect_error "another program listens there" timeout 20 "$BIN" daemon --export-dir "$run" --pin-dir "" \
  --config /dev/null -e kmem:kmem_cache_alloc --listen "127.0.0.1:${taken:-1}"
kill "$holder"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

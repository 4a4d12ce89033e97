#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The daemon's OpenTelemetry push (otlp-endpoint) against a local receiver
# (tests/otlp/receiver.py) that answers 503, then 429 with Retry-After: 2,
# then hangs, then resets the connection, then 200, then 400, then 200 to
# all, as root on this kernel:
#   - the daemon keeps answering /metrics promptly all along (the push has a
#     thread of its own);
#   - the request arrives in the end, POSTed to the path with
#     Content-Type application/x-protobuf, and protoc decodes it
#     (with opentelemetry-proto's own files, tests/otlp/opentelemetry-proto)
#     with samples and no unknown field;
#   - Retry-After is waited for, the hang ends at otlp-timeout, and
#     stackmapd_otlp_requests_total says what each attempt met;
#   - a 400 is dropped, not retried; a bad endpoint stops the start in one line, and
#     on reload is refused in one line, the old push going on.
#   otlp_push_test.sh STACKMAPD [PYTHON]
set -u
BIN=$1
PY=${2:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)

tmp=$(mktemp -d)
chmod 755 "$tmp"
pid= rpid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; [ -n "$rpid" ] && kill "$rpid" 2> /dev/null; wait; rm -rf "$tmp"' EXIT
source "$HERE/check_lib.sh"

P_HTTP=19501 P_OTLP=19502
url=http://127.0.0.1:$P_HTTP
endpoint=http://127.0.0.1:$P_OTLP/v1development/profiles
run=$tmp/run conf=$tmp/stackmapd.conf
mkdir -p "$tmp/got"

# A bad endpoint: the daemon does not start, and says why in one line.
expect_error "https is not supported" timeout 20 "$BIN" daemon --export-dir "$run" --pin-dir "" \
  --otlp-endpoint "https://127.0.0.1:$P_OTLP/v1development/profiles"
expect_error "is not an http:// URL" timeout 20 "$BIN" daemon --export-dir "$run" --pin-dir "" \
  --otlp-endpoint "127.0.0.1:$P_OTLP"

"$PY" "$HERE/otlp/receiver.py" "$P_OTLP" "$tmp/receiver.log" "$tmp/got" 503 429:2 hang reset 200 400 &
rpid=$!
write_conf() {  # write_conf ENDPOINT
  printf 'snapshot-interval = 5\nevent = ["sched:sched_switch"]\nby = "pid,comm,cgroup"\nlisten = "127.0.0.1:%s"\notlp-endpoint = "%s"\notlp-interval = 1\notlp-timeout = 2\n' \
    "$P_HTTP" "$1" > "$conf"
}
write_conf "$endpoint"
"$BIN" daemon --config "$conf" --export-dir "$run" --pin-dir "" 2> "$tmp/daemon.err" &
pid=$!
wait_http "$pid" "$url"
check "the daemon serves /metrics" '[ "$(http_code --max-time 1 "$url/metrics")" = 200 ]'
check "it says where it pushes" 'grep -q "pushing OpenTelemetry profiles to $endpoint every 1 s" "$tmp/daemon.err"'

# /metrics every 0.2 s until the receiver took a request (30 s at most).
slowest=0
start=$(date +%s.%N)
for _ in $(seq 150); do
  t=$(curl -s -o "$tmp/metrics" -w '%{time_total}' --max-time 5 "$url/metrics" || echo 5)
  slowest=$("$PY" -c "print(max($slowest, $t))")
  grep -q ' 200 ' "$tmp/receiver.log" 2> /dev/null && break
  sleep 0.2
done
took=$("$PY" -c "print(round($(date +%s.%N) - $start, 1))")
echo "figures: the request went through after $took s; slowest /metrics ${slowest} s"
echo "receiver: $(awk '{printf "%s ", $2}' "$tmp/receiver.log")"
check "the daemon answered /metrics within 1 s throughout (slowest $slowest s)" \
  '"$PY" -c "import sys; sys.exit(not $slowest < 1)"'
words=$(awk '{printf "%s ", $2}' "$tmp/receiver.log" | cut -d' ' -f1-5)
check "the attempts met 503, 429, a hang, a reset, then 200 ($words)" \
  '[ "$words" = "503 429:2 hang reset 200" ]'
check "each POSTed to the path as application/x-protobuf" \
  '[ "$(awk "\$3 != \"/v1development/profiles\" || \$4 != \"application/x-protobuf\"" "$tmp/receiver.log" | wc -l)" -eq 0 ]'
# gap WORD: seconds from the attempt answered WORD to the next attempt.
gap() { awk -v w="$1" 'p {print $1 - p; exit} $2 == w {p = $1}' "$tmp/receiver.log"; }
echo "figures: gaps after 503 $(gap 503) s, after 429 $(gap 429:2) s, after the hang $(gap hang) s, after the reset $(gap reset) s"
check "after the 503, a backoff of 0.25 to 1 s ($(gap 503) s)" \
  '"$PY" -c "import sys; sys.exit(not 0.2 <= $(gap 503) <= 1.5)"'
check "after the 429, at least its Retry-After: 2 ($(gap 429:2) s)" \
  '"$PY" -c "import sys; sys.exit(not $(gap 429:2) >= 2)"'
check "the hang ends at otlp-timeout, 2 s, then a backoff ($(gap hang) s)" \
  '"$PY" -c "import sys; sys.exit(not 2 <= $(gap hang) <= 6)"'

# The 5th request (0-based 4) is the one the 4 failures were about.
check "the accepted request is the one first refused" 'cmp -s "$tmp/got/0.pb" "$tmp/got/4.pb"'
protoc --decode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest \
  -I "$HERE/otlp/opentelemetry-proto" opentelemetry/proto/collector/profiles/v1development/profiles_service.proto \
  < "$tmp/got/4.pb" > "$tmp/got.txt" 2> "$tmp/got.err"
rc=$?
check "protoc decodes it ($(head -1 "$tmp/got.err"))" '[ $rc -eq 0 ]'
check "it has samples and not one unknown field" \
  'grep -q "samples {" "$tmp/got.txt" && ! grep -Eq "^ *[0-9]+( \{|:)" "$tmp/got.txt"'
check "it holds --by's keys as attributes" \
  'grep -q "string_table: \"process.pid\"" "$tmp/got.txt" && grep -q "string_table: \"thread.name\"" "$tmp/got.txt"'

sleep 1.5  # the counters as /metrics has them after the 200
curl -s --max-time 5 "$url/metrics" > "$tmp/metrics"
counter() { awk -v l="stackmapd_otlp_requests_total{result=\"$1\"}" '$1 == l {print $2}' "$tmp/metrics"; }
echo "figures: $(grep '^stackmapd_otlp' "$tmp/metrics" | tr '\n' ' ')"
words=$(awk '{printf "%s ", $2}' "$tmp/receiver.log" | cut -d' ' -f5-7)
check "a 400 is not retried: the next request is another ($words)" \
  '[ "$words" = "200 400 200" ] && ! cmp -s "$tmp/got/5.pb" "$tmp/got/6.pb"'
check "the 400 was said in one line" '[ "$(grep -c "answered HTTP 400" "$tmp/daemon.err")" -eq 1 ]'
for r in server_error throttled timeout rejected; do
  check "stackmapd_otlp_requests_total{result=\"$r\"} is 1 ($(counter $r))" '[ "$(counter $r)" = 1 ]'
done
check "stackmapd_otlp_requests_total{result=\"network_error\"} counts the reset ($(counter network_error))" \
  '[ "$(counter network_error)" -ge 1 ]'
ok=$(counter ok)
check "stackmapd_otlp_requests_total{result=\"ok\"} counts the 200s ($ok of $(grep -c ' 200 ' "$tmp/receiver.log"))" \
  '[ "${ok:-0}" -ge 1 ] && [ "$ok" -le "$(grep -c " 200 " "$tmp/receiver.log")" ]'
check "stackmapd_otlp_sent_bytes_total counts their bytes" \
  '[ "$(awk "/^stackmapd_otlp_sent_bytes_total/ {print \$2}" "$tmp/metrics")" -gt 0 ]'
check "the failures were said once, and that the push works again" \
  '[ "$(grep -c "retrying with backoff" "$tmp/daemon.err")" -eq 1 ] && grep -q "works again" "$tmp/daemon.err"'

# A reload with a bad endpoint: refused in one line, the push goes on.
before=$(grep -c ' 200 ' "$tmp/receiver.log")
write_conf "https://127.0.0.1:$P_OTLP/v1development/profiles"
kill -HUP "$pid"
sleep 2.5
check "a bad otlp-endpoint on reload is refused, saying why" \
  'grep -q "reload failed, keeping the running configuration: otlp-endpoint https://.*https is not supported" "$tmp/daemon.err"'
check "the push goes on to the old endpoint ($before, then $(grep -c ' 200 ' "$tmp/receiver.log") accepted)" \
  '[ "$(grep -c " 200 " "$tmp/receiver.log")" -gt "$before" ]'

kill -TERM "$pid"
t0=$(date +%s.%N)
wait "$pid"
rc=$?
pid=
check "the daemon stops cleanly and promptly (exit $rc)" \
  '[ $rc -eq 0 ] && "$PY" -c "import sys; sys.exit(not $(date +%s.%N) - $t0 < 5)"'
kill "$rpid" 2> /dev/null
wait "$rpid" 2> /dev/null
rpid=

[ "$failures" -eq 0 ] && echo "otlp_push: all checks passed" || echo "otlp_push: $failures check(s) failed"
[ "$failures" -eq 0 ]

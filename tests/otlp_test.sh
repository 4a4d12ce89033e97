#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --otlp against its consumer's schema, as root on this kernel: protoc
# decodes a session's file (and decode's, from the session's JSON export)
# as an ExportProfilesServiceRequest with not one unknown field (a wrong
# field number shows as a bare number), and what it reads agrees with the
# JSON export: the events total, the off-CPU total, --by's keys as
# attributes, each location once, every index within its table.
# The schema is opentelemetry-proto's own files at the commit
# daemon/export/otlp_protos.h names (tests/otlp/opentelemetry-proto); with
# OTLP_PROTO_SRC=DIR, another checkout of that repository's.
#   otlp_test.sh STACKMAPD [PYTHON]
set -u
BIN=$1
PY=${2:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$HERE/check_lib.sh"
command -v protoc > /dev/null || { fail "protoc is missing: run scripts/deps.sh"; exit 1; }

proto_src=${OTLP_PROTO_SRC:-$HERE/otlp/opentelemetry-proto}
proto=(-I "$proto_src" opentelemetry/proto/collector/profiles/v1development/profiles_service.proto)
type=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
echo "schema: opentelemetry-proto's files under $proto_src"
# j EXPR FILE: a Python expression over the JSON document `d`.
j() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$2"; }

# decoded NAME: protoc's text of $tmp/NAME.pb, and its summary (tests/otlp/summary.py).
decoded() {
  local name=$1  # check's condition sees check's own $1
  protoc --decode="$type" "${proto[@]}" < "$tmp/$name.pb" > "$tmp/$name.txt" 2> "$tmp/$name.protoc"
  local rc=$?
  check "$name: protoc decodes it as $type ($(head -1 "$tmp/$name.protoc"))" '[ $rc -eq 0 ]'
  check "$name: no unknown field (a number protoc does not know)" \
    '[ -s "$tmp/$name.txt" ] && ! grep -Eq "^ *[0-9]+( \{|:)" "$tmp/$name.txt"'
  "$PY" "$HERE/otlp/summary.py" "$tmp/$name.txt" > "$tmp/$name.json"
}

timeout 60 "$BIN" --offcpu --user-stacks --by pid,comm,cgroup --duration 2 --output "$tmp/s" \
  --otlp "$tmp/s.pb" > "$tmp/s.out" 2> "$tmp/s.err"
rc=$?
check "session: 'stackmapd --offcpu --user-stacks --by pid,comm,cgroup --otlp' exits 0 ($(tail -1 "$tmp/s.err"))" \
  '[ $rc -eq 0 ]'
check "session: says where the profile went" 'grep -q "wrote the OpenTelemetry profile to" "$tmp/s.err"'
check "session: the file is private (0640: raw kernel addresses)" \
  '[ "$(stat -c %a "$tmp/s.pb")" = 640 ]'
decoded s
events=$(j 'sum(s["ref_count"] for s in d["stacks"])' "$tmp/s/stack_map.json")
weight=$(j 'sum(s.get("sum", 0) for s in d["stacks"])' "$tmp/s/stack_map.json")
echo "figures: $(cat "$tmp/s.json"); JSON export: $events events, $weight ns; $(stat -c %s "$tmp/s.pb") bytes"
# f EXPR NAME: a figure of $tmp/NAME.json (the summary).
f() { j "$1" "$tmp/$2.json"; }
samples=$(f 'd["samples"]' s)
check "session: some samples ($samples)" '[ "$samples" -gt 0 ]'
check "session: events/count totals the JSON export's events ($events)" \
  '[ "$(f "d[\"totals\"].get(\"events/count\")" s)" = "$events" ]'
check "session: off_cpu/nanoseconds totals the JSON export's weight ($weight)" \
  '[ "$(f "d[\"totals\"].get(\"off_cpu/nanoseconds\")" s)" = "$weight" ]'
keys=$(f '",".join(d["attribute_keys"])' s)
check "session: --by's keys are the attributes, with the kernel's build id ($keys)" \
  '[[ "$keys" =~ ^(process.executable.build_id.gnu,)?process.pid,profile.frame.type,stackmapd.cgroup,thread.name$ ]]'
types=$(f 'd["frame_types"]' s)
check "session: every location's profile.frame.type, kernel where its mapping is ($types)" \
  '[ "$(f "set(d[\"frame_types\"]) == {\"kernel\", \"native\"}" s)" = True ]'
check "session: the scope says its version and both the semantic conventions' schema ($(f 'd["scopes"][0]' s))" \
  '[ "$(f "all(x[\"name\"] == \"stackmapd\" and x[\"version\"] and x[\"schema_url\"] == \"https://opentelemetry.io/schemas/1.37.0\" for x in d[\"scopes\"]) and d[\"resource_schemas\"] == [\"https://opentelemetry.io/schemas/1.37.0\"]" s)" = True ]'
check "session: string_table[0] is \"\", each string once" \
  '[ "$(f "d[\"first_string\"] == \"\" and d[\"strings_unique\"]" s)" = True ]'
check "session: each location once" \
  '[ "$(f "d[\"locations\"] == d[\"distinct_locations\"] > 0" s)" = True ]'
check "session: every index within its table, the kernel's mapping named" \
  '[ "$(f "d[\"indices_ok\"] and d[\"kernel_mapping\"]" s)" = True ]'
# --by pid: a resource per process (otlp.h), which Pyroscope lists as a service each.
check "session: a resource per (pid, comm), each named, host.name on all ($(f 'len(d["resources"])' s) resources)" \
  '[ "$(f "len(d[\"resources\"]) > 1 and all(r.get(\"host.name\") and (\"process.pid\" not in r or r.get(\"process.executable.name\")) for r in d[\"resources\"])" s)" = True ]'
check "session: each sample on its own process's resource ($(f 'd["pid_mismatches"]' s) elsewhere)" \
  '[ "$(f "d[\"pid_mismatches\"]" s)" = 0 ]'
check "session: service.name=stackmapd only where no process is named" \
  '[ "$(f "all((r.get(\"service.name\") == \"stackmapd\") == (\"process.pid\" not in r) for r in d[\"resources\"])" s)" = True ]'
# Pyroscope's name of a profile (convert.go): off_cpu for off_cpu:nanoseconds::,
# else the period type's, which it refuses empty and splits at ':'.
check "session: each profile has a name Pyroscope shows ($(f 'd["profile_types"]' s))" \
  '[ "$(f "\"off_cpu:nanoseconds::\" in d[\"profile_types\"] and all(t == \"off_cpu:nanoseconds::\" or (len(t.split(\":\")) == 4 and t.split(\":\")[2]) for t in d[\"profile_types\"])" s)" = True ]'

# A process in a systemd service's cgroup: its resource is that service (a
# resource per name it had: bash's, before its exec, under load).
cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
svc=smtq-otlp-$$
mkdir -p "$cg2/$svc.service"
"$PY" -c 'import os, time
end = time.time() + 6
while time.time() < end:
    os.close(os.open("/proc/self/stat", os.O_RDONLY))' &
worker=$!
echo $worker > "$cg2/$svc.service/cgroup.procs"
timeout 60 "$BIN" -e syscalls:sys_enter_openat --by pid,comm,cgroup --duration 2 --otlp "$tmp/u.pb" \
  > /dev/null 2> "$tmp/u.err"
rc=$?
timeout 60 "$BIN" -e syscalls:sys_enter_openat --by pid,comm,cgroup --otlp-resources host --duration 1 \
  --otlp "$tmp/h.pb" > /dev/null 2> "$tmp/h.err"
rc_host=$?
kill $worker 2> /dev/null
wait $worker 2> /dev/null
rmdir "$cg2/$svc.service"
check "unit: the session exits 0 ($(tail -1 "$tmp/u.err"))" '[ $rc -eq 0 ]'
decoded u
got=$(f "[r for r in d['resources'] if r.get('process.pid') == $worker]" u)
check "unit: the process in $svc.service is the resource service.name=$svc ($got)" \
  '[ "$(f "sorted({r.get(\"service.name\") for r in d[\"resources\"] if r.get(\"process.pid\") == $worker})" u)" = "['"'"'$svc'"'"']" ]'
check "unit: one source's count is named for its event ($(f 'd["profile_types"]' u))" \
  '[ "$(f "d[\"profile_types\"]" u)" = "['"'"'events:count:sys_enter_openat:count'"'"']" ]'
check "--otlp-resources host: exits 0 ($(tail -1 "$tmp/h.err"))" '[ $rc_host -eq 0 ]'
decoded h
check "--otlp-resources host: one resource, service.name=stackmapd ($(f 'd["resources"]' h))" \
  '[ "$(f "len(d[\"resources\"]) == 1 and d[\"resources\"][0].get(\"service.name\") == \"stackmapd\"" h)" = True ]'

# The same profile from the JSON export, offline.
"$BIN" decode "$tmp/s/stack_map.json" --otlp "$tmp/d.pb" > "$tmp/d.out" 2> "$tmp/d.err"
rc=$?
check "decode: 'stackmapd decode stack_map.json --otlp' exits 0 ($(tail -1 "$tmp/d.err"))" '[ $rc -eq 0 ]'
decoded d
check "decode: the same totals as the session's" \
  '[ "$(f "d[\"totals\"]" d)" = "$(f "d[\"totals\"]" s)" ]'

# Bad input: one line naming the problem, a non-zero exit.
"$BIN" decode "$tmp/s/stack_map.json" --otlp "$tmp/no/such/dir/x.pb" > /dev/null 2> "$tmp/bad.err"
rc=$?
check "bad input: --otlp into a missing directory fails in one line ($(cat "$tmp/bad.err"))" \
  '[ $rc -ne 0 ] && [ "$(wc -l < "$tmp/bad.err")" -eq 1 ] && grep -q -- "--otlp" "$tmp/bad.err"'

timeout 20 "$BIN" --otlp-resources services --duration 1 --otlp "$tmp/x.pb" > /dev/null 2> "$tmp/bad2.err"
rc=$?
check "bad input: --otlp-resources services fails in one line naming the choices ($(cat "$tmp/bad2.err"))" \
  '[ $rc -ne 0 ] && [ "$(wc -l < "$tmp/bad2.err")" -eq 1 ] && grep -q "process" "$tmp/bad2.err" && [ ! -e "$tmp/x.pb" ]'

[ "$failures" -eq 0 ] && echo "otlp: all checks passed" || echo "otlp: $failures check(s) failed"
[ "$failures" -eq 0 ]

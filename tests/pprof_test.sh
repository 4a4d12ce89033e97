#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --pprof against the real consumers, as root on this kernel:
#   1. a session's profile passes pprof's own checks (-raw), -top names the
#      top kernel function our JSON gives, a -proto round trip parses, the
#      samples add up to the session's hits, protoc decodes it with pprof's
#      profile.proto, and --by's keys are its labels (-tags);
#   2. decode of the JSON export gives the same totals and labels; of the
#      FSMB file the same totals, no labels;
#   3. --profile HZ: samples/count and cpu/nanoseconds at 1e9/HZ;
#      --sum: a second sample type whose total is the JSON's sum;
#   4. --user-stacks with tests/workloads/ustack_workload.c: pprof -traces
#      shows main -> one -> two -> three above the kernel frames, each
#      function's -top cum equals the JSON's events, the binary's mapping
#      carries its build id (readelf -n) and path; offline (decode
#      --user-symbols-from) the same, and without the binary's copy the
#      frames stay in that mapping, unresolved;
#   5. bad input: one line naming the problem, a non-zero exit.
#   pprof_test.sh STACKMAPD PYTHON ATTR_WORKLOAD USTACK_WORKLOAD
set -u
BIN=$1
PY=${2:-python3}
WORKLOAD=$3
USTACK=$4
PPROF=/usr/lib/go-1.19/pkg/tool/linux_amd64/pprof
PROTO_DIR=/usr/share/gocode/src/github.com/google/pprof/proto

tmp=$(mktemp -d)
chmod 755 "$tmp"
wpid=
trap '[ -n "$wpid" ] && kill "$wpid" 2> /dev/null; rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"
for tool in "$PPROF" "$PROTO_DIR/profile.proto" "$(command -v protoc)"; do
  [ -e "$tool" ] || { fail "$tool is missing: run scripts/deps.sh"; exit 1; }
done
export PPROF_TMPDIR=$tmp HOME=$tmp  # pprof keeps nothing of ours

# j EXPR FILE: a Python expression over the JSON document `d`.
j() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$2"; }
# session NAME ARGS...: a 2 s session (a workload called smtq_pp runs 2000 stat()s once it has
# attached) into $tmp/NAME.
session() {
  local name=$1
  shift
  cp "$WORKLOAD" "$tmp/smtq_pp"
  # Once attached (its "tracing ..." line): loading takes over a second on a busy machine.
  ( for _ in $(seq 200); do grep -q "tracing" "$tmp/$name.err" 2> /dev/null && break; sleep 0.05; done
    "$tmp/smtq_pp" stat 2000 2> /dev/null ) &
  timeout 30 "$BIN" "$@" --duration 2 --output "$tmp/$name" --pprof "$tmp/$name.pb.gz" \
    > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  wait
  check "$name: 'stackmapd $* --pprof' exits 0 ($(tail -1 "$tmp/$name.err"))" '[ $rc -eq 0 ]'
}

# --- 1. a session's profile, read by pprof and protoc ------------------------
session by -e kmem:kmem_cache_alloc --by comm,pid --top 1
p=$tmp/by.pb.gz
hits=$(counted_of "$tmp/by/stack_map_stat")
check "the profile is gzip, mode 0640 (raw kernel addresses)" \
  '[ "$(head -c2 "$p" | od -An -tx1 | tr -d " ")" = 1f8b ] && [ "$(stat -c %a "$p")" = 640 ]'
"$PPROF" -raw "$p" > "$tmp/by.raw" 2> "$tmp/by.raw.err"
rc=$?
check "pprof -raw accepts it ($(head -1 "$tmp/by.raw.err"))" '[ $rc -eq 0 ] && grep -q "^events/count" "$tmp/by.raw"'
check "its samples add up to the session's hits ($hits)" '[ "$(raw_total "$p")" -eq "${hits:--1}" ] && [ "$hits" -gt 2000 ]'
# The function with the most events at the leaf, from our JSON (symbols "f+0x../0x..").
top_fn=$(j 'max(((sum(s["ref_count"] for s in d["stacks"] if s["symbols"][0].split("+")[0] == f), f) for f in {s["symbols"][0].split("+")[0] for s in d["stacks"]}))[1]' "$tmp/by/stack_map.json")
top_n=$(j "sum(s['ref_count'] for s in d['stacks'] if s['symbols'][0].split('+')[0] == '$top_fn')" "$tmp/by/stack_map.json")
"$PPROF" -top -nodecount=5 "$p" > "$tmp/by.top" 2> "$tmp/by.top.err"
first=$(awk '/flat%/ {getline; print $NF, $1; exit}' "$tmp/by.top")
check "pprof -top names the top kernel function, as our JSON counts it ('$first', want '$top_fn $top_n')" \
  '[ "$first" = "$top_fn $top_n" ]'
leaf=$(awk '/^#1 /{getline; print $1; exit}' "$tmp/by.out")
leaf=${leaf%%+*}
check "the leaf of --top's first stack ($leaf) is a function pprof -top lists" \
  '[ -n "$leaf" ] && "$PPROF" -top -nodecount=100000 "$p" 2> /dev/null | grep -qE " $leaf\$"'
check "the kernel mapping carries the build id of /sys/kernel/notes" \
  'grep -q "\[kernel.kallsyms\]" "$tmp/by.raw" && grep -q "$(j "d[\"kernel\"][\"build_id\"]" "$tmp/by/stack_map.json")" "$tmp/by.raw"'
"$PPROF" -proto "$p" > "$tmp/rt.pb.gz" 2> /dev/null
rc=$?
check "a pprof -proto round trip parses, same total" \
  '[ $rc -eq 0 ] && "$PPROF" -raw "$tmp/rt.pb.gz" > /dev/null 2>&1 && [ "$(raw_total "$tmp/rt.pb.gz")" -eq "$hits" ]'
zcat "$p" | protoc --decode=perftools.profiles.Profile -I "$PROTO_DIR" "$PROTO_DIR/profile.proto" \
  > "$tmp/by.decoded" 2> "$tmp/by.decoded.err"
rc=$?
check "protoc --decode with pprof's profile.proto reads it ($(head -1 "$tmp/by.decoded.err"))" \
  '[ $rc -eq 0 ] && grep -q "^string_table: \"\"" "$tmp/by.decoded" && [ "$(grep -c "^sample {" "$tmp/by.decoded")" -gt 0 ]'
"$PPROF" -tags "$p" > "$tmp/by.tags" 2> /dev/null
check "--by comm,pid: comm labels name the workload (pprof -tags)" \
  'grep -qE "^ *comm: " "$tmp/by.tags" && grep -qE "[0-9] .*smtq_pp\$" "$tmp/by.tags"'
check "--by comm,pid: pid is a numeric label with its unit (pprof -tags)" 'grep -qE "^ *pid: Total" "$tmp/by.tags"'
smtq=$(j "sum(k['count'] for s in d['stacks'] for k in s['by'] if k.get('comm') == 'smtq_pp')" "$tmp/by/stack_map.json")
"$PPROF" -proto -tagfocus=comm=smtq_pp "$p" > "$tmp/smtq.pb.gz" 2> /dev/null
check "comm=smtq_pp samples (pprof -tagfocus) count its JSON events ($smtq, at least its 2000 stat()s)" \
  '[ "$smtq" -ge 2000 ] && [ "$(raw_total "$tmp/smtq.pb.gz")" -eq "$smtq" ]'

# --- 2. decode: from the JSON export (labels) and from FSMB (none) -----------
"$BIN" decode "$tmp/by/stack_map.json" --pprof "$tmp/json.pb.gz" > /dev/null 2> "$tmp/json.err"
rc=$?
check "decode stack_map.json --pprof exits 0 ($(tail -1 "$tmp/json.err"))" '[ $rc -eq 0 ]'
check "decode of the JSON: pprof -raw accepts it, same total ($hits)" \
  '"$PPROF" -raw "$tmp/json.pb.gz" > /dev/null 2>&1 && [ "$(raw_total "$tmp/json.pb.gz")" -eq "$hits" ]'
check "decode of the JSON: the same labels as the session's profile" \
  'diff <("$PPROF" -tags "$tmp/json.pb.gz" 2> /dev/null) "$tmp/by.tags" > /dev/null'
check "decode of the JSON: the same top function" \
  '[ "$("$PPROF" -top -nodecount=5 "$tmp/json.pb.gz" 2> /dev/null | awk "/flat%/ {getline; print \$NF, \$1; exit}")" = "$first" ]'
"$BIN" decode "$tmp/by/stack_map_bin" --pprof "$tmp/fsmb.pb.gz" > "$tmp/fsmb.out" 2> "$tmp/fsmb.err"
rc=$?
check "decode stack_map_bin --pprof exits 0, prints nothing else ($(tail -1 "$tmp/fsmb.err"))" '[ $rc -eq 0 ] && [ ! -s "$tmp/fsmb.out" ]'
check "decode of FSMB: same total ($hits), no labels" \
  '[ "$(raw_total "$tmp/fsmb.pb.gz")" -eq "$hits" ] && ! "$PPROF" -raw "$tmp/fsmb.pb.gz" 2> /dev/null | grep -q "labels:"'

check "decode of FSMB beside its stack_map.kernel (this boot): the running kernel's symbols, the same top function" \
  'grep -q "symbols: the running kernel" "$tmp/fsmb.err" && [ "$("$PPROF" -top -nodecount=5 "$tmp/fsmb.pb.gz" 2> /dev/null | awk "/flat%/ {getline; print \$NF, \$1; exit}")" = "$first" ]'
# Alone, nothing says which boot it is from: no symbols, and pprof shows addresses.
mkdir "$tmp/alone" && cp "$tmp/by/stack_map_bin" "$tmp/alone/"
"$BIN" decode "$tmp/alone/stack_map_bin" --pprof "$tmp/alone.pb.gz" > /dev/null 2> "$tmp/alone.err"
"$PPROF" -top -nodecount=100000 "$tmp/alone.pb.gz" > "$tmp/alone.top" 2> /dev/null
nodes=$(awk '/flat%/ {n = 1; next} n' "$tmp/alone.top" | grep -c .)
check "unsymbolized decode says so and what to pass ($(grep -o "no symbols.*" "$tmp/alone.err"))" \
  'grep -q "no symbols: .*pass --kallsyms" "$tmp/alone.err"'
check "unsymbolized decode: pprof -top shows its addresses, $nodes nodes (not one [kernel.kallsyms])" \
  '[ "$nodes" -gt 1 ] && grep -qE " 0xffff[0-9a-f]+\$" "$tmp/alone.top"'

# --- 3. --profile HZ and --sum -------------------------------------------------
# A shell spinning in user mode meanwhile: samples without kernel frames.
timeout 4 sh -c 'while :; do :; done' &
session prof --profile 99
# duration_nanos is the time recorded: not the loading before nor the symbolizing after.
duration=$(zcat "$tmp/prof.pb.gz" | protoc --decode=perftools.profiles.Profile -I "$PROTO_DIR" \
  "$PROTO_DIR/profile.proto" 2> /dev/null | awk '/^duration_nanos:/ {print $2}')
check "--duration 2: the profile's duration is 2 s within 0.2 s (${duration:-none} ns)" \
  '[ -n "$duration" ] && [ "$duration" -ge 1800000000 ] && [ "$duration" -le 2200000000 ]'
ptotal=$(counted_of "$tmp/prof/stack_map_stat")
"$PPROF" -raw "$tmp/prof.pb.gz" > "$tmp/prof.raw" 2> /dev/null
check "--profile 99: samples/count and cpu/nanoseconds, period 10101010 ns" \
  'grep -q "^samples/count cpu/nanoseconds" "$tmp/prof.raw" && grep -qE "^Period: 10101010\$" "$tmp/prof.raw"'
check "--profile 99: samples add up to the hits ($ptotal), cpu time to hits x period" \
  '[ "$ptotal" -gt 0 ] && [ "$(raw_total "$tmp/prof.pb.gz")" -eq "$ptotal" ] && [ "$(raw_total "$tmp/prof.pb.gz" 1)" -eq $((ptotal * 10101010)) ]'
user_mode=$(stat_of drop_no_kernel_stack "$tmp/prof/stack_map_stat")
unknown=$("$PPROF" -top -nodefraction=0 -sample_index=samples "$tmp/prof.pb.gz" 2> /dev/null | awk '$NF == "[unknown]" {print $1}')
check "--profile 99: the $user_mode samples taken in user mode are [unknown]'s (${unknown:-none}), not dropped by pprof" \
  '[ "$user_mode" -gt 0 ] && [ "$unknown" = "$user_mode" ]'
session sum -e kmem:kmem_cache_alloc --sum bytes_alloc
bytes=$(j "sum(s['sum'] for s in d['stacks'])" "$tmp/sum/stack_map.json")
check "--sum bytes_alloc: events/count and bytes_alloc/bytes" \
  '"$PPROF" -raw "$tmp/sum.pb.gz" 2> /dev/null | grep -q "^events/count bytes_alloc/bytes"'
check "--sum bytes_alloc: the weights add up to the JSON's sum ($bytes)" \
  '[ "$bytes" -gt 0 ] && [ "$(raw_total "$tmp/sum.pb.gz" 1)" -eq "$bytes" ]'

# --- 4. --user-stacks ----------------------------------------------------------
# ustack_traces FILE: from pprof -traces, each trace that holds
# ustack_level_three on a line, leaf first, kernel frames as "K" (runs of
# them as one).
ustack_traces() {
  awk 'function flush() {if (t ~ / ustack_level_three /) print t; t = last = ""; first = 0}
    /^-+\+-+$/ {flush(); first = 1; next}
    first && /^ *[^ ]+ +[^ ]/ {sub(/^ *[^ ]+ +/, ""); first = 0}
    {sub(/^ +/, ""); f = ($0 ~ /^(ustack_level_|main$|__libc|\[)/) ? $0 : "K"
     if (f != "K" || last != "K") t = t " " f; last = f}
    END {flush()}' "$1"
}
W=$tmp/ustack_pp
cp "$USTACK" "$W"
"$W" 30 > "$tmp/w.out" &
wpid=$!
for _ in $(seq 100); do grep -q ready "$tmp/w.out" 2> /dev/null && break; sleep 0.05; done
timeout 30 "$BIN" --user-stacks --pid $wpid -e kmem:kmem_cache_alloc --duration 2 \
  --output "$tmp/user" --pprof "$tmp/user.pb.gz" > /dev/null 2> "$tmp/user.err"
rc=$?
check "--user-stacks --pprof exits 0 ($(tail -1 "$tmp/user.err"))" '[ $rc -eq 0 ]'
"$PPROF" -raw "$tmp/user.pb.gz" > "$tmp/user.raw" 2> "$tmp/user.raw.err"
rc=$?
check "--user-stacks: pprof -raw accepts it ($(head -1 "$tmp/user.raw.err"))" '[ $rc -eq 0 ]'
ubits=$(counted_of "$tmp/user/stack_map_stat")
check "--user-stacks: its samples add up to the session's hits ($ubits)" \
  '[ "$(raw_total "$tmp/user.pb.gz")" -eq "${ubits:--1}" ]'
build_id=$(readelf -n "$W" | awk '/Build ID:/ {print $3}')
check "--user-stacks: the workload's mapping carries its path and build id ($build_id, readelf -n)" \
  '[ -n "$build_id" ] && awk "/^Mappings/ {m = 1} m" "$tmp/user.raw" | grep -qE "^ *[0-9]+: 0x0/0x[0-9a-f]+/0x0 $W $build_id \[FN\]"'
check "--user-stacks: the kernel's mapping is still there, first" \
  'awk "/^Mappings/ {getline; print; exit}" "$tmp/user.raw" | grep -q "\[kernel.kallsyms\]"'
user_check() {  # user_check NAME PROFILE
  local name=$1  # check's condition runs in check, where $1 is its own
  "$PPROF" -traces "$2" > "$tmp/$name.traces" 2> /dev/null
  ustack_traces "$tmp/$name.traces" > "$tmp/$name.user"
  check "$name pprof -traces: kernel frames, then three, two, one, main ($(head -1 "$tmp/$name.user"))" \
    '[ -s "$tmp/$name.user" ] && ! grep -vq "^ K ustack_level_three ustack_level_two ustack_level_one main" "$tmp/$name.user"'
  "$PPROF" -top -cum -nodecount=100000 "$2" > "$tmp/$name.top" 2> /dev/null
  local fn want got
  for fn in ustack_level_one ustack_level_three; do
    # The events whose user stack holds fn, from the JSON.
    want=$(j "sum(e['count'] for s in d['stacks'] for e in s.get('by', []) if any(f['symbols'] and f['symbols'][-1].startswith('$fn+') for u in d['user_stacks']['stacks'] if u['user_stack_id'] == e.get('user_stack_id') for f in u['frames']))" "$tmp/user/stack_map.json")
    got=$(awk -v f="$fn" '$NF == f {print $4; exit}' "$tmp/$name.top")
    check "$name pprof -top -cum: $fn's cum is its JSON events ($got, want $want)" \
      '[ "${want:-0}" -gt 1000 ] && [ "$got" = "$want" ]'
  done
}
user_check live "$tmp/user.pb.gz"
kill $wpid 2> /dev/null
wait $wpid 2> /dev/null
wpid=
rm -f "$W"
"$BIN" decode "$tmp/user/stack_map.json" --user-symbols-from "$tmp/user" --pprof "$tmp/off.pb.gz" \
  > "$tmp/off.out" 2> "$tmp/off.err"
rc=$?
check "offline decode --user-symbols-from --pprof exits 0, prints nothing ($(tail -1 "$tmp/off.err"))" \
  '[ $rc -eq 0 ] && [ ! -s "$tmp/off.out" ]'
user_check offline "$tmp/off.pb.gz"
# Without the binary's copy its frames do not resolve: addresses in its mapping.
mkdir -p "$tmp/nobin/binaries"
"$BIN" decode "$tmp/user/stack_map.json" --user-symbols-from "$tmp/nobin" --pprof "$tmp/nobin.pb.gz" \
  > /dev/null 2>&1
"$PPROF" -raw "$tmp/nobin.pb.gz" > "$tmp/nobin.raw" 2> /dev/null
check "unresolved user frames: the workload's mapping without [FN], its locations with no function" \
  'grep -qE "^ *[0-9]+: 0x0/0x[0-9a-f]+/0x0 $W $build_id *\$" "$tmp/nobin.raw" && ! grep -q ustack_level "$tmp/nobin.raw"'
"$PPROF" -traces "$tmp/nobin.pb.gz" > "$tmp/nobin.traces" 2> /dev/null
check "unresolved user frames: pprof -traces names their binary ([ustack_pp])" \
  'grep -qE "^ +\[ustack_pp\]\$" "$tmp/nobin.traces"'
# With the binary back at its path, pprof symbolizes those addresses itself
# (binutils, through the mapping's start and offset): ours are file offsets
# as its format means them.
cp "$USTACK" "$W"
"$PPROF" -traces "$tmp/nobin.pb.gz" > "$tmp/resym.traces" 2> "$tmp/resym.err"
ustack_traces "$tmp/resym.traces" > "$tmp/resym.user"
check "pprof's own symbolizer resolves our user addresses to three, two, one, main ($(head -1 "$tmp/resym.user"))" \
  '[ -s "$tmp/resym.user" ] && ! grep -vq "^ K ustack_level_three ustack_level_two ustack_level_one main" "$tmp/resym.user"'

# --- 5. bad input -------------------------------------------------------------
expect_error "cannot write in" "$BIN" --pprof /nonexistent/dir/p.pb.gz --duration 1
expect_error "cannot write in" "$BIN" decode "$tmp/by/stack_map.json" --pprof /nonexistent/dir/p.pb.gz

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

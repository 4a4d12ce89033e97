#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --hist, as root on this kernel:
#   1. -e kmem:kmalloc --hist bytes_alloc: two sessions at once over the same
#      workload (its tasks alone, by name): one --trace, one counting in its
#      batches. The traced session's buckets equal the histogram computed
#      here from its own trace lines, per stack; the counting session's equal
#      them per symbolized stack; every bucket's sum lies in the bucket.
#   2. --offcpu --hist: the buckets add up to the off-CPU count (hits), and
#      the workload's 20 ms sleeps all fall in [16M, 32M) ns or above.
#   3. --top prints bpftrace's hist() lines; pprof reads the bucket label, the
#      same from decode of the JSON export.
#   4. bad input: one line, a non-zero exit.
#   hist_test.sh STACKMAPD PYTHON ATTR_WORKLOAD
set -u
BIN=$1
PY=$2
WORKLOAD=$3
PPROF=/usr/lib/go-1.19/pkg/tool/linux_amd64/pprof
CMP=$(dirname "$0")/hist_compare.py

tmp=$(mktemp -d /tmp/H-hist.XXXXXX)
xfile=$(mktemp /var/tmp/H-hist-xattr.XXXXXX)  # on disk: tmpfs keeps small user xattrs only
chmod 755 "$tmp"
bg_pids=
trap 'for p in $bg_pids; do kill "$p" 2> /dev/null; done; wait 2> /dev/null; rm -rf "$tmp" "$xfile"' EXIT
source "$(dirname "$0")/check_lib.sh"
export PPROF_TMPDIR=$tmp HOME=$tmp

# The workload: named smtq_hist, setxattr()s of 1..3000 bytes (each value is
# kmalloc'ed at its size; ext4 keeps values up to a block) and a few reads of /proc, once both tracers trace.
cat > "$tmp/work.py" << 'PYEOF'
import ctypes, os, random, sys
ctypes.CDLL(None).prctl(15, b"smtq_hist")
path = sys.argv[1]
open(path, "w").close()
rng = random.Random(29)
for i in range(3000):
    try:
        os.setxattr(path, "user.h", b"x" * rng.randint(1, 3000))
    except OSError as e:
        sys.exit(f"setxattr: {e}")
    if i % 100 == 0:
        open("/proc/self/status").read()
PYEOF

"$BIN" -e kmem:kmalloc --hist bytes_alloc --comm smtq_hist --duration 6 --trace "$tmp/b.trace" \
  --output "$tmp/b" > "$tmp/b.out" 2> "$tmp/b.err" &
pid_b=$!
"$BIN" -e kmem:kmalloc --hist bytes_alloc --comm smtq_hist --duration 6 --output "$tmp/a" \
  --pprof "$tmp/a.pb.gz" --top 3 > "$tmp/a.out" 2> "$tmp/a.err" &
pid_a=$!
bg_pids="$pid_a $pid_b"
wait_tracing "$tmp/a.err" "(counting)"
wait_tracing "$tmp/b.err" "(--trace)"
"$PY" "$tmp/work.py" "$xfile"
rc=$?
check "the workload ran" '[ $rc -eq 0 ]'
wait "$pid_a"
rc_a=$?
wait "$pid_b"
rc_b=$?
bg_pids=
check "both sessions exit 0 ($(tail -1 "$tmp/a.err"); $(tail -1 "$tmp/b.err"))" \
  '[ $rc_a -eq 0 ] && [ $rc_b -eq 0 ]'
for s in a b; do
  check "session $s lost nothing (drops 0)" '[ "$(stat_of drops "$tmp/$s/stack_map_stat")" = 0 ]'
done
traced=$(grep -c "<stack_id" "$tmp/b.trace")
check "the trace holds the workload's 3000 setxattr()s and more ($traced events)" '[ "$traced" -ge 3000 ]'
out=$("$PY" "$CMP" trace "$tmp/b.trace" "$tmp/b/stack_map.json" bytes_alloc)
check "--trace session: its JSON's buckets equal the histogram of its trace lines, per stack ($out)" \
  '[ "$out" = "ok $traced" ]'
out=$("$PY" "$CMP" same "$tmp/a/stack_map.json" "$tmp/b/stack_map.json")
check "counting session: the same buckets per symbolized stack as the traced one ($out)" \
  '[ "$out" = "ok $traced" ]'
out=$("$PY" "$CMP" sums "$tmp/a/stack_map.json")
check "counting session: each bucket's bytes lie in it, buckets add up to each stack ($out)" \
  '[ "${out%% *}" = ok ]'
# The setxattr() stack spreads over the buckets of 1..3000 bytes: [8, 16) to [2K, 4K).
buckets=$(grep -c '^    \[[0-9]*K*, [0-9]*K*)  *[0-9]* |@*  *|$' "$tmp/a.out")
check "--top draws bpftrace's hist() lines ($buckets lines)" '[ "$buckets" -ge 9 ]'
check "--top's lines are bpftrace's: '[1K, 2K)', count, a 52-column bar" \
  'grep -qE "^    \[1K, 2K\) {8}[ 0-9]{8} \|[@ ]{52}\|$" "$tmp/a.out"'
tags=$("$PPROF" -tags "$tmp/a.pb.gz" 2> /dev/null)
check "pprof reads the bucket label in bytes (-tags: 'bucket' with 1kB, 2kB)" \
  'grep -q "^ *bucket:" <<< "$tags" && grep -qE ": 1kB$" <<< "$tags" && grep -qE ": 2kB$" <<< "$tags"'

"$BIN" decode "$tmp/a/stack_map.json" --pprof "$tmp/d.pb.gz" 2> "$tmp/d.err"
dtags=$("$PPROF" -tags "$tmp/d.pb.gz" 2> /dev/null)
check "decode of the JSON export gives pprof the same buckets ($(tail -1 "$tmp/d.err"))" \
  '[ -n "$dtags" ] && [ "$dtags" = "$tags" ]'

# 2. --offcpu --hist: 10 sleeps of 20 ms.
cp "$WORKLOAD" "$tmp/smtq_hsleep"
"$BIN" --offcpu --hist --comm smtq_hsleep --duration 3 --output "$tmp/o" > "$tmp/o.out" 2> "$tmp/o.err" &
pid_o=$!
bg_pids=$pid_o
wait_tracing "$tmp/o.err" "--offcpu --hist"
"$tmp/smtq_hsleep" sleep 10 20 2> /dev/null
wait "$pid_o"
rc=$?
bg_pids=
check "--offcpu --hist exits 0 ($(tail -1 "$tmp/o.err"))" '[ $rc -eq 0 ]'
total=$("$PY" -c 'import json,sys; print(sum(e["count"] for s in json.load(open(sys.argv[1]))["stacks"] for e in s["by"]))' "$tmp/o/stack_map.json")
check "--offcpu --hist: the buckets add up to the off-CPU count ($total, hits $(stat_of hits "$tmp/o/stack_map_stat"))" \
  '[ "$total" = "$(stat_of hits "$tmp/o/stack_map_stat")" ] && [ "$total" -ge 10 ]'
sleeps=$("$PY" -c '
import json, sys
n = 0
for s in json.load(open(sys.argv[1]))["stacks"]:
    if any("nanosleep" in f for f in s.get("symbols", [])):
        n += sum(e["count"] for e in s["by"] if e["bucket"] >= 1 << 24)
print(n)' "$tmp/o/stack_map.json")
check "--offcpu --hist: the 10 sleeps of 20 ms are in buckets of 16M ns and up ($sleeps)" '[ "$sleeps" -ge 10 ]'
out=$("$PY" "$CMP" sums "$tmp/o/stack_map.json")
check "--offcpu --hist: each bucket's ns lie in it ($out)" '[ "${out%% *}" = ok ]'

# 4. Bad input.
expect_error "--hist needs a numeric FIELD" "$BIN" -e kmem:kmalloc --hist --duration 1
expect_error "numeric fields are call_site, bytes_req, bytes_alloc" "$BIN" -e kmem:kmalloc --hist siz --duration 1
expect_error "not a number" "$BIN" -e kmem:kmalloc --hist ptr --duration 1
expect_error "conflict" "$BIN" -e kmem:kmalloc --hist bytes_alloc --sum bytes_req --duration 1
expect_error "counts the time blocked" "$BIN" --offcpu --hist bytes_alloc --duration 1
expect_error "come with --hist" "$BIN" -e kmem:kmalloc --by comm,bucket --duration 1

[ $failures -eq 0 ] && echo "all hist checks passed" || echo "$failures hist check(s) failed"
exit $((failures > 0))

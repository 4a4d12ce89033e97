#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --user-stacks end to end, as root on this kernel, with
# tests/workloads/ustack_workload.c (frame pointers kept): its every
# newfstatat comes from main -> ustack_level_one -> ustack_level_two ->
# ustack_level_three, so each of its kmem:kmem_cache_alloc stacks must show
#   1. in --top: the kernel frames, then exactly those three functions, in
#      order (innermost first), then main;
#   2. in --folded: root first the process key, main, one, two, three, then
#      the kernel frames;
#   3. in stack_map.json: per frame the address, build id, file offset and
#      binary path, and the symbol binutils' addr2line gives for the same
#      offset (-1 for a return address) of the same file;
#   4. all of it again offline, after the workload exited and its binary was
#      deleted: decode stack_map.json --user-symbols-from DIR, from the copy
#      the export took (deleted while the process ran), the binaries still
#      at their path (libc) indexed, not copied;
#   5. without --user-stacks: stat and JSON carry none of its fields;
#   6. bad input: --user-symbols-from a directory without binaries/.
#   user_stacks_test.sh STACKMAPD USTACK_WORKLOAD PYTHON
set -u
BIN=$1
WORKLOAD_SRC=$2
PY=${3:-python3}

tmp=$(mktemp -d)
chmod 755 "$tmp"
wpid=
cleanup() {
  [ -n "$wpid" ] && kill "$wpid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/check_lib.sh"

# A copy under a name of its own, deleted before the offline decode.
W=$tmp/ustack_copy
cp "$WORKLOAD_SRC" "$W"
"$W" 30 > "$tmp/w.out" &
wpid=$!
for _ in $(seq 100); do grep -q ready "$tmp/w.out" 2> /dev/null && break; sleep 0.05; done

out=$tmp/out
timeout 30 "$BIN" --user-stacks --pid $wpid -e kmem:kmem_cache_alloc --by comm --duration 3 \
  --top 3 --folded "$tmp/live.folded" --output "$out" > "$tmp/live.top" 2> "$tmp/live.err" &
daemon=$!
# Deleted while the session traces (its stacks captured): the export copies
# it from the process still mapping it, the one way to have it offline.
for _ in $(seq 200); do grep -q "^stackmapd: tracing" "$tmp/live.err" 2> /dev/null && break; sleep 0.05; done
sleep 1
rm -f "$W"
wait $daemon
rc=$?
check "a --user-stacks session runs (rc $rc: $(tail -1 "$tmp/live.err"))" '[ $rc -eq 0 ]'
build_id=$(readelf -n "$WORKLOAD_SRC" | awk '/Build ID:/ {print $3}')
check "binaries/: the binary deleted while its process ran is copied ($build_id)" \
  'cmp -s "$out/binaries/$build_id" "$WORKLOAD_SRC"'
check "binaries/: the binaries still at their path (libc) are indexed, not copied" \
  'grep -q " /.*libc\.so\.6$" "$out/binaries/index" && [ "$(ls "$out/binaries" | wc -l)" -eq 2 ]'

# The user frames under the heaviest stack, function names only.
top_user_functions() {  # top_user_functions TOP_FILE
  awk '/^#1 /{on=1; next} /^#2 /{on=0} on && /\(ustack_copy\)|\(libc/ {print $1}' "$1" |
    sed 's/+0x.*//' | tr '\n' ' '
}
for mode in live offline; do
  if [ $mode = offline ]; then
    kill $wpid 2> /dev/null
    wait $wpid 2> /dev/null
    wpid=
    timeout 30 "$BIN" decode "$out/stack_map.json" --user-symbols-from "$out" --top 3 \
      > "$tmp/offline.top" 2> "$tmp/offline.err"
    rc=$?
    check "offline decode --top runs after the process and its binary are gone (rc $rc)" '[ $rc -eq 0 ]'
    timeout 30 "$BIN" decode "$out/stack_map.json" --user-symbols-from "$out" \
      --folded "$tmp/offline.folded" > /dev/null 2>> "$tmp/offline.err"
  fi
  fns=$(top_user_functions "$tmp/$mode.top")
  check "$mode --top: three functions in order, then main ($fns)" \
    '[[ "$fns" == "ustack_level_three ustack_level_two ustack_level_one main "* ]]'
  check "$mode --top: the user frames come after the kernel frames" \
    'awk "/^#1 /{on=1;next} on&&/getname|newfstatat/{k=NR} on&&/ustack_level_three/{u=NR;exit} END{exit !(k && u > k)}" "$tmp/$mode.top"'
  check "$mode --top: the user stack names its binary" 'grep -q "ustack_level_two+0x[0-9a-f]* (ustack_copy)" "$tmp/$mode.top"'
  line=$(grep ustack_level_three "$tmp/$mode.folded" | sort -t' ' -k2 -n | tail -1)
  check "$mode folded: process; main; one; two; three; kernel frames ($line)" \
    '[[ "$line" == ustack_copy\;*main\;ustack_level_one\;ustack_level_two\;ustack_level_three\;*getname* ]]'
done

# JSON: what symbolizes a frame anywhere, cross-checked with addr2line on
# the same file (the copy the export keeps) at the same offsets.
"$PY" - "$out" > "$tmp/frames" << 'PYEOF'
import json, sys
d = json.load(open(sys.argv[1] + "/stack_map.json"))
u = d["user_stacks"]
ids = {e["user_stack_id"] for s in d["stacks"] for e in s.get("by", []) if "user_stack_id" in e}
for us in u["stacks"]:
    if us["user_stack_id"] not in ids:
        continue
    for i, f in enumerate(us["frames"]):
        if "ustack_copy" not in f.get("path", ""):
            continue
        print(i, f["address"], f["build_id"], f["file_offset"], f.get("elf_addr", "-"), f["path"],
              f["symbols"][-1].split("+")[0] if f["symbols"] else "-")
PYEOF
check "JSON: user frames with address, build id, file offset and path" '[ "$(wc -l < "$tmp/frames")" -ge 4 ]'
mismatch=0
checked=0
while read -r idx addr build_id off elf_addr path sym; do
  copy=$out/binaries/$build_id
  [ -f "$copy" ] || { mismatch=$((mismatch + 1)); continue; }
  # addr2line takes the address in the ELF's layout: the offset's PT_LOAD.
  at=$(( elf_addr ))
  [ "$idx" -gt 0 ] && at=$(( at - 1 ))  # a return address: the call is before it
  want=$(addr2line -f -e "$copy" $(printf '0x%x' $at) | head -1)
  checked=$((checked + 1))
  [ "$want" = "$sym" ] || { echo "  frame $idx: addr2line says $want, stackmapd $sym"; mismatch=$((mismatch + 1)); }
done < "$tmp/frames"
check "JSON: $checked frames' symbols equal addr2line's at their offsets" '[ $checked -ge 4 ] && [ $mismatch -eq 0 ]'
check "JSON: elf_addr is the file offset mapped through the binary's PT_LOAD" \
  '"$PY" -c "
import sys
for l in open(sys.argv[1]):
    i, a, b, off, ea, p, s = l.split()
    assert ea != \"-\"
" "$tmp/frames"'
check "stat counts the user stacks" '[ "$(stat_of user_entries "$out/stack_map_stat")" -ge 1 ]'

# --profile: a sample taken in user mode has no kernel frames; with
# counts under SMT_NO_KERNEL_STACK (4294967293, depth 0), with its user
# stack under --user-stacks, and in drop_no_kernel_stack (no drop). Every
# event is a hit or one drop, and the stacks' refs add up to the hits.
NO_KERNEL=4294967293
cp "$WORKLOAD_SRC" "$tmp/uspin"
"$tmp/uspin" 30 spin > "$tmp/spin.out" &
spid=$!
for _ in $(seq 100); do grep -q ready "$tmp/spin.out" 2> /dev/null && break; sleep 0.05; done
timeout 30 "$BIN" --user-stacks --profile 999 --pid $spid --by comm --duration 2 --top 1 \
  --folded "$tmp/spin.folded" --output "$tmp/spin" > "$tmp/spin.top" 2> "$tmp/spin.err"
rc=$?
timeout 30 "$BIN" --profile 999 --pid $spid --duration 1 --output "$tmp/spin_plain" \
  > /dev/null 2> "$tmp/spin_plain.err"
rc_plain=$?
kill $spid 2> /dev/null
wait $spid 2> /dev/null
check "--user-stacks --profile runs (rc $rc: $(tail -1 "$tmp/spin.err"))" '[ $rc -eq 0 ]'
spin_fns=$(awk '/^#1 /{on=1; next} on && /\(uspin\)/ {print $1}' "$tmp/spin.top" | sed 's/+0x.*//' | tr '\n' ' ')
check "--top #1: the user-mode stack, no kernel frames, then spin_two, spin_one, main ($spin_fns)" \
  'grep -q "^#1 stack_id $NO_KERNEL user_stack_id [0-9]*: .*depth 0\$" "$tmp/spin.top" && grep -q "no kernel frames" "$tmp/spin.top" && [[ "$spin_fns" == "ustack_spin_two ustack_spin_one main "* ]]'
line=$(grep ustack_spin_two "$tmp/spin.folded" | sort -t' ' -k2 -n | tail -1)
check "folded: process; main; spin_one; spin_two, and no kernel frame after it ($line)" \
  '[[ "$line" =~ ^uspin\;.*main\;ustack_spin_one\;ustack_spin_two\ [0-9]+$ ]]'
st=$tmp/spin/stack_map_stat
check "user-mode samples are hits: events_total = hits + drops, most of them in user mode" \
  '[ "$(stat_of events_total "$st")" -eq $(( $(stat_of hits "$st") + $(stat_of drops "$st") )) ] && [ "$(stat_of drop_no_kernel_stack "$st")" -gt $(( $(stat_of hits "$st") / 2 )) ]'
"$PY" - "$tmp/spin" $NO_KERNEL > "$tmp/spin.json.out" 2>&1 << 'PYEOF'
import json, sys
d = json.load(open(sys.argv[1] + "/stack_map.json"))
no_kernel = int(sys.argv[2])
s = [s for s in d["stacks"] if s["stack_id"] == no_kernel]
assert len(s) == 1 and s[0]["depth"] == 0 and s[0]["ips"] == [], "one empty stack under the id"
refs = sum(x["ref_count"] for x in d["stacks"])
counted = d["stats"]["hits"] + d["stats"]["sent_whole"]
assert refs == counted, f"refs {refs} != hits + sent_whole {counted}"
users = {u["user_stack_id"]: u for u in d["user_stacks"]["stacks"]}
names = set()
for e in s[0]["by"]:
    for f in users.get(e.get("user_stack_id"), {"frames": []})["frames"]:
        names.update(x.split("+")[0] for x in f["symbols"])
assert {"ustack_spin_two", "ustack_spin_one", "main"} <= names, names
print("ok", s[0]["ref_count"], "of", refs)
PYEOF
check "JSON: the empty stack $NO_KERNEL holds the samples' user stacks, refs = hits ($(tail -1 "$tmp/spin.json.out"))" \
  'grep -q "^ok" "$tmp/spin.json.out"'
check "FSMB: the RFC's reader parses it, the empty stack as depth 0" \
  '"$PY" "$(dirname "$0")/rfc/stackmap_dump.py" "$tmp/spin/stack_map_bin" 2> /dev/null | grep -q "^stack_id $NO_KERNEL \[ref [1-9][0-9]*, depth 0\]"'
check "text stack_map: the empty stack as depth 0" \
  'grep -q "^stack_id $NO_KERNEL \[ref [1-9][0-9]*, depth 0\]" "$tmp/spin/stack_map"'
st=$tmp/spin_plain/stack_map_stat
user_mode=$(stat_of drop_no_kernel_stack "$st")
check "without --user-stacks (rc $rc_plain): user-mode samples are hits under the empty stack, not drops" \
  '[ $rc_plain -eq 0 ] && [ "$user_mode" -gt $(( $(stat_of hits "$st") / 2 )) ] && [ "$(stat_of events_total "$st")" -eq $(( $(stat_of hits "$st") + $(stat_of drops "$st") )) ] && [ "$(stat_of drops "$st")" -lt "$user_mode" ] && grep -q "^stack_id $NO_KERNEL \[ref $user_mode, depth 0\]" "$tmp/spin_plain/stack_map"'

# nap_traced NAME RUN_AS DAEMON_PREFIX: uspin's nap loop, started through
# RUN_AS (words, "" for root), traced by --user-stacks --offcpu --top 1
# started through DAEMON_PREFIX, into $tmp/NAME, NAME.top and NAME.err; sets
# $rc (the daemon's) and $napped (the workload's pid).
nap_traced() {
  $2 "$tmp/uspin" 30 nap > "$tmp/$1.out" &
  napped=$!
  for _ in $(seq 100); do grep -q ready "$tmp/$1.out" 2> /dev/null && break; sleep 0.05; done
  timeout 30 $3 "$BIN" --user-stacks --offcpu --pid $napped --min-block-us 500 --duration 1 --top 1 \
    --output "$tmp/$1" > "$tmp/$1.top" 2> "$tmp/$1.err"
  rc=$?
  kill $napped 2> /dev/null
  wait $napped 2> /dev/null
}

# --offcpu: each block's user stack, taken at switch-out.
nap_traced nap "" ""
nap_fns=$(awk '/^#1 /{on=1; next} on && /\(uspin\)/ {print $1}' "$tmp/nap.top" | sed 's/+0x.*//' | tr '\n' ' ')
check "--offcpu --user-stacks (rc $rc): the heaviest block's user stack is nap_two, nap_one, main ($nap_fns)" \
  '[ $rc -eq 0 ] && [[ "$nap_fns" == "ustack_nap_two ustack_nap_one main "* ]] && grep -q "^#1 stack_id [0-9]* user_stack_id [0-9]*: .*off-CPU" "$tmp/nap.top"'

# Another user's process, the daemon without CAP_SYS_PTRACE and
# CAP_CHECKPOINT_RESTORE: its binaries (/proc/PID/map_files) are not ours to
# open, and stderr says so once, naming what is missing.
nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
nap_traced nobody "$nobody" "setpriv --bounding-set=-sys_ptrace,-checkpoint_restore,-sys_admin --"
denied=$(grep -cE "cannot open /proc/$napped/map_files/.*: (Operation not permitted|Permission denied): .*CAP_SYS_PTRACE and CAP_CHECKPOINT_RESTORE" "$tmp/nobody.err")
check "nobody's process, no CAP_SYS_PTRACE (rc $rc): one line says its binaries are not ours to open, and why ($denied)" \
  '[ $rc -eq 0 ] && [ "$denied" = 1 ] && [ "$(grep -c "cannot open /proc/" "$tmp/nobody.err")" = 1 ]'
# And with them (root's own), the same process's frames are named.
nap_traced nobody2 "$nobody" ""
check "nobody's process, as root with every capability (rc $rc): its frames are named, nothing said" \
  '[ $rc -eq 0 ] && grep -q "^    ustack_nap_two+0x" "$tmp/nobody2.top" && ! grep -q "cannot open" "$tmp/nobody2.err"'

# Without --user-stacks nothing of it shows.
timeout 30 "$BIN" -e kmem:kmem_cache_alloc --duration 1 --output "$tmp/plain" 2> "$tmp/plain.err"
check "without --user-stacks: no user lines in stack_map_stat" '! grep -q user "$tmp/plain/stack_map_stat"'
check "without --user-stacks: no user_stacks in the JSON, no binaries/" \
  '! grep -q user_stack "$tmp/plain/stack_map.json" && [ ! -e "$tmp/plain/binaries" ]'

# Bad input: one line naming the problem.
mkdir -p "$tmp/empty"
expect_error "no binaries/ directory" "$BIN" decode "$out/stack_map.json" --user-symbols-from "$tmp/empty"

# In a PID namespace of its own (a container without the host's), the pids
# BPF sees are not its /proc's: what names a process by pid is refused in one
# line, and nothing is written; kernel stacks alone still work there.
ns="unshare --pid --fork --mount-proc"
expect_error "needs the host's PID namespace" $ns "$BIN" --user-stacks -e kmem:kmem_cache_alloc \
  --duration 1 --output "$tmp/ns"
check "in its own PID namespace, --user-stacks wrote no file" '[ -z "$(ls -A "$tmp/ns" 2> /dev/null)" ]'
expect_error "needs the host's PID namespace" $ns "$BIN" -e kmem:kmem_cache_alloc --pid 1 \
  --duration 1 --output "$tmp/ns"
expect_error "needs the host's PID namespace" $ns "$BIN" -e kmem:kmem_cache_alloc \
  --output "$tmp/ns" -- /bin/true
timeout 30 $ns "$BIN" -e kmem:kmem_cache_alloc --duration 1 --output "$tmp/ns_kernel" 2> "$tmp/ns_kernel.err"
rc=$?
check "in its own PID namespace, kernel stacks alone (rc $rc): counted as anywhere" \
  '[ $rc -eq 0 ] && grep -qE "^events_total: [1-9]" "$tmp/ns_kernel/stack_map_stat"'

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

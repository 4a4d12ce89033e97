#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `stackmapd decode` against the RFC's own reader (tests/rfc/stackmap_dump.py) on
# FSMB files crafted here (a real export needs root BPF): both revisions the RFC
# reads, files cut short or longer than their records, --top. What the RFC's
# script prints is the reference; decode must print the same stacks, and for a
# damaged file add one line on stderr and a non-zero exit.
set -u
BIN=$1
SRC=$2
PY=${3:-python3}
RFC_DUMP=$SRC/tests/rfc/stackmap_dump.py

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

# Sparse ids, an empty stack, a saturated count and tied counts (12, 40), so that
# --top's order of ties is compared too. Prints the byte offset where each
# record starts, for the cuts below.
"$PY" - "$tmp" <<'PYEOF' > "$tmp/offsets"
import struct, sys
d = sys.argv[1]
stacks = [(4097, 12, [0xffffffff81a0c3d8, 0xffffffff81a0d1c0, 0xffffffff810b2f44]),
          (13, 40, [0xffffffffc0a81234]),
          (32767, 12, []),
          (0, 40, [0, 0xffffffffffffffff]),
          (2048, 7, [0xffffffff81000000 + 8 * i for i in range(5)]),
          (9, 0xffffffff, [0xffffffff81234567])]
def fsmb(magic, version):
    out = struct.pack("<IIII", magic, version, len(stacks), 0)
    offsets = []
    for sid, ref, ips in stacks:
        offsets.append(len(out))
        out += struct.pack("<IIII", sid, len(ips), ref, 0) + struct.pack(f"<{len(ips)}Q", *ips)
    return out, offsets
v2, offsets = fsmb(0x464D5342, 2)
open(f"{d}/v2.bin", "wb").write(v2)
open(f"{d}/rfc_v1.bin", "wb").write(fsmb(0x464D5342, 1)[0])
open(f"{d}/later_v1.bin", "wb").write(fsmb(0x46534D42, 1)[0])
print(*offsets)
PYEOF
read -r -a at < "$tmp/offsets"
v2=$tmp/v2.bin
head -c $((at[3] + 16 + 4)) "$v2" > "$tmp/cut_frames.bin"   # inside record 4's frames
head -c $((at[2] + 10)) "$v2" > "$tmp/cut_header.bin"       # inside record 3's header
head -c "${at[5]}" "$v2" > "$tmp/cut_between.bin"           # after record 5, before 6
{ cat "$v2"; printf 'xyz'; } > "$tmp/trailing.bin"

# run NAME FILE ARGS...: both readers, text and --json, into $tmp/NAME.{rfc,ours}[.json],
# their stderr into .err and exit codes into .rc.
run() {
  local name=$1 file=$2
  shift 2
  "$PY" "$RFC_DUMP" "$file" "$@" > "$tmp/$name.rfc" 2> "$tmp/$name.rfc.err"
  echo $? > "$tmp/$name.rfc.rc"
  "$PY" "$RFC_DUMP" "$file" --json "$@" > "$tmp/$name.rfc.json" 2> /dev/null
  "$BIN" decode "$file" "$@" > "$tmp/$name.ours" 2> "$tmp/$name.ours.err"
  echo $? > "$tmp/$name.ours.rc"
  "$BIN" decode "$file" --json "$@" > "$tmp/$name.ours.json" 2> "$tmp/$name.ours.json.err"
  echo $? > "$tmp/$name.ours.json.rc"
}

# (stack_id, ref_count, ips) of a JSON listing, one per line: what both must agree on.
listing() {
  "$PY" -c 'import json, sys
for s in json.load(open(sys.argv[1])): print(s["stack_id"], s["ref_count"], *s["ips"])' "$1"
}

# same NAME: the RFC's script read it (exit 0) and decode printed what it printed.
same() {
  local name=$1
  check "$name: stackmap_dump.py reads it" '[ "$(cat "$tmp/$name.rfc.rc")" -eq 0 ] && [ -s "$tmp/$name.rfc" ]'
  check "$name: decode prints the RFC's text, line for line" 'cmp -s "$tmp/$name.rfc" "$tmp/$name.ours"'
  listing "$tmp/$name.rfc.json" > "$tmp/$name.rfc.list"
  listing "$tmp/$name.ours.json" > "$tmp/$name.ours.list" 2> "$tmp/$name.list.err"
  check "$name: --json lists the same stack ids, ref counts and frames ($(wc -l < "$tmp/$name.rfc.list") stacks)" \
    '[ -s "$tmp/$name.rfc.list" ] && cmp -s "$tmp/$name.rfc.list" "$tmp/$name.ours.list"'
}

# whole NAME REVISION: an undamaged file: exit 0, and decode says which revision it read.
whole() {
  local name=$1 revision=$2
  check "$name: decode exits 0" '[ "$(cat "$tmp/$name.ours.rc")" -eq 0 ] && [ "$(cat "$tmp/$name.ours.json.rc")" -eq 0 ]'
  check "$name: decode says it read $revision" 'grep -qF "$revision" "$tmp/$name.ours.err"'
}

# damaged NAME WORDS: exit 1 after printing, stderr one line with WORDS, text and --json alike.
damaged() {
  local name=$1 words=$2 out
  for out in ours ours.json; do
    check "$name ($out): decode exits 1" '[ "$(cat "$tmp/$name.$out.rc")" -eq 1 ]'
    check "$name ($out): one line on stderr: $(head -1 "$tmp/$name.$out.err")" \
      '[ "$(wc -l < "$tmp/$name.$out.err")" -eq 1 ] && grep -qF "$words" "$tmp/$name.$out.err"'
  done
}

run v2 "$v2"
same v2
whole v2 "FSMB v2 (magic 0x464d5342)"
check "v2: all 6 stacks, in file order" '[ "$(grep -c "^stack_id" "$tmp/v2.ours")" -eq 6 ] && head -1 "$tmp/v2.ours" | grep -q "^stack_id 4097 "'

run rfc_v1 "$tmp/rfc_v1.bin"
same rfc_v1
whole rfc_v1 "FSMB v1 (magic 0x464d5342)"

# The later revision: the RFC's script does not know its magic; decode reads it as v2's stacks.
"$BIN" decode "$tmp/later_v1.bin" > "$tmp/later.ours" 2> "$tmp/later.err"
rc=$?
check "later_v1: decode exits 0" '[ $rc -eq 0 ]'
check "later_v1: decode prints the same stacks as of the v2 file" 'cmp -s "$tmp/later.ours" "$tmp/v2.rfc"'
check "later_v1: decode says it read FSMB v1 (magic 0x46534d42)" 'grep -qF "FSMB v1 (magic 0x46534d42)" "$tmp/later.err"'

for top in 0 3 4 1; do
  run "top$top" "$v2" --top "$top"
  same "top$top"
  whole "top$top" "FSMB v2"
done
check "--top 0: every stack, in file order, as without --top" 'cmp -s "$tmp/top0.ours" "$tmp/v2.ours"'
check "--top 3: ties (40, 40) in file order" \
  '[ "$(grep -o "^stack_id [0-9]* \[ref [0-9]*" "$tmp/top3.ours" | tr "\n" " ")" = "stack_id 9 [ref 4294967295 stack_id 13 [ref 40 stack_id 0 [ref 40 " ]'

run cut_frames "$tmp/cut_frames.bin"
same cut_frames
damaged cut_frames "truncated FSMB v2 (magic 0x464d5342) file: record 4 of 6 at byte ${at[3]}"
check "cut_frames: the 3 records before the cut" '[ "$(grep -c "^stack_id" "$tmp/cut_frames.ours")" -eq 3 ]'
check "cut_frames: --json is still valid JSON" '"$PY" -m json.tool "$tmp/cut_frames.ours.json" > /dev/null'

run cut_header "$tmp/cut_header.bin"
same cut_header
damaged cut_header "record 3 of 6 at byte ${at[2]} needs 16 bytes, 10 left; kept the 2 records before it"

run cut_between "$tmp/cut_between.bin"
same cut_between
damaged cut_between "record 6 of 6"

run trailing "$tmp/trailing.bin"
same trailing
damaged trailing "over-long FSMB v2 (magic 0x464d5342) file: 3 trailing bytes"
check "trailing: all 6 records" '[ "$(grep -c "^stack_id" "$tmp/trailing.ours")" -eq 6 ]'

run cut_top "$tmp/cut_frames.bin" --top 2
same cut_top
damaged cut_top "truncated FSMB v2"

# Foreign and absurd files: one line, nothing printed.
cp "$BIN" "$tmp/elf.bin"
"$PY" -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<IIII",0x464D5342,2,0xffffffff,0) + bytes(16))' "$tmp/absurd_nr_stacks.bin"
"$PY" -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<IIIIIIII",0x464D5342,2,1,0,7,100000,1,0))' "$tmp/absurd_nr.bin"
"$PY" -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<IIII",0x464D5342,3,0,0))' "$tmp/version3.bin"
expect_error "not a stack_map_bin file" "$BIN" decode "$tmp/elf.bin"
check "a foreign file prints nothing" '[ ! -s "$tmp/bad.out" ]'
expect_error "nr_stacks 4294967295, no stack table holds more" "$BIN" decode "$tmp/absurd_nr_stacks.bin"
expect_error "claims 100000 frames" "$BIN" decode "$tmp/absurd_nr.bin"
expect_error "unsupported FSMB version 3" "$BIN" decode "$tmp/version3.bin"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The bpfloader rule check must fail an object that breaks any one rule: each
# case copies a built object, breaks one field or section the way a mistake
# would, and expects bpfloader_check to name it (and to pass the original).
set -u
CHECK=$1
OBJS=$2 # the build's bpf/bpfloader: r/stackmapd.o, s/stackmapd.o
PYTHON=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/../check_lib.sh"

# patch FAMILY SECTION OFFSET FORMAT VALUE: writes $tmp/FAMILY-broken.o with
# struct.pack(FORMAT, VALUE) at OFFSET of SECTION.
patch() {
  "$PYTHON" - "$OBJS/$1/stackmapd.o" "$tmp/$1-broken.o" "$2" "$3" "$4" "$5" <<'PYEOF'
import struct, sys
src, dst, sec, off, fmt, val = sys.argv[1:]
b = bytearray(open(src, "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
def hdr(i):
    return struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize)
stroff = hdr(shstrndx)[4]
for i in range(shnum):
    h = hdr(i)
    name = b[stroff + h[0]:b.index(0, stroff + h[0])].decode()
    if name == sec:
        value = val.encode() if fmt.endswith("s") else int(val, 0)
        struct.pack_into("<" + fmt, b, h[4] + int(off, 0), value)
        open(dst, "wb").write(b)
        sys.exit(0)
sys.exit("no section " + sec)
PYEOF
}

# expect_broken WHAT FAMILY PATTERN: the check fails $tmp/FAMILY-broken.o, naming PATTERN.
expect_broken() {
  "$CHECK" "$2" "$tmp/$2-broken.o" > /dev/null 2> "$tmp/err"
  rc=$? pat=$3
  check "rejects $1 ($(grep -m1 -- "$pat" "$tmp/err" | sed 's/^[^:]*: //'))" \
    '[ $rc -eq 1 ] && grep -q -- "$pat" "$tmp/err"'
}

check "the built objects pass" '"$CHECK" r "$OBJS/r/stackmapd.o" s "$OBJS/s/stackmapd.o" > /dev/null'

# Map definitions: offset 20 is R..T's uid, U's abort()-if-not-zero.
patch s maps 20 I 1000 && expect_broken "a nonzero map 'zero' (S)" s "abort()"
patch r maps 20 I 1000 && expect_broken "a nonzero map uid (R)" r "abort()"
patch s maps 44 I 0 && expect_broken "map max_kver 0" s "skips it on every release"
patch s maps 36 I 0 && expect_broken "map bpfloader_max_ver 0" s "skip it on Android 12 (S)"
patch s maps 48 4s fs_b && expect_broken "a map selinux_context" s "selinux_context"
patch s maps 113 B 1 && expect_broken "map ignore_on bits" s "ignore_on"
patch r maps 28 I 0 && expect_broken "map mode 0" r "keeps even its owner out"
# The ring buffer (ids, the 7th map): 48 KiB is no power of two.
patch s maps $((6 * 120 + 12)) I 49152 && expect_broken "a ring buffer size" s "ring buffer"
# Program definitions.
patch r progs 0 I 1000 && expect_broken "a nonzero program uid (R)" r "chown before chmod"
patch r progs 12 I 0 && expect_broken "program max_kver 0 (R)" r "skips it on every release"
patch s progs 24 I 0 && expect_broken "program bpfloader_max_ver 0" s "skip it on"
patch s progs 8 I 0x050a0000 && expect_broken "a program min_kver" s "min_kver"
# Strides and the sections that announce them.
patch s size_of_bpf_map_def 0 I 32 && expect_broken "a wrong map stride" s "size_of_bpf_map_def says 32"
patch s size_of_bpf_prog_def 0 I 28 && expect_broken "a wrong program stride" s "size_of_bpf_prog_def says 28"
patch s bpfloader_max_ver 0 I 2 && expect_broken "an object max version below S..U's" s "the object: bpfloader_min_ver"
cp "$OBJS/r/stackmapd.o" "$tmp/s-broken.o" && expect_broken "a 32/20 object as the 120/92 family" s "not a multiple of 120"
cp "$OBJS/s/stackmapd.o" "$tmp/r-broken.o" && expect_broken "a 120/92 object as the 32/20 family" r "not a multiple of 32"
cp "$OBJS/../stackmapd.bpf.o" "$tmp/s-broken.o" && expect_broken "the daemon's own libbpf object" s "libbpf BTF maps"
patch s license 0 4s MIT && expect_broken "a non-GPL license" s "license is"
# A critical section, which reboots the device when the object fails.
printf 'x\0' > "$tmp/reason"
llvm-objcopy --add-section "critical=$tmp/reason" "$OBJS/s/stackmapd.o" "$tmp/s-broken.o" &&
  expect_broken "a critical section" s "critical section"

echo "bpfloader_rules: $failures failure(s)"
[ $failures -eq 0 ]

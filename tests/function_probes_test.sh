#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# -f on the running kernel, as root: each mechanism it offers (fentry,
# kprobes) counts dd's reads of /dev/zero exactly and says which it used; a
# mechanism it lacks is refused in one line naming it, and a kernel with
# neither (BPF tracing programs refused and CONFIG_KPROBES off, as on the
# build machines) is refused in one line naming both and a fix. The guest
# kernel of scripts/kernel-test.sh runs the counting half of both.
set -u
BIN=$1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

reads=3000
fentry=0 kprobes=0
bpftool feature probe kernel 2> /dev/null | grep -q "program_type tracing is available" && fentry=1
[ -e /sys/bus/event_source/devices/kprobe/type ] && kprobes=1
echo "this kernel: fentry=$fentry kprobes=$kprobes"

# -f vfs_read --comm dd through MECHANISM: hits = dd's reads (bs=1), and the line.
counts_reads() {  # mechanism expected-line
  "$BIN" -f vfs_read --probe-mechanism "$1" --comm dd --output "$tmp/$1" > "$tmp/$1.log" 2>&1 &
  local pid=$! i=0
  while ! grep -q ' tracing ' "$tmp/$1.log" && kill -0 $pid 2> /dev/null && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  dd if=/dev/zero of=/dev/null bs=1 count=$reads 2> /dev/null
  kill -TERM $pid
  wait $pid
  local rc=$? hits
  hits=$(stat_of hits "$tmp/$1/stack_map_stat")
  check "--probe-mechanism $1: exits 0 ($(tail -1 "$tmp/$1.log"))" '[ $rc -eq 0 ]'
  check "--probe-mechanism $1: says '$2'" 'grep -qF -- "$2" "$tmp/$1.log"'
  check "--probe-mechanism $1: counts dd's $reads reads ($hits)" '[ "$hits" = "$reads" ]'
  check "--probe-mechanism $1: stacks start in vfs_read" \
    '[ "$(grep -A1 "^stack_id" "$tmp/$1/stack_map" | grep -cE "^  \[0\] vfs_read\+")" = "$(stat_of entries "$tmp/$1/stack_map_stat")" ]'
}

expect_error "--probe-mechanism bogus: use auto, fentry or kprobe" \
  "$BIN" -f vfs_read --probe-mechanism bogus --duration 1
expect_error "applies to -f: add -f FUNCTION" "$BIN" --probe-mechanism kprobe --duration 1

if [ $fentry = 1 ]; then
  counts_reads fentry "-f: fentry on 1 function"
else
  expect_error "--probe-mechanism fentry: BPF tracing programs are refused" \
    "$BIN" -f vfs_read --probe-mechanism fentry --duration 1
fi
if [ $kprobes = 1 ]; then
  counts_reads kprobe "-f: kprobes on 1 function (no fentry: --probe-mechanism kprobe)"
else
  expect_error "--probe-mechanism kprobe: kprobes are off" \
    "$BIN" -f vfs_read --probe-mechanism kprobe --duration 1
fi
if [ $fentry = 0 ] && [ $kprobes = 0 ]; then
  # One line naming both, and the kernel options that would fix it.
  expect_error "-f needs fentry or kprobes, and this kernel has neither: BPF tracing programs are refused" \
    "$BIN" -f vfs_read --duration 1
  expect_error "and kprobes are off" "$BIN" -f 'vfs_rea*' --duration 1
  expect_error "boot a kernel with CONFIG_KPROBES=y and CONFIG_KPROBE_EVENTS=y" \
    "$BIN" -f vfs_read --duration 1
else
  expect_error "no traceable kernel function 'no_such_function_x'" "$BIN" -f no_such_function_x --duration 1
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]

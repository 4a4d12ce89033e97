#!/usr/bin/env bash
# CI entry point for the arm64 build: installs the cross toolchain
# and arm64 libraries, builds the static aarch64 stackmapd, its BPF object and
# unit tests into build-arm64/, runs the unit tests under qemu-aarch64-static,
# and prints the binary's size.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-arm64.sh -DSTACKMAPD_WERROR=ON

bin=build-arm64/stackmapd
stripped=build-arm64/stackmapd.stripped
aarch64-linux-gnu-strip -o "$stripped" "$bin"
echo "arm64 stackmapd: $(stat -c %s "$bin") bytes, $(stat -c %s "$stripped") bytes stripped"
echo "arm64 BPF objects: $(stat -c %s build-arm64/bpf/stackmapd.bpf.o) bytes (own)," \
	"$(stat -c %s build-arm64/bpf/bpfloader/r/stackmapd.o) bytes (bpfloader r: Android 11..14 QPR2)," \
	"$(stat -c %s build-arm64/bpf/bpfloader/s/stackmapd.o) bytes (bpfloader s: Android 12..16)"

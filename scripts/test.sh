#!/usr/bin/env bash
# Installs, builds and runs every test: unit, ThreadSanitizer, BPF on the real
# kernel, command line end to end, --pinned, the systemd container, the flame
# graph in Chromium; then the fuzzers for FUZZ_SECONDS each; the arm64 build
# with its unit tests under qemu-aarch64-static; and the kernel series with
# the daemon's tracefs and BPF paths in kernels booted under qemu.
# The BPF tests need root and a kernel with BPF and BTF; they fail, never
# skip, unless STACKMAPD_SKIP_BPF_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/format.sh --check   # the C and C++ sources follow .clang-format
scripts/build.sh -DSTACKMAPD_WERROR=ON
ctest --test-dir build --output-on-failure
# The benchmark suite, every section once for seconds (~30 s, no apt when its
# tools are there): fails if a section crashes, never on a figure.
bench/run.sh --smoke
# Each target's committed corpus, then 20 s of search each (FUZZ_SECONDS).
FUZZ_SECONDS=${FUZZ_SECONDS:-20} scripts/fuzz.sh
scripts/test-arm64.sh
# The minimal kernel (with BPF and BTF) only: ~13 min cold on 2 cores. The
# KASAN + lockdep kernel adds ~12 min: run `scripts/kernel-test.sh` for both.
scripts/kernel-test.sh --only min

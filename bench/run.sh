#!/usr/bin/env bash
# The benchmark suite in one command (BENCHMARKS.md), as root on Debian 12:
#   sudo bench/run.sh            full suite (~12 min on 2 cores)
#   sudo bench/run.sh --quick    fewer, shorter rounds (~4 min)
#   sudo bench/run.sh --smoke    every section once, seconds each (CI, ~30 s):
#                                fails only if a section crashes, never on a figure
#   sudo bench/run.sh --baseline-stackmapd OLD/stackmapd [--baseline-bpf-obj OLD/stackmapd.bpf.o]
#                                adds the section "compare": this build against OLD, A B A B
# Installs its packages, builds, runs bench/run.py, and writes
# bench/results/latest.{json,png,md} and the results section of BENCHMARKS.md
# (--smoke writes to a temporary directory and leaves both alone).
# BUILD_DIR=DIR builds and runs in DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "bench/run.sh: run as root (sudo bench/run.sh): it loads BPF programs, uses tracefs and perf" >&2
  exit 1
fi
smoke=0
for arg in "$@"; do [ "$arg" = --smoke ] && smoke=1; done
bench_tools() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  bpftrace linux-perf bpftool python3 python3-matplotlib > /dev/null; }
have_tools() {
  command -v bpftrace && command -v perf && command -v bpftool && command -v cmake &&
    /usr/bin/python3 -c 'import matplotlib'
} > /dev/null 2>&1
if [ $smoke = 0 ]; then
  scripts/deps.sh   # apt-get update + the build dependencies
  bench_tools
elif ! have_tools; then
  # The smoke (CI) runs after scripts/deps.sh: only the bench's own tools may be missing.
  command -v cmake > /dev/null || scripts/deps.sh
  bench_tools || { apt-get update -qq && bench_tools; }
fi
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DSTACKMAPD_BENCH=ON > /dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target stackmapd alloc_loop bare_stack drain_bench snapshot_bench
# Debian's python3 (where python3-matplotlib lives), not whatever is first in PATH.
exec /usr/bin/python3 bench/run.py --build-dir "$BUILD_DIR" "$@"

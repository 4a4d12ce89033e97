#!/usr/bin/env bash
# The benchmark suite in one command (BENCHMARKS.md), as root on Debian 12:
#   sudo bench/run.sh            full suite (< 10 min)
#   sudo bench/run.sh --quick    fewer, shorter rounds (< 3 min)
# Installs its packages, builds, runs bench/run.py, and writes
# bench/results/latest.{json,png,md} and the results section of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "bench/run.sh: run as root (sudo bench/run.sh): it loads BPF programs, uses tracefs and perf" >&2
  exit 1
fi
scripts/deps.sh   # apt-get update + the build dependencies
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  bpftrace linux-perf bpftool python3 python3-matplotlib > /dev/null
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DSTACKMAPD_BENCH=ON > /dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target stackmapd alloc_loop bare_stack drain_bench
# Debian's python3 (where python3-matplotlib lives), not whatever is first in PATH.
exec /usr/bin/python3 bench/run.py --build-dir "$BUILD_DIR" "$@"

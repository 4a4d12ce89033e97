#!/usr/bin/env bash
# Installs, builds and runs every test: unit, ThreadSanitizer, BPF on the real
# kernel, command line end to end, then the fuzzers for FUZZ_SECONDS each.
# The BPF tests need root and a kernel with BPF and BTF; they fail, never
# skip, unless STACKMAPD_SKIP_BPF_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure
scripts/fuzz.sh

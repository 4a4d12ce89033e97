#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan), replays each one's
# committed corpus alone, then runs it for FUZZ_SECONDS (default 60) from that
# corpus. Any crash, leak or sanitizer report fails the run; new inputs go to
# a scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DSTACKMAPD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug > /dev/null
cmake --build build-fuzz -j"$(nproc)" --target fsmb_fuzz kallsyms_fuzz http_request_fuzz json_export_fuzz > /dev/null
for target in fsmb kallsyms http_request json_export; do
  # The committed corpus first, alone: every input that once broke a target is
  # there, so a crash while exploring below can only be a new find.
  if ! build-fuzz/tests/fuzz/${target}_fuzz -runs=0 -max_len=65536 "tests/fuzz/corpus/$target" \
      > /tmp/fuzz-replay.$$ 2>&1; then
    tail -40 /tmp/fuzz-replay.$$
    echo "fuzz: ${target}_fuzz fails on its committed corpus (a known input regressed)"
    exit 1
  fi
  rm -f /tmp/fuzz-replay.$$
  scratch=$(mktemp -d)
  log=$(mktemp)
  if ! build-fuzz/tests/fuzz/${target}_fuzz -max_total_time="$seconds" -max_len=65536 \
      -rss_limit_mb=2048 -print_final_stats=1 "$scratch" "tests/fuzz/corpus/$target" > "$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: ${target}_fuzz found a new crashing input (add it to tests/fuzz/corpus/$target with the fix)"
    exit 1
  fi
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  echo "fuzz: ${target}_fuzz: $runs executions in ${seconds} s, no crash, no sanitizer report"
  rm -rf "$scratch" "$log"
done

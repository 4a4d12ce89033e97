#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# FUZZ_SECONDS (default 60) from the committed corpus. Any crash, leak or
# sanitizer report fails the run; new inputs go to a scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DSTACKMAPD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug > /dev/null
cmake --build build-fuzz -j"$(nproc)" --target fsmb_fuzz kallsyms_fuzz http_request_fuzz json_export_fuzz > /dev/null
for target in fsmb kallsyms http_request json_export; do
  scratch=$(mktemp -d)
  log=$(mktemp)
  if ! build-fuzz/tests/fuzz/${target}_fuzz -max_total_time="$seconds" -max_len=65536 \
      -rss_limit_mb=2048 -print_final_stats=1 "$scratch" "tests/fuzz/corpus/$target" > "$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: ${target}_fuzz failed"
    exit 1
  fi
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  echo "fuzz: ${target}_fuzz: $runs executions in ${seconds} s, no crash, no sanitizer report"
  rm -rf "$scratch" "$log"
done

#!/usr/bin/env bash
# Configures and builds stackmapd into build/ (BPF object, skeleton, daemon, tests).
# Arguments go to cmake: scripts/test.sh (CI) passes -DSTACKMAPD_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTACKMAPD_WERROR=OFF "$@" > /dev/null
cmake --build build -j"$(nproc)"

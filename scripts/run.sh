#!/usr/bin/env bash
# A new user's first run: install, build, then show the 20 most frequent
# kernel stacks of kmem:kmem_cache_alloc over 5 seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
exec build/stackmapd --top 20 "$@"

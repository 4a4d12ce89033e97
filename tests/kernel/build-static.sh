#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the static guest-side check of the tracefs backend
# (tests/kernel/tracefs_check.cpp) into OUT/stackmapd-tracefs-check.
# Usage: build-static.sh PROJECT_ROOT OUT_DIR
#
# The daemon's sources that build without the BPF skeleton go into an
# archive, so the link pulls only what the check uses (the tracefs backend,
# the exporters and what they need), whatever the library grows into.
set -euo pipefail
root=$1 out=$2
mkdir -p "$out/obj"
rm -f "$out/obj"/*.o "$out/libdaemon.a"
# spdlog and fmt header-only: Debian ships neither as a static library.
flags="-std=c++20 -O2 -DSPDLOG_FMT_EXTERNAL -DFMT_HEADER_ONLY -I$root -I$root/include"
export flags out
find "$root/daemon" -name '*.cpp' | xargs -P "$(nproc)" -I{} sh -c \
	'o="$out/obj/$(basename {} .cpp).o"; g++ $flags -c {} -o "$o" 2>/dev/null || echo "skipped {} (needs the BPF build)"'
# The flame graph's script, embedded as daemon/CMakeLists.txt does (stackmapd_embed).
cmake -DOUT="$out/flamegraph_script.cpp" -DVARS=kFlameGraphScript \
	-DFILES="$root/daemon/export/flamegraph.js" -DHEADER=daemon/export/flamegraph_script.h \
	-DNAMESPACE=stackmapd -P "$root/cmake/embed_files.cmake"
g++ $flags -c "$out/flamegraph_script.cpp" -o "$out/obj/flamegraph_script.o"
# The version and revision (daemon/sys/build_info.h), written as the build does.
version=$(sed -n 's/^project(stackmapd VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
cmake -DSRC="$root" -DOUT="$out/build_info.cpp" -DVERSION="$version" -P "$root/cmake/build_info.cmake"
g++ $flags -c "$out/build_info.cpp" -o "$out/obj/build_info.o"
ar rcs "$out/libdaemon.a" "$out"/obj/*.o
# shellcheck disable=SC2086
g++ $flags -Wall -Wextra -static "$root/tests/kernel/tracefs_check.cpp" \
	"$out/libdaemon.a" -lbpf -ldw -lelf -lz -lbz2 -llzma -pthread \
	-o "$out/stackmapd-tracefs-check"

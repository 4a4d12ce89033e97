#!/usr/bin/env bash
# Cross-builds stackmapd for arm64 (Android phones, aarch64 Linux) into
# build-arm64/: a statically linked aarch64 `stackmapd`, the BPF object for
# arm64 (build-arm64/bpf/stackmapd.bpf.o, and bpf/bpfloader/{r,s}/stackmapd.o
# for Android's bpfloader) and the unit tests, then runs the unit tests and
# the bpfloader rule check of both objects (bpfloader_objects) under
# qemu-aarch64-static. As root on Debian 12 (amd64).
#
# The BPF object needs no kernel's BTF (bpf/kernel_types.h): it is the same
# object as the x86 build's. Unit tests only: the BPF, CLI and service tests
# need a kernel of the target's architecture, and ThreadSanitizer does not run
# under qemu-user (table_concurrency_test runs in the native build).
#
#   STACKMAPD_ARM64_NO_DEPS=1  skip the apt-get step (packages already there)
#   STACKMAPD_ARM64_NO_TESTS=1 build stackmapd and the BPF object only
# Arguments go to cmake: scripts/test-arm64.sh (CI) passes -DSTACKMAPD_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-arm64

if [[ ${STACKMAPD_ARM64_NO_DEPS:-0} != 1 ]]; then
	export DEBIAN_FRONTEND=noninteractive
	# Wait for another apt/dpkg instead of failing on its lock.
	apt=(apt-get -o DPkg::Lock::Timeout=600 -qq)
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		dpkg --add-architecture arm64
	fi
	"${apt[@]}" update
	# Host tools (amd64), then the arm64 libraries: libbpf, libelf, zlib and libtraceevent
	# are linked from their .a; spdlog and fmt are used header-only;
	# libsystemd-dev:arm64 only satisfies pkg-config (STACKMAPD_STATIC
	# replaces it with tests/kernel/sd_daemon_shim.c).
	"${apt[@]}" install -y --no-install-recommends \
		build-essential cmake pkg-config clang llvm bpftool file ccache \
		g++-aarch64-linux-gnu qemu-user-static \
		libcli11-dev nlohmann-json3-dev \
		libbpf-dev:arm64 libelf-dev:arm64 libdw-dev:arm64 libbz2-dev:arm64 liblzma-dev:arm64 \
		zlib1g-dev:arm64 libtraceevent-dev:arm64 \
		libspdlog-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 \
		libsystemd-dev:arm64 > /dev/null
fi

launcher=()
if command -v ccache > /dev/null; then
	launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# MinSizeRel: -Os, no debug info; a phone's /system is small.
cmake -S . -B "$build" \
	-DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
	-DCMAKE_BUILD_TYPE=MinSizeRel \
	-DSTACKMAPD_STATIC=ON \
	-DSTACKMAPD_BENCH=OFF \
	-DSTACKMAPD_WERROR=OFF \
	"${launcher[@]}" "$@" > /dev/null

targets=(stackmapd stackmapd_bpfloader_obj)
[[ ${STACKMAPD_ARM64_NO_TESTS:-0} == 1 ]] || targets+=(unit_tests bpfloader_check)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

# The deliverable must really be a static aarch64 executable.
desc=$(file -b "$build/stackmapd")
echo "$build/stackmapd: $desc"
if [[ $desc != *"ARM aarch64"* || $desc != *"statically linked"* ]]; then
	echo "build-arm64.sh: $build/stackmapd is not a statically linked aarch64 executable" >&2
	exit 1
fi
for obj in "$build/bpf/stackmapd.bpf.o" "$build/bpf/bpfloader/"{r,s}/stackmapd.o; do
	echo "$obj: $(file -b "$obj")"
done

if [[ ${STACKMAPD_ARM64_NO_TESTS:-0} != 1 ]]; then
	# The toolchain file sets CMAKE_CROSSCOMPILING_EMULATOR, so ctest runs
	# the test binary as `qemu-aarch64-static unit_tests` (label qemu: the
	# unit tests, those of them that read this kernel's kallsyms, and
	# bpfloader_objects: the ELF rules on this build's two bpfloader objects).
	ctest --test-dir "$build" -L qemu --output-on-failure
fi

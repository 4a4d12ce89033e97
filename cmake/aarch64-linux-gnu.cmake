# CMake toolchain file: cross-compile stackmapd for arm64 (aarch64) with
# Debian's cross toolchain (g++-aarch64-linux-gnu) and multiarch arm64
# libraries (dpkg --add-architecture arm64; libbpf-dev:arm64 ...).
#   cmake -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DSTACKMAPD_STATIC=ON
# scripts/build-arm64.sh does all of it. The BPF object is the same as the
# native build's (bpf/kernel_types.h); clang -target bpf and bpftool stay the
# build host's programs.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch, no sysroot: arm64 libraries live in /usr/lib/aarch64-linux-gnu,
# headers in /usr/include (arch-independent) and
# /usr/include/aarch64-linux-gnu (the cross compiler searches both).
# Programs (clang, bpftool, python3) are the host's; libraries, headers and
# CMake packages must be the target's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config must read the arm64 .pc files, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Tests run under qemu-user (package qemu-user-static); ctest and
# add_test() commands prefix them with this.
find_program(STACKMAPD_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(STACKMAPD_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${STACKMAPD_QEMU_AARCH64})
endif()

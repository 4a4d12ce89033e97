#!/usr/bin/env bash
# Installs what stackmapd needs to build and test on Debian 12, as root.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config clang llvm libclang-rt-14-dev \
  libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev libtraceevent-dev \
  libspdlog-dev libcli11-dev nlohmann-json3-dev libsystemd-dev libgtest-dev \
  python3 util-linux debootstrap systemd-container chromium fonts-dejavu-core strace \
  clang-format > /dev/null
# <sys/sdt.h>, for the USDT probe of tests/workloads/uprobe_workload.c (tests/uprobe_test.sh).
apt-get install -y -qq --no-install-recommends systemtap-sdt-dev > /dev/null
# The real consumers of --pprof and --perfetto, for tests/pprof_test.sh and tests/perfetto_test.sh.
apt-get install -y -qq --no-install-recommends \
  golang-1.19-go golang-github-google-pprof-dev protobuf-compiler > /dev/null
# The load of tests/soak_test.sh.
apt-get install -y -qq --no-install-recommends stress-ng > /dev/null
# The real consumers of /metrics and --metrics-textfile, for tests/http_test.sh.
apt-get install -y -qq --no-install-recommends prometheus prometheus-node-exporter > /dev/null
# The browser test of the live page (tests/page_test.sh): node and npm, which
# installs puppeteer-core into the build directory. A node from elsewhere
# (NodeSource) brings its own npm, which Debian's npm package would conflict with.
apt-get install -y -qq --no-install-recommends nodejs > /dev/null
command -v npm > /dev/null || apt-get install -y -qq --no-install-recommends npm > /dev/null

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Tests the ftrace stackmap kernel series (packaging/kernel/) in a booted
# Linux 6.12 under qemu (TCG), as root on Debian 12:
#   1. installs the packages it needs (apt-get);
#   2. untars Debian's linux-source-6.12, applies the series and runs the
#      tree's scripts/checkpatch.pl --strict on every patch (a report fails
#      the run; the stored patches have no Signed-off-by, which
#      packaging/kernel/make-series.sh adds for the submitter, so only that
#      check is left out);
#   3. builds a minimal kernel (tinyconfig + tests/kernel/min.config, with BPF
#      and BTF from tests/kernel/bpf.config) and a KASAN + lockdep one
#      (min.config + tests/kernel/debug.config), in separate O= dirs;
#   4. builds stackmapd statically (cmake -DSTACKMAPD_STATIC=ON) and boots each
#      kernel with a busybox initramfs whose /init (tests/kernel/guest-init.sh)
#      runs the series' selftest, a stress of inserts on both vCPUs with resets
#      and stack_map_bin reads, pool exhaustion at ftrace_stackmap.bits=10,
#      the memory cost and events kept per MB of trace buffer, the daemon's
#      tracefs backend and, on the min kernel, its BPF backend (-f through
#      fentry and through kprobes, tracepoint, perf_event profiling);
#   5. parses the serial logs; exits non-zero on any failure.
#
# Work files live in $KTEST_WORK (default /var/tmp/stackmapd-kernel): source,
# build dirs, ccache, logs; one run at a time uses it (a second waits). A
# rerun with an unchanged series only reboots.
#
# Options:
#   --no-deps         do not run apt-get
#   --only min|debug  build and boot one variant
#   --stackmapd PATH  static program to run in the guest as the tracefs backend
#                     check (default: build tests/kernel/tracefs_check.cpp)
#   --no-stackmapd    skip the daemon's tracefs backend
#   --daemon PATH     the static stackmapd to run in the guest as /bin/stackmapd
#                     (default: build one in $KTEST_WORK/stackmapd-static with
#                     -DSTACKMAPD_STATIC=ON, reusing that build dir on reruns)
#   --no-daemon       no stackmapd in the guest (skips its tracefs and BPF runs)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${KTEST_WORK:-/var/tmp/stackmapd-kernel}
JOBS=${JOBS:-$(nproc)}
SERIES_DIR=$ROOT/packaging/kernel
KDIR=$ROOT/tests/kernel
TARBALL=/usr/src/linux-source-6.12.tar.xz
QEMU_TIMEOUT=${QEMU_TIMEOUT:-900}
deps=1
variants="min debug"
stackmapd_bin=""
daemon_bin=""
want_stackmapd=1
want_daemon=1

while [ $# -gt 0 ]; do
	case "$1" in
	--no-deps) deps=0 ;;
	--only) variants=$2; shift ;;
	--stackmapd) stackmapd_bin=$2; shift ;;
	--no-stackmapd) want_stackmapd=0 ;;
	--daemon) daemon_bin=$2; shift ;;
	--no-daemon) want_daemon=0 ;;
	-h|--help) sed -n '3,32p' "$0"; exit 0 ;;
	*) echo "kernel-test: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done

log() { echo "kernel-test: $*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s; }
T0=$(now)

[ "$(id -u)" = 0 ] || die "run as root (apt-get, and the guest image needs root-owned files)"
mkdir -p "$WORK/logs"
# One run at a time per work directory: each run's builds replace the
# other's files (a second checkout's run waits, or takes its own KTEST_WORK).
exec 9> "$WORK/.lock"
if ! flock -n 9; then
	log "another kernel-test uses $WORK: waiting for it (or set KTEST_WORK to another directory)"
	flock 9
fi

# --- 1. packages ---
# The second group builds the static stackmapd (see scripts/deps.sh).
PKGS="linux-source-6.12 qemu-system-x86 busybox-static build-essential bc flex bison
      libssl-dev libelf-dev dwarves cpio ccache xz-utils gzip patch python3 kmod file
      python3-ply python3-git
      cmake pkg-config clang llvm libbpf-dev bpftool zlib1g-dev libsystemd-dev
      libdw-dev libbz2-dev liblzma-dev
      libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev"
if [ $deps = 1 ]; then
	missing=""
	for p in $PKGS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
			missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		log "installing:$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		# shellcheck disable=SC2086
		apt-get install -y -qq --no-install-recommends $missing > "$WORK/logs/apt.log" ||
			die "apt-get install failed, see $WORK/logs/apt.log"
	fi
fi
[ -f "$TARBALL" ] || die "$TARBALL missing: apt-get install linux-source-6.12"

# --- 2. source + series ---
mapfile -t PATCHES < <(ls "$SERIES_DIR"/[0-9][0-9][0-9][0-9]-*.patch | grep -v /0000-)
[ ${#PATCHES[@]} -gt 0 ] || die "no patches in $SERIES_DIR"
key=$( (stat -c '%s %Y' "$TARBALL"; cat "${PATCHES[@]}") | sha256sum | cut -c1-16)
SRC=$WORK/linux
if [ "$(cat "$WORK/linux.stamp" 2>/dev/null)" != "$key" ]; then
	log "unpacking $TARBALL and applying ${#PATCHES[@]} patches"
	rm -rf "$SRC" "$WORK/linux.stamp" "$WORK"/build-*
	mkdir -p "$SRC"
	tar -xf "$TARBALL" -C "$SRC" --strip-components=1
	for p in "${PATCHES[@]}"; do
		patch -p1 -d "$SRC" --batch --forward -s < "$p" ||
			die "$(basename "$p") does not apply to $(make -s -C "$SRC" kernelversion)"
	done
	echo "$key" > "$WORK/linux.stamp"
fi
log "source: Linux $(make -s -C "$SRC" kernelversion) + ${#PATCHES[@]} patches"

# checkpatch's SPDX check runs python3 with ply and git: Debian's, not a
# python3 earlier in PATH (pyenv, venv) that may lack them.
checkpatch_fail=0
: > "$WORK/logs/checkpatch.log"
for p in "${PATCHES[@]}"; do
	if (cd "$SRC" && PATH=/usr/bin:/bin:$PATH ./scripts/checkpatch.pl --strict \
		--ignore MISSING_SIGN_OFF -q "$p") >> "$WORK/logs/checkpatch.log" 2>&1; then
		echo "KTEST: checkpatch PASS $(basename "$p")" >> "$WORK/logs/checkpatch.log"
	else
		echo "KTEST: checkpatch FAIL $(basename "$p")" >> "$WORK/logs/checkpatch.log"
		checkpatch_fail=1
	fi
done
log "checkpatch --strict: $(grep -c '^KTEST: checkpatch PASS' "$WORK/logs/checkpatch.log")/${#PATCHES[@]} clean"

# --- 3. kernels ---
export CCACHE_DIR=$WORK/ccache CCACHE_BASEDIR=$WORK CCACHE_MAXSIZE=4G
CC="ccache gcc"
command -v ccache > /dev/null || CC=gcc

build_kernel() { # variant fragments...
	local v=$1; shift
	local o=$WORK/build-$v t=$(now)
	mkdir -p "$o"
	make -s -C "$SRC" O="$o" CC="$CC" tinyconfig > /dev/null
	"$SRC/scripts/kconfig/merge_config.sh" -m -O "$o" "$o/.config" "$@" > /dev/null
	make -s -C "$SRC" O="$o" CC="$CC" olddefconfig > /dev/null
	# merge_config only warns: check that every wanted symbol really is set.
	local bad=0 line
	while read -r line; do
		case "$line" in
		CONFIG_*=*)
			grep -qx "$line" "$o/.config" || { log "$v: $line is not set"; bad=1; } ;;
		"# CONFIG_"*" is not set")
			line=${line#\# }; line=${line%% *}
			! grep -q "^$line=" "$o/.config" || { log "$v: $line is set"; bad=1; } ;;
		esac
	done < <(cat "$@")
	[ $bad = 0 ] || die "$v config lacks wanted symbols (see above)"
	log "building $v kernel in $o"
	make -C "$SRC" O="$o" CC="$CC" -j"$JOBS" bzImage > "$WORK/logs/build-$v.log" 2>&1 ||
		{ tail -30 "$WORK/logs/build-$v.log"; die "$v kernel build failed"; }
	log "$v kernel built in $(($(now) - t)) s"
	echo "build_$v=$(($(now) - t))" >> "$WORK/logs/times"
}

: > "$WORK/logs/times"
for v in $variants; do
	case $v in
	min) build_kernel min "$KDIR/min.config" "$KDIR/bpf.config" ;;
	debug) build_kernel debug "$KDIR/min.config" "$KDIR/debug.config" ;;
	*) die "unknown variant '$v' (min or debug)" ;;
	esac
done

# --- the daemon, static, for the guest ---
# The tracefs backend (daemon/tracefs/tracefs_session.cpp) with the exporters, in a
# static check program (tests/kernel/tracefs_check.cpp) run in the guest.
if [ $want_stackmapd = 1 ] && [ -z "$stackmapd_bin" ]; then
	log "building the static tracefs backend check"
	if "$KDIR/build-static.sh" "$ROOT" "$WORK/stackmapd" > "$WORK/logs/stackmapd.log" 2>&1; then
		stackmapd_bin=$WORK/stackmapd/stackmapd-tracefs-check
	else
		tail -20 "$WORK/logs/stackmapd.log"
		die "static build of the tracefs backend check failed"
	fi
fi

# The program itself, static, as /bin/stackmapd in the guest.
if [ $want_daemon = 1 ] && [ -z "$daemon_bin" ]; then
	log "building the static stackmapd in $WORK/stackmapd-static"
	t=$(now)
	# A build dir belongs to one source tree: another checkout starts it over.
	cache=$WORK/stackmapd-static/CMakeCache.txt
	if [ -f "$cache" ] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$cache"; then
		rm -rf "$WORK/stackmapd-static"
	fi
	# Release: the guest needs no debug info of the daemon, and -g is a third of the build.
	if { cmake -S "$ROOT" -B "$WORK/stackmapd-static" -DSTACKMAPD_STATIC=ON \
		-DCMAKE_BUILD_TYPE=Release -DSTACKMAPD_TESTS=OFF -DSTACKMAPD_BENCH=OFF &&
	     cmake --build "$WORK/stackmapd-static" -j"$JOBS" --target stackmapd; } \
	    > "$WORK/logs/stackmapd-static.log" 2>&1; then
		daemon_bin=$WORK/stackmapd-static/stackmapd
	else
		tail -30 "$WORK/logs/stackmapd-static.log"
		die "static build of stackmapd failed (see $WORK/logs/stackmapd-static.log)"
	fi
	echo "build_stackmapd=$(($(now) - t))" >> "$WORK/logs/times"
fi
[ -z "$daemon_bin" ] || [ -x "$daemon_bin" ] || die "--daemon $daemon_bin: not an executable"

# --- 4. initramfs ---
INITRD=$WORK/initramfs.cpio.gz
build_initramfs() {
	local r=$WORK/initramfs
	rm -rf "$r"
	mkdir -p "$r"/{bin,sbin,proc,sys,dev,tmp,etc,root}
	cp /bin/busybox "$r/bin/busybox"
	for a in $("$r/bin/busybox" --list); do
		[ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"
	done
	install -m 0755 "$KDIR/guest-init.sh" "$r/init"
	cp -r "$SRC/tools/testing/selftests/ftrace" "$r/ftrace"
	if [ -n "$stackmapd_bin" ]; then
		install -m 0755 "$stackmapd_bin" "$r/bin/stackmapd-tracefs-check"
	fi
	if [ -n "$daemon_bin" ]; then
		file -L "$daemon_bin" 2>/dev/null | grep -q "static.*linked" ||
			log "warning: $daemon_bin may not be static; the guest has no libraries"
		# stripped: 36 MB with debug info, under 4 MB without
		install -s -m 0755 "$daemon_bin" "$r/bin/stackmapd"
	fi
	(cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD"
}
build_initramfs

# --- 5. boots ---
boot() { # variant mode extra-cmdline
	local v=$1 mode=$2 extra=$3
	local logf=$WORK/logs/guest-$v-$mode.log t=$(now) rc=0
	log "booting $v kernel (ktest_mode=$mode $extra)"
	timeout "$QEMU_TIMEOUT" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2,sockets=2 -m 1G \
		-nographic -no-reboot -kernel "$WORK/build-$v/arch/x86/boot/bzImage" \
		-initrd "$INITRD" \
		-append "console=ttyS0 panic=-1 oops=panic loglevel=4 ktest_mode=$mode $extra" \
		< /dev/null > "$logf" 2>&1 || rc=$?
	echo "boot_${v}_$mode=$(($(now) - t))" >> "$WORK/logs/times"
	[ $rc = 0 ] || log "qemu exited with $rc (124: timeout)"
}

for v in $variants; do
	case $v in
	min)
		boot min full ""
		boot min exhaust "ftrace_stackmap.bits=10"
		;;
	debug)
		boot debug debug "ftrace_stackmap.bits=10 ktest_stress=30"
		;;
	esac
done

# --- 6. verdict ---
fail=0
echo "== checkpatch --strict (--ignore MISSING_SIGN_OFF)"
grep -v '^KTEST: checkpatch' "$WORK/logs/checkpatch.log" | sed 's/^/   | /' || true
grep '^KTEST: checkpatch' "$WORK/logs/checkpatch.log" | sed 's/^/   /'
[ $checkpatch_fail = 0 ] || fail=1
for logf in "$WORK"/logs/guest-*.log; do
	name=$(basename "$logf" .log)
	case " $variants " in *" $(echo "$name" | cut -d- -f2) "*) ;; *) continue ;; esac
	echo "== $name"
	grep -E '^KTEST(-FIGURE)?: ' "$logf" | tr -d '\r' | sed 's/^/   /' || true
	if grep -qE 'Kernel panic|BUG: |KASAN: |WARNING: |Call Trace:|general protection|DEBUG_LOCKS_WARN' "$logf"; then
		echo "   kernel problem in the serial log:"
		grep -E -A3 'Kernel panic|BUG: |KASAN: |WARNING: |Call Trace:|general protection|DEBUG_LOCKS_WARN' "$logf" | head -40 | sed 's/^/   | /'
		fail=1
	fi
	if grep -q '^KTEST: .* FAIL' "$logf"; then
		fail=1
	fi
	if ! tr -d '\r' < "$logf" | grep -qx 'KTEST-VERDICT: PASS'; then
		echo "   no passing verdict (see $logf)"
		tail -20 "$logf" | sed 's/^/   | /'
		fail=1
	fi
done

fig() { tr -d '\r' < "$WORK/logs/guest-$1.log" 2>/dev/null | sed -n "s/^KTEST-FIGURE: $2=//p" | tail -1; }
if [[ " $variants " == *" min "* ]]; then
	echo "== figures"
	echo "   events kept per MB of trace buffer (kmem:kmem_cache_alloc + stacktrace, same buffer_size_kb):"
	echo "     full stacks: $(fig min-full events_per_mb_full_stacks)   with options/stackmap: $(fig min-full events_per_mb_stackmap)"
	echo "   memory: table $(fig min-full table_memory_kb) kB at bits=$(fig min-full stackmap_bits), MemFree -$(fig min-full memfree_cost_kb) kB, Slab +$(fig min-full slab_cost_kb) kB on first enable; 0 kB before"
	echo "   -f vfs_read --comm dd over dd's $(fig min-full dd_reads) reads: fentry $(fig min-full fentry_dd_hits) hits, kprobe $(fig min-full kprobe_dd_hits) hits; kprobes on 'vfs_rea*': $(fig min-full kprobe_glob_functions) functions"
	echo "   BPF backend (TCG, ns are emulated): fentry vfs_read $(fig min-full fentry_vfs_read_hits) hits at $(fig min-full fentry_ns_per_run_tcg) ns/run; 'vfs_rea*' $(fig min-full fentry_glob_functions) functions; sched_switch $(fig min-full tracepoint_sched_switch_hits) hits; profile $(fig min-full profile_samples) samples"
	echo "   exhaustion (bits=10): $(fig min-exhaust exhaust_us_per_event_before) us/event before, $(fig min-exhaust exhaust_us_per_event_after) us/event after; drop_pool_full $(fig min-exhaust exhaust_drop_pool_full)"
fi
echo "== times (s): $(tr '\n' ' ' < "$WORK/logs/times")total=$(($(now) - T0))"
if [ $fail = 0 ]; then
	echo "kernel-test: PASS"
else
	echo "kernel-test: FAIL (logs in $WORK/logs)"
fi
exit $fail

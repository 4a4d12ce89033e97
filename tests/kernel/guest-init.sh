#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of the test guest (busybox). Runs the ftrace stackmap checks chosen by
# ktest_mode= on the kernel command line and reports on the serial console:
#   KTEST: <check> PASS|FAIL <details>
#   KTEST-FIGURE: <name>=<value>
#   KTEST-VERDICT: PASS|FAIL
# then reboots. scripts/kernel-test.sh parses these lines.
#   ktest_mode=full     selftest, lazy allocation and memory cost, events per MB,
#                       stat lines, ids after a reset, stress on both vCPUs,
#                       tracefs backend of stackmapd, and its BPF backend
#                       (-f through fentry and through kprobes, tracepoint,
#                       profile; needs BTF)
#   ktest_mode=exhaust  pool exhaustion (boot with ftrace_stackmap.bits=10)
#   ktest_mode=debug    selftest, ids after a reset, stress and exhaustion
#                       (sanitizer kernel)
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing
T=/sys/kernel/tracing
FAILED=0
mode=$(sed -n 's/.*ktest_mode=\([a-z]*\).*/\1/p' /proc/cmdline)
stress_secs=$(sed -n 's/.*ktest_stress=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$stress_secs" ] || stress_secs=20

result() { # name PASS|FAIL details...
	echo "KTEST: $*"
	[ "$2" = PASS ] || FAILED=1
}

figure() { # name value
	echo "KTEST-FIGURE: $1=$2"
}

stat_val() { # dir field
	grep "^$2:" "$1/stack_map_stat" | awk '{print $2}'
}

meminfo() { # field, in kB
	awk -v f="$1:" '$1 == f {print $2}' /proc/meminfo
}

# Hundredths of a second since boot.
now_cs() {
	awk '{split($1, a, "."); print a[1] * 100 + a[2]}' /proc/uptime
}

# Allocation-heavy work: fork, exec, walk /proc.
workload() { # iterations
	i=0
	while [ $i -lt "$1" ]; do
		/bin/true
		ls /proc > /dev/null
		i=$((i + 1))
	done
}

reset_tracing() { # dir
	echo 0 > "$1/tracing_on"
	echo nop > "$1/current_tracer" 2>/dev/null
	echo 0 > "$1/events/enable"
	echo 0 > "$1/options/stacktrace"
	echo 0 > "$1/options/stackmap"
	echo > "$1/trace"
}

# Walks an FSMB v2 file record by record; prints "<nr_stacks> OK" when the
# sizes add up exactly, else an error. Only stack 4294967293 (--profile's
# samples taken in user mode) has no frame.
fsmb_check() { # file
	od -An -v -tu4 -w4 "$1" | awk '
		{ w[n++] = $1 }
		END {
			if (n < 4) { print "short header"; exit }
			if (w[0] != 1179472706 || w[1] != 2 || w[3] != 0) {
				print "bad header " w[0] " " w[1]; exit
			}
			p = 4
			for (s = 0; s < w[2]; s++) {
				if (p + 4 > n) { print "truncated at stack " s; exit }
				# nr 0: only the empty stack of samples taken in user mode.
				nr = w[p + 1]
				if ((nr < 1 && w[p] != 4294967293) || nr > 64 || w[p + 3] != 0) {
					print "bad record " s " nr " nr; exit
				}
				p += 4 + 2 * nr
			}
			if (p != n) { print "size mismatch " p " != " n; exit }
			print w[2] " OK"
		}'
}

check_dmesg() { # name
	# Lockdep, KASAN, RCU and WARN_ON reports all carry one of these.
	if dmesg | grep -E 'BUG:|WARNING:|KASAN:|Call Trace:|general protection|DEBUG_LOCKS_WARN|INFO: lockdep is turned off' > /tmp/dmesg.bad; then
		result "$1-dmesg" FAIL "kernel reported problems:"
		cat /tmp/dmesg.bad
		# The whole reports (the console shows only loglevel < 4).
		dmesg | grep -E -A24 'BUG:|WARNING:|KASAN:|rcu: INFO|general protection|DEBUG_LOCKS_WARN' |
			head -120 | sed 's/^/    dmesg| /'
	else
		result "$1-dmesg" PASS "no BUG/WARNING/KASAN/lockdep report"
	fi
}

run_selftest() {
	t0=$(now_cs)
	if (cd /ftrace && ./ftracetest -v --fail-unsupported --fail-unresolved -l - \
	    test.d/ftrace/stackmap-*.tc); then
		result selftest PASS "ftracetest stackmap-*.tc (top level and instance)"
	else
		result selftest FAIL "ftracetest stackmap-*.tc"
	fi
	figure selftest_seconds "$((($(now_cs) - t0) / 100))"
}

run_memory() {
	mem_kb=$(stat_val $T memory_kb)
	if [ "$mem_kb" = 0 ]; then
		result lazy-alloc PASS "no table before options/stackmap is set"
	else
		result lazy-alloc FAIL "table of $mem_kb kB allocated at boot"
	fi
	sync
	free0=$(meminfo MemFree)
	slab0=$(meminfo Slab)
	vm0=$(meminfo VmallocUsed)
	echo 1 > $T/options/stackmap
	free1=$(meminfo MemFree)
	slab1=$(meminfo Slab)
	vm1=$(meminfo VmallocUsed)
	mem_kb=$(stat_val $T memory_kb)
	echo 0 > $T/options/stackmap
	figure memfree_before_kb "$free0"
	figure memfree_after_enable_kb "$free1"
	figure memfree_cost_kb "$((free0 - free1))"
	figure slab_cost_kb "$((slab1 - slab0))"
	figure vmalloc_cost_kb "$((vm1 - vm0))"
	figure table_memory_kb "$mem_kb"
	figure stackmap_bits "$(stat_val $T bits)"
	# The table is vmalloc()ed: VmallocUsed shows it; MemFree swings with
	# the per-CPU page lists and is only reported.
	if [ "$mem_kb" -gt 0 ] && [ "$((vm1 - vm0))" -ge "$((mem_kb / 2))" ]; then
		result memory-cost PASS "enable cost: vmalloc +$((vm1 - vm0)) kB (table $mem_kb kB, slab +$((slab1 - slab0)) kB, MemFree -$((free0 - free1)) kB)"
	else
		result memory-cost FAIL "table $mem_kb kB, vmalloc delta $((vm1 - vm0)) kB"
	fi
}

# kmem:kmem_cache_alloc with stacks until the buffer wraps; prints events kept.
events_kept() { # stackmap 0|1
	reset_tracing $T
	echo 256 > $T/buffer_size_kb
	echo 0 > $T/stack_map
	echo "$1" > $T/options/stackmap
	echo 1 > $T/options/stacktrace
	echo 1 > $T/events/kmem/kmem_cache_alloc/enable
	echo 1 > $T/tracing_on
	workload 150
	echo 0 > $T/tracing_on
	echo 0 > $T/events/kmem/kmem_cache_alloc/enable
	kept=$(grep -c ' kmem_cache_alloc: ' $T/trace)
	overrun=$(cat $T/per_cpu/cpu*/stats | awk '/^overrun:/ {s += $2} END {print s + 0}')
	total_kb=$(cat $T/buffer_total_size_kb)
	reset_tracing $T
	echo "$kept $overrun $total_kb"
}

run_events_per_mb() {
	set -- $(events_kept 0)
	full=$1 full_over=$2 kb=$3
	set -- $(events_kept 1)
	ids=$1 ids_over=$2
	figure buffer_total_kb "$kb"
	figure events_per_mb_full_stacks "$((full * 1024 / kb))"
	figure events_per_mb_stackmap "$((ids * 1024 / kb))"
	figure events_overrun_full_stacks "$full_over"
	figure events_overrun_stackmap "$ids_over"
	if [ "$full_over" -gt 0 ] && [ "$ids_over" -gt 0 ] && [ "$ids" -gt "$full" ]; then
		result events-per-mb PASS "$((ids * 1024 / kb)) vs $((full * 1024 / kb)) kmem_cache_alloc events per MB ($((ids * 100 / full))%)"
	else
		result events-per-mb FAIL "kept $ids with stackmap vs $full (overruns $ids_over/$full_over)"
	fi
	echo 1408 > $T/buffer_size_kb
}

# stack_map_stat: the RFC's five lines first, with its meaning (hit_rate =
# hits * 100 / (hits + drops), first inserts among the hits, only once there
# is an event), then "truncated:" and the drop_* causes adding up to drops.
check_stat() { # name dir
	f=$2/stack_map_stat
	h=$(stat_val "$2" hits) d=$(stat_val "$2" drops) r=$(stat_val "$2" hit_rate)
	trunc=$(stat_val "$2" truncated)
	causes=$(($(stat_val "$2" drop_pool_full) + $(stat_val "$2" drop_probe_limit) + $(stat_val "$2" drop_busy)))
	first=$(head -4 "$f" | cut -d: -f1 | tr '\n' ' ')
	why=""
	[ "$first" = "entries table_size hits drops " ] || why="first lines '$first'"
	if [ "$((h + d))" -gt 0 ]; then
		[ "$(sed -n 5p "$f" | cut -d: -f1)" = hit_rate ] || why="$why; line 5 is not hit_rate"
		[ "$r" = "$((h * 100 / (h + d)))%" ] || why="$why; hit_rate $r != $h*100/($h+$d)"
	else
		! grep -q '^hit_rate:' "$f" || why="$why; hit_rate without events"
	fi
	[ -n "$trunc" ] && [ "$trunc" -le "$h" ] || why="$why; truncated '$trunc' (hits $h)"
	[ "$causes" = "$d" ] || why="$why; drop_* add up to $causes, drops $d"
	! grep -q '^drops_' "$f" || why="$why; old drops_* lines"
	if [ -z "$why" ]; then
		result "$1" PASS "hits $h, drops $d, hit_rate ${r:-(none)}, truncated $trunc"
	else
		result "$1" FAIL "${why#; }"
		cat "$f"
	fi
}

run_stat() {
	reset_tracing $T
	echo 1 > $T/options/stackmap
	echo 0 > $T/stack_map
	check_stat stat-empty $T
	echo 1 > $T/options/stacktrace
	echo 1 > $T/events/kmem/kmem_cache_alloc/enable
	echo 1 > $T/tracing_on
	workload 20
	echo 0 > $T/tracing_on
	check_stat stat-events $T
	figure truncated_events "$(stat_val $T truncated)"
	# Deeper than 64 frames is truncated to the innermost 64, never more.
	deepest=$(sed -n 's/^stack_id .*depth \([0-9]*\)\]$/\1/p' $T/stack_map | sort -n | tail -1)
	figure deepest_stack "$deepest"
	if [ -n "$deepest" ] && [ "$deepest" -le 64 ]; then
		result max-depth PASS "deepest stored stack $deepest frames (max_depth $(stat_val $T max_depth))"
	else
		result max-depth FAIL "deepest stored stack '$deepest'"
	fi
	reset_tracing $T
}

# A reset must not leave ids of the old table in the trace: such an id would
# resolve against the new table, where its slot may hold another stack.
# Events keep coming on both vCPUs across the reset.
run_reset_ids() {
	reset_tracing $T
	echo 4096 > $T/buffer_size_kb
	echo 1 > $T/options/stackmap
	echo 0 > $T/stack_map
	echo 1 > $T/options/stacktrace
	echo 1 > $T/events/kmem/kmem_cache_alloc/enable
	echo 1 > $T/tracing_on
	workload 20
	echo ktest-before-reset > $T/trace_marker
	before=$(grep -c '<stack_id [0-9]*>' $T/trace)
	rm -f /tmp/stop
	stress_cpu 0
	stress_cpu 1
	echo reset > $T/stack_map
	workload 10
	touch /tmp/stop
	wait
	echo 0 > $T/tracing_on
	echo 0 > $T/events/kmem/kmem_cache_alloc/enable
	cat $T/trace > /tmp/trace
	cat $T/stack_map > /tmp/stack_map
	stale=$(grep -c ktest-before-reset /tmp/trace)
	after=$(grep -c '<stack_id [0-9]*>' /tmp/trace)
	unresolved=0
	for id in $(grep -o '<stack_id [0-9]*>' /tmp/trace | tr -dc '0-9\n' | sort -u); do
		grep -q "^stack_id $id \[" /tmp/stack_map || unresolved=$((unresolved + 1))
	done
	reset_tracing $T
	echo 1408 > $T/buffer_size_kb
	figure reset_ids_before "$before"
	figure reset_ids_after "$after"
	if [ "$before" -gt 0 ] && [ "$stale" = 0 ] && [ "$after" -gt 0 ] && [ "$unresolved" = 0 ]; then
		result reset-ids PASS "$before ids before the reset gone; $after after it, all in the new stack_map"
	else
		result reset-ids FAIL "before $before, marker left $stale, after $after, unresolved ids $unresolved"
	fi
	check_dmesg reset-ids
}

stress_cpu() { # cpu
	taskset -c "$1" sh -c 'while [ ! -e /tmp/stop ]; do /bin/true; ls /proc > /dev/null; done' &
}

run_stress() {
	reset_tracing $T
	rm -f /tmp/stop
	echo 1 > $T/options/stackmap
	echo 1 > $T/options/stacktrace
	echo 1 > $T/events/kmem/kmem_cache_alloc/enable
	echo 1 > $T/events/kmem/kfree/enable
	echo 1 > $T/events/sched/sched_process_fork/enable
	echo 1 > $T/tracing_on
	# A second instance on kmem_cache_alloc for the whole stress: with two
	# probes or more the tracepoint's static call stays on the iterator, so
	# the instances made and removed below never re-patch the code that the
	# busy vCPUs run (qemu TCG mishandles that cross-modifying code: an int3
	# Oops in trace_kmem_cache_alloc, with or without this series).
	mkdir $T/instances/stress_keep
	echo 1 > $T/instances/stress_keep/options/stackmap
	echo 1 > $T/instances/stress_keep/options/stacktrace
	echo 1 > $T/instances/stress_keep/events/kmem/kmem_cache_alloc/enable
	stress_cpu 0
	stress_cpu 1
	end=$(($(now_cs) + stress_secs * 100))
	n=0 bad=0 checked=0 inst=0
	while [ "$(now_cs)" -lt "$end" ]; do
		n=$((n + 1))
		cat $T/stack_map_bin > /tmp/bin
		if [ $((n % 4)) = 1 ]; then
			r=$(fsmb_check /tmp/bin)
			checked=$((checked + 1))
			case "$r" in
			*" OK") ;;
			*) bad=$((bad + 1)); echo "bad stack_map_bin: $r" ;;
			esac
		fi
		cat $T/stack_map > /dev/null
		cat $T/stack_map_stat > /dev/null
		echo 0 > $T/stack_map
		# An instance with its own map, created and removed while busy.
		if [ $((n % 3)) = 0 ]; then
			d=$T/instances/stress$n
			mkdir $d
			echo 1 > $d/options/stackmap
			echo 1 > $d/options/stacktrace
			echo 1 > $d/events/kmem/kmem_cache_alloc/enable
			workload 2
			cat $d/stack_map_bin > /tmp/ibin
			r=$(fsmb_check /tmp/ibin)
			case "$r" in
			*" OK") ;;
			*) bad=$((bad + 1)); echo "bad instance stack_map_bin: $r" ;;
			esac
			echo 0 > $d/events/kmem/kmem_cache_alloc/enable
			echo 0 > $d/tracing_on
			rmdir $d && inst=$((inst + 1))
		fi
	done
	touch /tmp/stop
	wait
	echo 0 > $T/instances/stress_keep/events/kmem/kmem_cache_alloc/enable
	rmdir $T/instances/stress_keep
	echo 0 > $T/tracing_on
	resets=$(stat_val $T resets)
	hits=$(stat_val $T hits)
	reset_tracing $T
	figure stress_iterations "$n"
	figure stress_resets "$resets"
	figure stress_instances "$inst"
	if [ "$bad" = 0 ] && [ "$resets" -ge "$n" ] && [ "$checked" -gt 0 ]; then
		result stress PASS "$n rounds of reset + reads on 2 busy vCPUs, $checked FSMB files walked, $inst instances"
	else
		result stress FAIL "$bad bad FSMB files, $resets resets of $n"
	fi
	check_dmesg stress
}

run_exhaustion() {
	bits=$(stat_val $T bits)
	pool=$((1 << bits))
	reset_tracing $T
	echo 1 > $T/options/stackmap
	echo 0 > $T/stack_map
	echo 1 > $T/options/stacktrace
	echo 1 > $T/events/kmem/kmem_cache_alloc/enable
	echo 1 > $T/tracing_on
	workload 20
	ev0=$(($(stat_val $T hits) + $(stat_val $T drops)))
	t0=$(now_cs)
	workload 100
	t1=$(now_cs)
	ev1=$(($(stat_val $T hits) + $(stat_val $T drops)))
	echo 0 > $T/events/kmem/kmem_cache_alloc/enable
	echo 0 > $T/tracing_on

	# Fill a fresh pool with every other event of the system: a varied
	# workload gives many distinct stacks quickly, and none of them is a
	# kmem_cache_alloc stack, so each such event afterwards is a new stack
	# meeting a full pool.
	echo 0 > $T/stack_map
	# Every category but lock and preemptirq: with lockdep (debug kernel)
	# those fire on every lock and irq toggle, and a stack per event under
	# KASAN and TCG starves the CPU (an RCU stall in the fill loop below).
	for d in $T/events/*/; do
		case "$d" in */lock/|*/preemptirq/) ;; *) echo 1 > "$d/enable" ;; esac
	done
	echo 0 > $T/events/kmem/kmem_cache_alloc/enable
	echo 1 > $T/tracing_on
	tries=0
	while [ "$(stat_val $T entries)" -lt "$pool" ] && [ $tries -lt 30 ]; do
		workload 5
		find /sys /proc/self > /dev/null 2>&1
		tries=$((tries + 1))
	done
	echo 0 > $T/tracing_on
	echo 0 > $T/events/enable
	echo > $T/trace
	entries=$(stat_val $T entries)
	pool_drops0=$(stat_val $T drop_pool_full)

	echo 1 > $T/events/kmem/kmem_cache_alloc/enable
	echo 1 > $T/tracing_on
	ev2=$(($(stat_val $T hits) + $(stat_val $T drops)))
	t2=$(now_cs)
	workload 100
	t3=$(now_cs)
	ev3=$(($(stat_val $T hits) + $(stat_val $T drops)))
	echo 0 > $T/tracing_on
	pool_drops=$(stat_val $T drop_pool_full)
	check_stat exhaust-stat $T
	cat $T/stack_map_bin > /tmp/bin
	fsmb=$(fsmb_check /tmp/bin)
	reset_tracing $T

	e_before=$((ev1 - ev0)) e_after=$((ev3 - ev2))
	# microseconds per event, before and after exhaustion
	us_before=$(((t1 - t0) * 10000 / (e_before + 1)))
	us_after=$(((t3 - t2) * 10000 / (e_after + 1)))
	figure exhaust_bits "$bits"
	figure exhaust_entries "$entries"
	figure exhaust_drop_pool_full "$pool_drops"
	figure exhaust_events_before "$e_before"
	figure exhaust_events_after "$e_after"
	figure exhaust_drops_after "$((pool_drops - pool_drops0))"
	figure exhaust_us_per_event_before "$us_before"
	figure exhaust_us_per_event_after "$us_after"
	if [ "$entries" -eq "$pool" ] && [ "$((pool_drops - pool_drops0))" -ge "$((e_after / 2))" ] &&
	   [ "$e_after" -gt 0 ] && [ "$us_after" -le $((us_before * 3 + 5)) ] &&
	   [ "$fsmb" = "$pool OK" ]; then
		result exhaustion PASS "pool $entries/$pool full, drop_pool_full $pool_drops, $us_before us/event before vs $us_after after"
	else
		result exhaustion FAIL "entries $entries/$pool, drops $pool_drops0 -> $pool_drops, $us_before vs $us_after us/event, fsmb: $fsmb"
	fi
	check_dmesg exhaustion
}

# The daemon's tracefs backend, when a static stackmapd was packed in.
run_stackmapd() {
	[ -x /bin/stackmapd-tracefs-check ] || return 0
	if /bin/stackmapd-tracefs-check; then
		result stackmapd-tracefs PASS "tracefs backend exports checked"
	else
		result stackmapd-tracefs FAIL "tracefs backend"
	fi
	check_dmesg stackmapd
}

# The real daemon, when scripts/kernel-test.sh --daemon packed one in: a
# timed --backend tracefs session, exports checked against DESIGN.md.
run_daemon() {
	[ -x /bin/stackmapd ] || return 0
	rm -rf /tmp/daemon-out
	(workload 300) &
	if stackmapd --backend tracefs -e kmem:kmem_cache_alloc --duration 2 \
	    --output /tmp/daemon-out > /tmp/daemon.log 2>&1 &&
	   grep -q '^entries: *[1-9][0-9]* / ' /tmp/daemon-out/stack_map_stat &&
	   [ "$(fsmb_check /tmp/daemon-out/stack_map_bin | cut -d' ' -f2)" = OK ] &&
	   grep -q '^stack_id [0-9]* \[ref [0-9]*, depth [0-9]*\]$' /tmp/daemon-out/stack_map; then
		result stackmapd-daemon PASS "stackmapd --backend tracefs: $(grep '^entries:' /tmp/daemon-out/stack_map_stat)"
	else
		result stackmapd-daemon FAIL "stackmapd --backend tracefs"
		cat /tmp/daemon.log
	fi
	wait
}

# --- the daemon's BPF backend (min kernel: BPF, BTF, perf events) ---

# How many stacks of a stack_map text export hold a frame of function $2 and,
# deeper down (a caller), one of $3 (if given).
stacks_with() { # file callee [caller]
	awk -v a="$2" -v b="$3" '
		function done() { if (sa && (b == "" || sb)) n++; sa = sb = 0 }
		/^stack_id / { done(); next }
		$2 ~ "^" a "\\+" { sa = 1; next }
		sa && b != "" && $2 ~ "^" b "\\+" { sb = 1 }
		END { done(); print n + 0 }' "$1"
}

# Runs of the BPF programs of process $1 (kernel.bpf_stats_enabled=1):
# "<run_cnt> <ns per run>", summed over its program fds.
stacks_starting_in() { # file function: stacks whose innermost frame is in it
	awk -v f="$2" '/^stack_id / { top = 1; next } top { if ($2 ~ "^" f "\\+") n++; top = 0 }
		END { print n + 0 }' "$1"
}

bpf_prog_stats() { # pid
	cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '
		$1 == "run_time_ns:" { ns += $2 } $1 == "run_cnt:" { cnt += $2 }
		END { printf "%d %d\n", cnt, cnt ? ns / cnt : 0 }'
}

# stackmapd --backend bpf ARGS --output /tmp/bpf-NAME in the background; once
# it says it is tracing, runs WORKLOAD, reads its programs' run counts, then
# stops it with SIGTERM (or, with --duration in ARGS, waits for it).
# Sets bpf_rc, bpf_out, bpf_log, bpf_runs, bpf_ns.
bpf_session() { # name workload args...
	bpf_out=/tmp/bpf-$1 bpf_log=/tmp/bpf-$1.log
	w=$2
	shift 2
	timed=0
	case " $* " in *" --duration "*) timed=1 ;; esac
	rm -rf "$bpf_out"
	stackmapd --backend bpf "$@" --output "$bpf_out" > "$bpf_log" 2>&1 &
	pid=$!
	i=0
	while ! grep -q ' tracing ' "$bpf_log" && kill -0 $pid 2>/dev/null && [ $i -lt 1200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	bpf_runs=0 bpf_ns=0
	if grep -q ' tracing ' "$bpf_log"; then
		$w
		set -- $(bpf_prog_stats $pid)
		bpf_runs=$1 bpf_ns=$2
		[ $timed = 1 ] || kill -TERM $pid 2>/dev/null
	else
		kill -TERM $pid 2>/dev/null
	fi
	wait $pid
	bpf_rc=$?
}

# Common checks of a session's exports; prints what is wrong, if anything.
bpf_exports_bad() {
	[ "$bpf_rc" = 0 ] || { echo "exit status $bpf_rc"; return; }
	for f in stack_map stack_map_stat stack_map_bin stack_map.json; do
		[ -s "$bpf_out/$f" ] || { echo "no $f"; return; }
	done
	r=$(fsmb_check "$bpf_out/stack_map_bin")
	case "$r" in *" OK") ;; *) echo "stack_map_bin: $r"; return ;; esac
	[ "$(stat_val "$bpf_out" hits)" -gt 0 ] 2>/dev/null || { echo "no hits"; return; }
	[ "$(stat_val "$bpf_out" entries)" -gt 0 ] 2>/dev/null || echo "no entries"
}

bpf_fail_log() {
	sed 's/^/    | /' "$bpf_log" | tail -15
}

fentry_workload() {
	i=0
	while [ $i -lt 60 ]; do
		cat /proc/version /init > /dev/null
		head -c 1000 /proc/self/status > /dev/null
		dd if=/init of=/dev/null bs=512 2> /dev/null
		i=$((i + 1))
	done
}

# busybox dd reading /dev/zero a byte at a time: exactly $dd_reads calls of
# vfs_read by tasks named dd (the shell forks under its own name, and exec
# reads the binary through kernel_read, not vfs_read).
dd_reads=3000
dd_workload() {
	dd if=/dev/zero of=/dev/null bs=1 count=$dd_reads 2> /dev/null
}

# -f vfs_read --comm dd through mechanism $1 (fentry or kprobe) around
# dd_workload: hits must be exactly its reads, every stack vfs_read <-
# ksys_read starting in vfs_read, and the log must say the mechanism in $2.
check_function_count() { # mechanism expected-line
	bpf_session "count-$1" dd_workload -f vfs_read --probe-mechanism "$1" --comm dd
	bad=$(bpf_exports_bad)
	hits=$(stat_val "$bpf_out" hits)
	entries=$(stat_val "$bpf_out" entries)
	[ "$hits" = "$dd_reads" ] || bad="${bad}hits $hits, not the $dd_reads reads of dd "
	[ "$(stat_val "$bpf_out" drops)" = 0 ] || bad="${bad}drops $(stat_val "$bpf_out" drops) "
	n=$(stacks_with "$bpf_out/stack_map" vfs_read ksys_read)
	top=$(stacks_starting_in "$bpf_out/stack_map" vfs_read)
	[ "$n" -gt 0 ] && [ "$n" = "$entries" ] && [ "$top" = "$entries" ] ||
		bad="${bad}of $entries stacks $n vfs_read <- ksys_read, $top starting in vfs_read "
	grep -qF -- "$2" "$bpf_log" || bad="${bad}no '$2' in the log "
	figure dd_reads "$dd_reads"
	figure "${1}_dd_hits" "$hits"
	if [ -z "$bad" ]; then
		result "bpf_${1}_count" PASS "-f vfs_read --probe-mechanism $1 --comm dd: $hits hits = dd's $dd_reads reads, $entries stacks vfs_read <- ksys_read; '$2'"
		sed -n '1,6p' "$bpf_out/stack_map" | sed 's/^/    | /'
	else
		result "bpf_${1}_count" FAIL "-f vfs_read --probe-mechanism $1 --comm dd: $bad"
		bpf_fail_log
		head -20 "$bpf_out/stack_map" 2>/dev/null | sed 's/^/    | /'
	fi
}

cpu_workload() { # both vCPUs in the kernel (read_zero) for ~4 s
	taskset -c 0 dd if=/dev/zero of=/dev/null bs=64k count=1000000 2> /dev/null &
	dd0=$!
	taskset -c 1 dd if=/dev/zero of=/dev/null bs=64k count=1000000 2> /dev/null &
	dd1=$!
	sleep 4
	kill $dd0 $dd1 2> /dev/null
	wait $dd0 $dd1 2> /dev/null
}

sched_workload() {
	workload 40
	i=0
	while [ $i -lt 20 ]; do sleep 0.05; i=$((i + 1)); done
}

run_bpf() {
	if [ ! -e /sys/kernel/btf/vmlinux ]; then
		result bpf_fentry FAIL "no /sys/kernel/btf/vmlinux: the min kernel lacks CONFIG_DEBUG_INFO_BTF"
		return
	fi
	if [ ! -x /bin/stackmapd ]; then
		echo "KTEST-NOTE: no /bin/stackmapd in the image: BPF backend not run"
		return
	fi
	mkdir -p /sys/fs/bpf
	mount -t bpf bpf /sys/fs/bpf
	echo 1 > /proc/sys/kernel/bpf_stats_enabled

	# fentry on one function, timed: stacks of vfs_read called from ksys_read.
	t0=$(now_cs)
	bpf_session fentry fentry_workload -f vfs_read --duration 8
	bad=$(bpf_exports_bad)
	hits=$(stat_val "$bpf_out" hits)
	n=$(stacks_with "$bpf_out/stack_map" vfs_read ksys_read)
	stackmapd decode "$bpf_out/stack_map_bin" --kallsyms /proc/kallsyms > /tmp/bpf-decoded 2> /tmp/bpf-decode.log ||
		bad="${bad}decode failed: $(cat /tmp/bpf-decode.log) "
	nd=$(stacks_with /tmp/bpf-decoded vfs_read ksys_read)
	# The program's and the trampoline's frames are skipped: stacks start in vfs_read.
	top=$(stacks_starting_in "$bpf_out/stack_map" vfs_read)
	[ "$top" -eq "$(stat_val "$bpf_out" entries)" ] ||
		bad="${bad}only $top of $(stat_val "$bpf_out" entries) stacks start in vfs_read "
	# auto picks fentry on this kernel, and says so.
	grep -q -- '-f: fentry on 1 function$' "$bpf_log" || bad="${bad}no '-f: fentry on 1 function' line "
	figure fentry_vfs_read_hits "$hits"
	figure fentry_vfs_read_stacks "$(stat_val "$bpf_out" entries)"
	figure fentry_vfs_read_prog_runs "$bpf_runs"
	figure fentry_ns_per_run_tcg "$bpf_ns"
	figure fentry_seconds "$((($(now_cs) - t0) / 100))"
	if [ -z "$bad" ] && [ "$n" -gt 0 ] && [ "$nd" -gt 0 ]; then
		result bpf_fentry PASS "-f vfs_read: $hits hits, $n stacks with vfs_read <- ksys_read, all starting in vfs_read (decode agrees: $nd)"
		sed -n '1,6p' "$bpf_out/stack_map" | sed 's/^/    | /'
	else
		result bpf_fentry FAIL "-f vfs_read: ${bad}hits $hits, $n stacks vfs_read <- ksys_read, $nd decoded"
		bpf_fail_log
		head -20 "$bpf_out/stack_map" 2>/dev/null | sed 's/^/    | /'
	fi

	# A glob: each matching function gets a program of its own.
	bpf_session glob fentry_workload -f 'vfs_rea*'
	bad=$(bpf_exports_bad)
	fns=$(sed -n 's/.* tracing \(.*\) until .*/\1/p' "$bpf_log" | tr ',' '\n' | grep -c .)
	n=$(stacks_with "$bpf_out/stack_map" 'vfs_rea[a-z_]*')
	figure fentry_glob_functions "$fns"
	figure fentry_glob_hits "$(stat_val "$bpf_out" hits)"
	if [ -z "$bad" ] && [ "$fns" -gt 1 ] && [ "$n" -gt 0 ]; then
		result bpf_fentry_glob PASS "-f 'vfs_rea*': $fns functions ($(sed -n 's/.* tracing \(.*\) until .*/\1/p' "$bpf_log")), $(stat_val "$bpf_out" hits) hits"
	else
		result bpf_fentry_glob FAIL "-f 'vfs_rea*': ${bad}$fns functions, $n stacks in vfs_rea*"
		bpf_fail_log
	fi

	# Both mechanisms count a workload's reads exactly.
	check_function_count fentry "-f: fentry on 1 function"
	check_function_count kprobe "-f: kprobes on 1 function (no fentry: --probe-mechanism kprobe)"

	# kprobes on a glob: one link each, the same program, sources by cookie.
	bpf_session kprobe-glob fentry_workload -f 'vfs_rea*' --probe-mechanism kprobe
	bad=$(bpf_exports_bad)
	fns=$(sed -n 's/.*-f: kprobes on \([0-9]*\) functions.*/\1/p' "$bpf_log")
	n=$(stacks_with "$bpf_out/stack_map" 'vfs_rea[a-z_]*')
	top=$(stacks_starting_in "$bpf_out/stack_map" 'vfs_rea[a-z_]*')
	[ "$top" = "$(stat_val "$bpf_out" entries)" ] ||
		bad="${bad}only $top of $(stat_val "$bpf_out" entries) stacks start in vfs_rea* "
	figure kprobe_glob_functions "$fns"
	figure kprobe_glob_hits "$(stat_val "$bpf_out" hits)"
	if [ -z "$bad" ] && [ "${fns:-0}" -gt 1 ] && [ "$n" -gt 0 ]; then
		result bpf_kprobe_glob PASS "-f 'vfs_rea*' --probe-mechanism kprobe: $fns functions, $(stat_val "$bpf_out" hits) hits, $n stacks, all starting in vfs_rea*"
	else
		result bpf_kprobe_glob FAIL "-f 'vfs_rea*' --probe-mechanism kprobe: ${bad}${fns:-no} functions, $n stacks in vfs_rea*"
		bpf_fail_log
	fi

	# A tracepoint.
	bpf_session tracepoint sched_workload -e sched:sched_switch
	bad=$(bpf_exports_bad)
	n=$(stacks_with "$bpf_out/stack_map" __schedule)
	figure tracepoint_sched_switch_hits "$(stat_val "$bpf_out" hits)"
	figure tracepoint_ns_per_run_tcg "$bpf_ns"
	if [ -z "$bad" ] && [ "$n" -gt 0 ]; then
		result bpf_tracepoint PASS "-e sched:sched_switch: $(stat_val "$bpf_out" hits) hits, $(stat_val "$bpf_out" entries) stacks, $n through __schedule"
	else
		result bpf_tracepoint FAIL "-e sched:sched_switch: ${bad}$n stacks through __schedule"
		bpf_fail_log
	fi

	# CPU sampling while both vCPUs read /dev/zero.
	bpf_session profile cpu_workload --profile 99
	bad=$(bpf_exports_bad)
	n=$(stacks_with "$bpf_out/stack_map" '(read_zero|read_iter_zero)' ksys_read)
	figure profile_samples "$(stat_val "$bpf_out" hits)"
	figure profile_drop_no_kernel_stack "$(stat_val "$bpf_out" drop_no_kernel_stack)"
	figure profile_ns_per_run_tcg "$bpf_ns"
	if [ -z "$bad" ] && [ "$n" -gt 0 ]; then
		result bpf_profile PASS "--profile 99: $(stat_val "$bpf_out" hits) samples, $(stat_val "$bpf_out" entries) stacks, $n in read_zero <- ksys_read"
	else
		result bpf_profile FAIL "--profile 99: ${bad}$n stacks in read_zero <- ksys_read"
		bpf_fail_log
		stackmapd decode "$bpf_out/stack_map_bin" --kallsyms /proc/kallsyms --top 3 2>&1 | sed 's/^/    | /'
	fi
	echo 0 > /proc/sys/kernel/bpf_stats_enabled
	check_dmesg bpf
}

echo "KTEST-START: mode=$mode kernel=$(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)"
t_start=$(now_cs)
case "$mode" in
full)
	run_memory
	run_selftest
	run_events_per_mb
	run_stat
	run_reset_ids
	run_stress
	run_stackmapd
	run_daemon
	run_bpf
	;;
exhaust)
	run_exhaustion
	;;
debug)
	run_selftest
	run_reset_ids
	run_stress
	run_exhaustion
	;;
*)
	result mode FAIL "unknown ktest_mode '$mode'"
	;;
esac
check_dmesg final
figure guest_seconds "$((($(now_cs) - t_start) / 100))"
if [ "$FAILED" = 0 ]; then
	echo "KTEST-VERDICT: PASS"
else
	echo "KTEST-VERDICT: FAIL"
fi
sync
reboot -f

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""stackmapd benchmark suite. Run as root: `sudo bench/run.sh [--quick|--smoke]`.

Everything is measured within one run, on the same machine, interleaved and
order-balanced; every figure is a median with its min-max over rounds. Nothing
here passes or fails on a time: it reports figures (bench/results/latest.json,
bench/results/latest.png, and the table for BENCHMARKS.md).

Sections:
  ns_per_event   in-kernel ns/event (kernel.bpf_stats_enabled run_time_ns /
                 run_cnt) of stackmapd's program, bpftrace @[kstack]=count()
                 and a bare bpf_get_stack program, all three attached to the
                 same tracepoint at once (same events), in every attach order;
                 order-balanced ratios over each order and its reverse.
  throughput     the pinned workload's ops/s under each tracer / untraced.
  transport      bytes per event: stackmapd ring buffer (stack_map_stat
                 ring_bytes / events, else producer position / program runs),
                 ftrace per_cpu stats bytes, perf.data / samples.
  ring           stackmapd's ring bytes per event with --by pid,cgroup,source,
                 with --trace and with default keys, on the bench workload and
                 on a mixed one (alloc_loop --mix).
  daemon         drain rate, CPU per million ids, CPU at ~10 k events/s and at
                 ~500 k events/s with every CPU producing (/proc/PID/stat), its
                 VmRSS/VmHWM at --bits 14, RSS at 1 K / 16 K / 256 K unique stacks.
  pool_exhausted ns/event of a --bits 10 daemon whose pool is full next to a
                 --bits 14 one that is not, on the same events.
  user_stacks    --user-stacks with unwind tables, with frame pointers (--user-unwind
                 fp) and without, and bpftrace's `ustack`, the four on the same
                 tracepoint at once, the attach order rotated: in-kernel ns/event of
                 each and the ratios; then a CPU profile (999 Hz) of a program without
                 frame pointers by the tables, the fp walk and bpftrace: ns per sample.
  offcpu         --offcpu next to `-e sched:sched_switch` under a pipe ping-pong:
                 ns per sched_switch and the ping-pong's ops/s, A B A B ...
  progs          each daemon configuration's BPF programs (-e, --trace,
                 --user-stacks, --profile, -f, --offcpu): xlated bytes and the
                 verifier's instruction count, and the baseline's with
                 --baseline-stackmapd.
  unwind         the unwind tables of libc, ld.so, python3.11 and gzip
                 (daemon/unwind/, bench/cfi_bench): build time (the process's
                 first build apart: it loads libdw's backend), rows and bytes.
  compare        (with --baseline-stackmapd) this build's daemon against another
                 build, one at a time on the same tracepoint, A B A B ...:
                 in-kernel ns/event, workload ops/s and daemon CPU, as ratios.

--smoke runs every section once, for seconds each (CI: bench/run.sh --smoke), to
prove the suite still runs; its figures are printed and written to --out (a
temporary directory by default) but mean nothing and are never judged. Any
section that crashes makes the exit status non-zero (all sections still run).
"""
import argparse
import contextlib
import ctypes
import ctypes.util
import itertools
import json
import mmap
import os
import platform
import re
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import shutil
import time
import traceback

from unwind_vs_perf import CALLBACK_C

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRACEFS = "/sys/kernel/tracing"
WORKFILE = "/dev/shm/stackmapd-bench"
EVENT = "kmem:kmem_cache_alloc"
MIX_PROCS = 4  # processes of the mixed workload (alloc_loop --mix)
BPFTRACE_PROG = "tracepoint:kmem:kmem_cache_alloc { @[kstack] = count(); }"
# Busy tracepoints with many distinct stacks, to exhaust a --bits 10 pool.
BUSY_EVENTS = ["kmem:kmem_cache_alloc", "kmem:kmem_cache_free", "kmem:kmalloc", "kmem:kfree",
               "sched:sched_switch", "sched:sched_wakeup", "timer:timer_start",
               "irq:softirq_entry"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def num(v, digits=0):
    """A figure for a log line: n/a when there is none (never a crash on a figure)."""
    return "n/a" if v is None else f"{v:.{digits}f}"


def summary(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v),
            "values": v}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


# ---------------------------------------------------------------- BPF helpers
def prog_stats():
    """prog id -> (run_time_ns, run_cnt) for every loaded program."""
    out = {}
    for p in json.loads(sh(["bpftool", "-j", "prog", "show"])):
        out[p["id"]] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return out


def perf_attachments():
    """[(pid, prog_id, tracepoint)] from `bpftool perf show`."""
    try:
        data = json.loads(sh(["bpftool", "-j", "perf", "show"]) or "[]")
    except subprocess.CalledProcessError:
        return []
    return [(a["pid"], a["prog_id"], a.get("tracepoint", "")) for a in data
            if a.get("fd_type") == "tracepoint"]


def held_perf_programs(pid):
    """The perf_event programs (type 7) `pid` holds, when it also holds a perf event:
    a CPU profile's programs, which `bpftool perf show` does not list."""
    progs, events = set(), False
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        events |= target == "anon_inode:[perf_event]"
        if target == "anon_inode:bpf-prog" and info.get("prog_type", "").strip() == "7":
            progs.add(int(info["prog_id"]))
    return sorted(progs) if events else []


def wait_profiling(proc, timeout=30.0):
    """Waits until `proc` samples CPUs through a BPF program; returns its prog ids."""
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited early with {proc.returncode}")
        progs = held_perf_programs(proc.pid)
        if progs:
            time.sleep(0.3)  # the attach follows the open
            return progs
        time.sleep(0.05)
    raise RuntimeError(f"{proc.args[0]} did not start profiling within {timeout} s")


def wait_attached(proc, n_events, timeout=30.0):
    """Waits until `proc` has n_events tracepoint attachments; returns its prog ids."""
    t0 = time.time()
    end = t0 + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited early with {proc.returncode}")
        mine = [a for a in perf_attachments() if a[0] == proc.pid]
        if len(mine) >= n_events:
            if time.time() - t0 > 5:
                log(f"note: {' '.join(proc.args[:4])} took {time.time() - t0:.0f} s to attach")
            return sorted({a[1] for a in mine})
        time.sleep(0.05)
    raise RuntimeError(f"{proc.args[0]} did not attach within {timeout} s")


_libbpf = None


def libbpf():
    global _libbpf
    if _libbpf is None:
        _libbpf = ctypes.CDLL(ctypes.util.find_library("bpf") or "libbpf.so.1", use_errno=True)
    return _libbpf


def prog_ringbuf_map(prog_id):
    info = json.loads(sh(["bpftool", "-j", "prog", "show", "id", str(prog_id)]))
    for mid in info.get("map_ids", []):
        m = json.loads(sh(["bpftool", "-j", "map", "show", "id", str(mid)]))
        if m.get("type") == "ringbuf":
            return mid
    return None


class RingProducerPos:
    """Reads a BPF ring buffer's producer position (its read-only mmapped page)."""

    def __init__(self, map_id):
        fd = libbpf().bpf_map_get_fd_by_id(ctypes.c_uint32(map_id))
        if fd < 0:
            raise RuntimeError(f"cannot open ring map {map_id}")
        self.fd = fd
        page = mmap.PAGESIZE
        self.mm = mmap.mmap(fd, page, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=page)

    def pos(self):
        return struct.unpack_from("<Q", self.mm, 0)[0]

    def close(self):
        self.mm.close()
        os.close(self.fd)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_stat_cpu_s(pid):
    """utime + stime of /proc/PID/stat (all threads; 1/CLK_TCK resolution)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status_kb(pid, keys=("VmRSS", "VmHWM")):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in keys:
                out[k] = int(v.split()[0])
    return out


def proc_cpu_s(pid):
    """CPU time of all the process's threads, ns-precise (schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


# ------------------------------------------------------------------- tracers
class Tracer:
    name = "?"
    prog_ids = ()

    def start(self):
        pass

    def stop(self):
        pass

    def extra(self):
        return {}


TRACER_CPU = [0]  # set in main(): tracers' own processes stay off the workload CPU


def pinned(cmd):
    return ["taskset", "-c", str(TRACER_CPU[0])] + cmd


STOP_TIMEOUT = [60]  # seconds a tracer may take to exit after its signal (smoke: 10)


@contextlib.contextmanager
def killed_on_error(proc):
    """A tracer that never attached is not left running: its caller never stops it."""
    try:
        yield
    except BaseException:
        stop_proc(proc, signal.SIGKILL, 10)
        raise


def stop_proc(proc, sig=signal.SIGINT, timeout=None):
    if proc.poll() is None:
        t0 = time.time()
        proc.send_signal(sig)
        try:
            proc.wait(timeout or STOP_TIMEOUT[0])
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            log(f"warning: {proc.args} did not exit within {timeout or STOP_TIMEOUT[0]} s: killed")
        if time.time() - t0 > 5:
            log(f"note: {proc.args[-1] if proc.args else '?'} took {time.time() - t0:.0f} s to exit")


class Stackmapd(Tracer):
    def __init__(self, binary, name="stackmapd", events=(EVENT,), bits=14, extra=()):
        self.binary, self.name, self.events, self.bits = binary, name, list(events), bits
        self.extra = list(extra)

    def start(self):
        self.outdir = tempfile.mkdtemp(prefix="stackmapd-bench-")
        cmd = [self.binary, "--output", self.outdir, "--bits", str(self.bits)] + self.extra
        for e in self.events:
            cmd += ["-e", e]
        self.stderr = open(os.path.join(self.outdir, "log"), "w")
        self.proc = subprocess.Popen(pinned(cmd), stdout=subprocess.DEVNULL, stderr=self.stderr)
        with killed_on_error(self.proc):
            self.prog_ids = (wait_profiling(self.proc) if "--profile" in self.extra
                             else wait_attached(self.proc, max(1, len(self.events))))
        ring = prog_ringbuf_map(self.prog_ids[0])
        self.ring = RingProducerPos(ring) if ring is not None else None

    def mark(self):
        return {"pos": self.ring.pos() if self.ring else None, "cpu": proc_cpu_s(self.proc.pid),
                "cpu_stat": proc_stat_cpu_s(self.proc.pid), "wall": time.time()}

    def ring_bytes_per_event(self, m0, m1, events):
        """(bytes, source): the session's `ring_bytes:` over the events that
        reached the ring (`events_total:` less `drop_ringbuf_full:`: a dropped
        event sends nothing, and --trace drops when the daemon's printing falls
        behind) from stack_map_stat when the daemon writes those lines (after
        stop), else the producer position over the window's program runs."""
        try:
            sent = int(self.stat["events_total"]) - int(self.stat.get("drop_ringbuf_full", 0))
            return int(self.stat["ring_bytes"]) / sent, "stack_map_stat"
        except (KeyError, ValueError, ZeroDivisionError):
            pass
        if m0["pos"] is None or not events:
            return None, None
        return (m1["pos"] - m0["pos"]) / events, "producer position"

    def stop(self):
        if self.ring:
            self.ring.close()
        stop_proc(self.proc)
        self.stderr.close()
        self.stat = {}
        try:
            with open(os.path.join(self.outdir, "stack_map_stat")) as f:
                for line in f:
                    k, _, v = line.partition(":")
                    self.stat[k.strip()] = v.strip()
        except OSError:
            pass
        subprocess.run(["rm", "-rf", self.outdir])


class Bpftrace(Tracer):
    """bpftrace running `prog`; with `counted`, the sum of its map's counts
    printed at exit (the events its filter let through) in self.counted."""

    def __init__(self, name="bpftrace", prog=BPFTRACE_PROG, counted=False):
        self.name, self.prog, self.counted_wanted = name, prog, counted
        self.counted = None

    def start(self):
        self.proc = subprocess.Popen(pinned(["bpftrace", "-e", self.prog]),
                                     stdout=subprocess.PIPE if self.counted_wanted
                                     else subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, text=True)
        with killed_on_error(self.proc):
            self.prog_ids = (wait_profiling(self.proc) if self.prog.startswith("profile:")
                             else wait_attached(self.proc, 1))

    def stop(self):
        stop_proc(self.proc)
        if self.counted_wanted:
            self.counted = sum(int(m.group(1)) for m in
                               re.finditer(r"\]: (\d+)$", self.proc.stdout.read(), re.M))


class Bare(Tracer):
    name = "bare_get_stack"

    def __init__(self, binary):
        self.binary = binary

    def start(self):
        self.proc = subprocess.Popen(pinned([self.binary, EVENT]), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "ready":
            raise RuntimeError("bare_stack did not start")
        self.prog_ids = [int(line[1])]

    def stop(self):
        stop_proc(self.proc, signal.SIGTERM)


class Ftrace(Tracer):
    """An ftrace instance with the event and options/stacktrace (default buffer)."""
    name = "ftrace"

    def __init__(self, cpu, stacktrace=True):
        self.cpu, self.stacktrace = cpu, stacktrace
        self.dir = f"{TRACEFS}/instances/stackmapd_bench_{os.getpid()}"

    def w(self, rel, val):
        with open(f"{self.dir}/{rel}", "w") as f:
            f.write(val)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        self.w("options/stacktrace", "1" if self.stacktrace else "0")
        cat, ev = EVENT.split(":")
        self.w(f"events/{cat}/{ev}/enable", "1")

    def stop(self):
        cat, ev = EVENT.split(":")
        self.w(f"events/{cat}/{ev}/enable", "0")
        st = {}
        with open(f"{self.dir}/per_cpu/cpu{self.cpu}/stats") as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k.strip()] = v.strip()
        self.w("options/stacktrace", "0")
        os.rmdir(self.dir)
        entries, nbytes = int(st["entries"]), int(st["bytes"])
        # With options/stacktrace every event is two ring entries: the event
        # and its kernel_stack.
        events = entries // 2 if self.stacktrace else entries
        self.result = {"entries": entries, "bytes": nbytes, "overrun": int(st["overrun"]),
                       "bytes_per_event": nbytes / events if events else None}


class Perf(Tracer):
    """perf record -g on the workload's CPU (-C), to tmpfs, perf itself pinned
    to the other CPU: otherwise it records its own writes and feeds back on
    itself (GBs in seconds). Its summary line gives the sample count."""
    name = "perf"

    def __init__(self, cpu):
        self.cpu = cpu

    def start(self):
        self.path = f"/dev/shm/stackmapd-bench-perf-{os.getpid()}.data"
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(pinned(["perf", "record", "-g", "-e", EVENT, "-C", str(self.cpu),
                                             "-o", self.path]),
                                     stdout=subprocess.DEVNULL, stderr=self.err)
        time.sleep(1.0)  # perf prints nothing when its events are on

    def stop(self):
        stop_proc(self.proc)
        self.err.seek(0)
        text = self.err.read()
        self.err.close()
        size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
        samples, lost = None, 0
        for line in text.splitlines():
            if "samples)" in line:
                samples = int(line.rsplit("(", 1)[1].split()[0])
            if "lost" in line.lower() and "chunks" in line:
                lost += 1
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.result = {"bytes": size, "samples": samples, "lost_warning": bool(lost),
                       "bytes_per_event": size / samples if samples else None}


# ----------------------------------------------------------------- workload
def workload(binary, cpu, seconds, rate=0, mix=0, cpus=None):
    """ops/s of alloc_loop on `cpu`, or summed over one instance per CPU of `cpus`
    (each at `rate`); `mix` N: the mixed workload (alloc_loop --mix N)."""
    procs = [subprocess.Popen([binary, "--cpu", str(c), "--duration", str(seconds), "--file",
                               WORKFILE, "--rate", str(rate), "--mix", str(mix)],
                              stdout=subprocess.PIPE, text=True) for c in (cpus or [cpu])]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"alloc_loop failed: {[p.returncode for p in procs]}")
    return sum(json.loads(o)["ops_per_s"] for o in outs)


def stackmapd_run(t, work):
    """Runs `work()` under the Stackmapd tracer `t` (started and stopped here):
    its program's and daemon's figures over that window."""
    t.start()
    try:
        time.sleep(0.2)
        s0, m0 = prog_stats(), t.mark()
        out = work()
        s1, m1 = prog_stats(), t.mark()
        mem = proc_status_kb(t.proc.pid)
    finally:
        t.stop()
    pid = t.prog_ids[0]
    dt, dn = s1[pid][0] - s0[pid][0], s1[pid][1] - s0[pid][1]
    wall = m1["wall"] - m0["wall"]
    ring, ring_source = t.ring_bytes_per_event(m0, m1, dn)
    per_m = (lambda k: (m1[k] - m0[k]) / dn * 1e6 if dn else None)
    return {"work": out, "events": dn, "seconds": wall, "events_per_s": dn / wall,
            "ns_per_event": dt / dn if dn else None,
            "ring_bytes_per_event": ring, "ring_bytes_source": ring_source,
            "daemon_cpu_s_per_million": per_m("cpu"),
            "daemon_cpu_percent": (m1["cpu"] - m0["cpu"]) / wall * 100,
            "daemon_cpu_s_per_million_stat": per_m("cpu_stat"),
            "daemon_cpu_percent_stat": (m1["cpu_stat"] - m0["cpu_stat"]) / wall * 100,
            "vm_rss_kb": mem.get("VmRSS"), "vm_hwm_kb": mem.get("VmHWM"),
            "stat_events": t.stat.get("events"), "stat": t.stat}


# ------------------------------------------------------------------ sections
# Order-balanced ratios: (program, reference) -> the geometric mean of its ratio
# in an attach order and in the reverse one (every program then runs once before
# and once after the reference, which runs warm in second place).
BALANCED = (("stackmapd", "bpftrace"), ("bare_get_stack", "bpftrace"),
            ("stackmapd", "bare_get_stack"))


def bench_ns_per_event(a, bins):
    """All three programs on the same tracepoint at once, every attach order, an
    order always followed by its reverse (a mirror pair)."""
    names = ["stackmapd", "bpftrace", "bare_get_stack"]
    orders = [o for p in itertools.permutations(range(3)) if p < p[::-1]
              for o in (p, p[::-1])][:a.ns_orders]
    rounds = []
    for r in range(a.ns_rounds):
        for order in orders:
            tracers = [Stackmapd(bins["stackmapd"]), Bpftrace(), Bare(bins["bare_stack"])]
            seq = [tracers[i] for i in order]
            started = []
            try:
                for t in seq:
                    t.start()
                    started.append(t)
                time.sleep(0.2)
                before = prog_stats()
                mark0 = tracers[0].mark()
                ops = workload(bins["alloc_loop"], a.cpu, a.seconds)
                mark1 = tracers[0].mark()
                after = prog_stats()
            finally:
                for t in reversed(started):
                    t.stop()
            row = {"order": [names[i] for i in order], "ops_per_s": ops, "ns": {}, "events": {}}
            for t in tracers:
                pid = t.prog_ids[0]
                dt = after[pid][0] - before[pid][0]
                dn = after[pid][1] - before[pid][1]
                row["ns"][t.name] = dt / dn if dn else None
                row["events"][t.name] = dn
            dn = row["events"]["stackmapd"]
            if mark0["pos"] is not None and dn:
                row["stackmapd_ring_bytes_per_event"] = (mark1["pos"] - mark0["pos"]) / dn
            rounds.append(row)
            log("ns/event order %-40s %s" % ("->".join(row["order"]),
                ", ".join(f"{k} {num(v)}" for k, v in row["ns"].items())))
    res = {"rounds": rounds, "programs": {}, "ratio_to_bpftrace": {}, "by_position": {}}
    for n in names:
        res["programs"][n] = summary([r["ns"][n] for r in rounds])
        res["ratio_to_bpftrace"][n] = summary(
            [r["ns"][n] / r["ns"]["bpftrace"] for r in rounds if r["ns"][n] and r["ns"]["bpftrace"]])
        res["by_position"][n] = {
            str(pos + 1): summary([r["ns"][n] for r in rounds if r["order"][pos] == n])
            for pos in range(3)}
    res["stackmapd_ring_bytes_per_event"] = summary(
        [r.get("stackmapd_ring_bytes_per_event") for r in rounds])
    mirrors = [(r1["ns"], r2["ns"]) for r1, r2 in zip(rounds[::2], rounds[1::2])]
    res["balanced"] = {f"{x}/{y}": summary(
        [((p[x] / p[y]) * (q[x] / q[y])) ** 0.5 for p, q in mirrors if p[x] and p[y] and q[x] and q[y]])
        for x, y in BALANCED}
    return res


def bench_throughput(a, bins):
    configs = ["untraced", "stackmapd", "bpftrace", "ftrace", "perf"]
    rounds = []
    for r in range(a.tp_rounds):
        k = r % len(configs)
        order = configs[k:] + configs[:k]  # rotate who goes first each round
        row = {"order": order, "ops_per_s": {}, "extra": {}}
        for c in order:
            run = lambda: workload(bins["alloc_loop"], a.cpu, a.seconds)
            if c == "stackmapd":
                x = stackmapd_run(Stackmapd(bins["stackmapd"]), run)
                row["extra"][c], row["ops_per_s"][c] = x, x["work"]
                continue
            t = {"untraced": Tracer, "bpftrace": Bpftrace, "ftrace": lambda: Ftrace(a.cpu),
                 "perf": lambda: Perf(a.cpu)}[c]()
            t.start()
            try:
                time.sleep(0.2)
                row["ops_per_s"][c] = run()
            finally:
                t.stop()
            if c in ("ftrace", "perf"):
                row["extra"][c] = t.result
        base = row["ops_per_s"]["untraced"]
        row["ratio"] = {c: row["ops_per_s"][c] / base for c in configs}
        rounds.append(row)
        log("throughput round %d: %s" % (r + 1, ", ".join(
            f"{c} {num(row['ratio'][c], 3)}" for c in configs)))
    res = {"rounds": rounds, "untraced_ops_per_s": summary([r["ops_per_s"]["untraced"] for r in rounds]),
           "ratio": {c: summary([r["ratio"][c] for r in rounds]) for c in configs}}
    # ftrace without the stack, once, for the event-only part of its record.
    f = Ftrace(a.cpu, stacktrace=False)
    f.start()
    workload(bins["alloc_loop"], a.cpu, 0.3)
    f.stop()
    sm = [r["extra"]["stackmapd"] for r in rounds]
    ft = [r["extra"]["ftrace"]["bytes_per_event"] for r in rounds
          if r["extra"]["ftrace"]["bytes_per_event"] is not None]
    pf = [r["extra"]["perf"]["bytes_per_event"] for r in rounds]
    res["transport"] = {
        "stackmapd": {"measured": summary([x["ring_bytes_per_event"] for x in sm]),
                      "source": sm[0]["ring_bytes_source"] if sm else None,
                      "note": "stack_map_stat ring_bytes / events, or the ring's producer "
                              "position delta / program runs where the daemon has no ring_bytes"},
        "ftrace": {"measured": summary(ft), "event_only": f.result["bytes_per_event"],
                   "stack_part": statistics.median(ft) - f.result["bytes_per_event"]
                   if ft and f.result["bytes_per_event"] is not None else None,
                   "note": "per_cpu/cpuN/stats bytes / (entries/2): each event is an event "
                           "entry plus a kernel_stack entry"},
        "perf": {"measured": summary(pf), "lost_warnings": sum(
            r["extra"]["perf"]["lost_warning"] for r in rounds),
                 "note": "perf.data size / samples"},
        "bpftrace": {"measured": None,
                     "note": "aggregates @[kstack] counts in a kernel hash map: no per-event "
                             "transport, no per-event record either"},
    }
    res["daemon_under_load"] = {
        "events_per_s": summary([x["events_per_s"] for x in sm]),
        "cpu_s_per_million": summary([x["daemon_cpu_s_per_million"] for x in sm]),
        "cpu_percent": summary([x["daemon_cpu_percent"] for x in sm])}
    return res


RING_CONFIGS = (("by", "`--by pid,cgroup,source`", ["--by", "pid,cgroup,source"]),
                ("trace", "`--trace` (a timestamped entry per event)", ["--trace", "/dev/null"]),
                ("default", "default keys", []))
RING_WORKLOADS = (("alloc_loop", "bench workload (alloc_loop)", 0),
                  ("mixed", f"mixed (alloc_loop --mix {MIX_PROCS})", MIX_PROCS))


def trace_fields_bytes(event):
    """The raw bytes --trace carries per event of `event`, by the daemon's rule
    (daemon/source/event_format.cpp, trace_raw_len): the end of the last fixed
    field, or 256 when a __data_loc field places data after them."""
    cat, name = event.split(":")
    end = 8
    with open(f"{TRACEFS}/events/{cat}/{name}/format") as f:
        for line in f:
            m = re.search(r"field:(.*);\s*offset:(\d+);\s*size:(\d+);", line)
            if not m or m[1].split()[-1].startswith("common_"):
                continue
            if "__data_loc" in m[1] or "__rel_loc" in m[1]:
                return 256
            end = max(end, int(m[2]) + int(m[3]))
    return min(end, 256)


def bench_ring(a, bins):
    """Ring-buffer bytes per event of each daemon configuration on the bench
    workload and on the mixed one, one daemon at a time."""
    rounds = []
    combos = list(itertools.product(RING_CONFIGS, RING_WORKLOADS))
    if a.smoke:  # two runs: --by on the bench workload, --trace on the mixed one
        combos = combos[::3]
    for r in range(a.ring_rounds):
        for (cname, _, extra), (wname, _, mix) in combos:
            x = stackmapd_run(Stackmapd(bins["stackmapd"], cname, extra=extra),
                              lambda: workload(bins["alloc_loop"], a.cpu, a.seconds, mix=mix))
            rounds.append({"config": cname, "workload": wname, "ops_per_s": x["work"],
                           "drop_ringbuf_full": x["stat"].get("drop_ringbuf_full"),
                           **{k: x[k] for k in ("events", "events_per_s", "ring_bytes_per_event",
                                                "ring_bytes_source", "stat_events")}})
            log(f"ring {cname} on {wname}: {num(rounds[-1]['ring_bytes_per_event'], 2)} B/event "
                f"({x['ring_bytes_source']}), {num(x['events_per_s'])} events/s")
    fields = trace_fields_bytes(EVENT)
    return {"rounds": rounds, "n_rounds": a.ring_rounds,
            "source": rounds[0]["ring_bytes_source"] if rounds else None,
            "trace_fields_bytes": fields,
            "trace_beyond_fields": {w: summary([r["ring_bytes_per_event"] - fields for r in rounds
                                                if r["config"] == "trace" and r["workload"] == w
                                                and r["ring_bytes_per_event"] is not None])
                                    for w, _, _ in RING_WORKLOADS},
            "bytes_per_event": {c: {w: summary([r["ring_bytes_per_event"] for r in rounds
                                                if r["config"] == c and r["workload"] == w])
                                    for w, _, _ in RING_WORKLOADS} for c, _, _ in RING_CONFIGS}}


LOAD_EVENTS_PER_S = 500000
LOAD_CONFIGS = (("default", []), ("by pid,cgroup,source", ["--by", "pid,cgroup,source"]))
LOAD_FIGURES = ("events_per_s", "daemon_cpu_percent_stat", "daemon_cpu_s_per_million_stat",
                "daemon_cpu_percent", "vm_rss_kb", "vm_hwm_kb")


def bench_daemon(a, bins):
    res = {}
    log("daemon drain rate (synthetic producer replaying real ids)")
    out = json.loads(sh([bins["drain_bench"], "drain", "--cpu", str(a.daemon_cpu),
                         "--rounds", str(a.drain_rounds), "--file", WORKFILE]))
    res["drain"] = {
        "ids_per_cpu_s": summary(out["drain_ids_per_cpu_s"]),
        "cpu_s_per_million": summary(out["cpu_s_per_million"]),
        "ring_bytes_per_record": summary(out["ring_bytes_per_record"]),
        "producer_ns_per_record": summary(out["producer_ns_per_record"]),
        "raw": {k: v for k, v in out.items() if not isinstance(v, list)}}
    log("daemon at ~10 k events/s")
    x = stackmapd_run(Stackmapd(bins["stackmapd"]),
                      lambda: workload(bins["alloc_loop"], a.cpu, a.low_rate_seconds, rate=3333))
    res["at_10k_events_per_s"] = {
        "events_per_s": x["events_per_s"], "cpu_percent": x["daemon_cpu_percent"],
        "seconds": x["seconds"],
        "note": "daemon on-CPU time from /proc/PID/task/*/schedstat; events are all "
                "kmem_cache_alloc events system-wide, not only the paced workload's"}
    # Both CPUs producing: one paced alloc_loop per CPU, ~3 events per op.
    cpus = list(range(os.cpu_count()))
    rate = LOAD_EVENTS_PER_S / 3 / len(cpus)
    res["load"] = {"target_events_per_s": LOAD_EVENTS_PER_S, "cpus": cpus, "rounds": [],
                   "note": "daemon CPU from /proc/PID/stat utime+stime (1/CLK_TCK s) over "
                           "the window, schedstat alongside; VmRSS/VmHWM at the window's end, "
                           "--bits 14; the daemon is pinned to CPU "
                           f"{TRACER_CPU[0]}, which also runs a workload instance"}
    for r in range(a.load_rounds):
        for name, extra in LOAD_CONFIGS[:1] if a.smoke else LOAD_CONFIGS:
            log(f"daemon at ~{LOAD_EVENTS_PER_S // 1000} k events/s on CPUs {cpus}: {name}")
            x = stackmapd_run(Stackmapd(bins["stackmapd"], name, extra=extra), lambda: workload(
                bins["alloc_loop"], None, a.load_seconds, rate=rate, cpus=cpus))
            x.pop("stat")
            res["load"]["rounds"].append(dict(x, config=name))
            log("  %s events/s, daemon %s %% CPU (stat), %s s per million events, VmHWM %s kB" % (
                num(x["events_per_s"]), num(x["daemon_cpu_percent_stat"], 2),
                num(x["daemon_cpu_s_per_million_stat"], 4), x["vm_hwm_kb"]))
    res["load"]["summary"] = {name: {k: summary([x[k] for x in res["load"]["rounds"]
                                                 if x["config"] == name]) for k in LOAD_FIGURES}
                              for name, _ in LOAD_CONFIGS}
    res["rss"] = []
    for n, bits in a.rss_sizes:
        log(f"daemon RSS at {n} unique stacks (--bits {bits})")
        out = json.loads(sh([bins["drain_bench"], "rss", "--stacks", str(n), "--bits", str(bits),
                             "--depth", "8", "--cpu", str(a.daemon_cpu)]))
        res["rss"].append(out)
    return res


def filler(seconds):
    """Diverse kernel activity: many distinct stacks on the busy tracepoints."""
    end = time.time() + seconds
    while time.time() < end:
        subprocess.run("ls -lR /sys/kernel/mm /proc/sys/net > /dev/null 2>&1; "
                       "cat /proc/self/maps /proc/slabinfo /proc/net/* > /dev/null 2>&1; "
                       "find /usr/lib -maxdepth 2 -newer /etc/hostname > /dev/null 2>&1; "
                       "tar cf - /usr/share/doc 2>/dev/null | head -c 2000000 > /dev/null",
                       shell=True)


def bench_pool_exhausted(a, bins):
    """--bits 10 (pool exhausted by a filler) next to --bits 14, same busy tracepoints."""
    rounds = []
    for r in range(a.px_rounds):
        small = Stackmapd(bins["stackmapd"], "bits10_exhausted", BUSY_EVENTS, 10)
        big = Stackmapd(bins["stackmapd"], "bits14", BUSY_EVENTS, 14)
        seq = [small, big] if r % 2 == 0 else [big, small]
        started = []
        try:
            for t in seq:
                t.start()
                started.append(t)
            filler(a.fill_seconds)
            row = {"order": [t.name for t in seq]}
            # Window 1: the filler again (new stacks keep coming: the miss path).
            # Window 2: the pinned workload (its stacks: hits, or misses if new).
            for win, fn in (("filler", lambda: filler(a.seconds)),
                            ("alloc_loop", lambda: workload(bins["alloc_loop"], a.cpu, a.seconds))):
                s0 = prog_stats()
                fn()
                s1 = prog_stats()
                w = {}
                for t in (small, big):
                    pid = t.prog_ids[0]
                    dn = s1[pid][1] - s0[pid][1]
                    w[t.name] = (s1[pid][0] - s0[pid][0]) / dn if dn else None
                w["ratio"] = (w["bits10_exhausted"] / w["bits14"]
                              if w["bits10_exhausted"] and w["bits14"] else None)
                row[win] = w
        finally:
            for t in reversed(started):
                t.stop()
        row["bits10_stat"] = small.stat
        row["bits14_stat"] = big.stat
        try:
            # Whole session (fill + both windows): the share of bits10's events
            # dropped as pool_full, from its stack_map_stat.
            row["bits10_pool_full_drop_share"] = (int(small.stat["drop_pool_full"]) /
                                                  int(small.stat["events"]))
            row["bits10_entries"] = small.stat["entries"]
        except (KeyError, ValueError, ZeroDivisionError):
            row["bits10_pool_full_drop_share"] = None
        rounds.append(row)
        log("pool exhausted round %d: filler %s vs %s ns, alloc_loop %s vs %s ns "
            "(bits10: entries %s, pool_full share of its events %s)" % (
                r + 1, num(row["filler"]["bits10_exhausted"]), num(row["filler"]["bits14"]),
                num(row["alloc_loop"]["bits10_exhausted"]), num(row["alloc_loop"]["bits14"]),
                row.get("bits10_entries"), num(row["bits10_pool_full_drop_share"], 3)))
    res = {"events": BUSY_EVENTS, "rounds": rounds}
    for win in ("filler", "alloc_loop"):
        res[win] = {k: summary([r[win][k] for r in rounds]) for k in
                    ("bits10_exhausted", "bits14", "ratio")}
    res["bits10_pool_full_drop_share"] = summary([r["bits10_pool_full_drop_share"] for r in rounds])
    return res


def stats_around(tracers, work):
    """Starts `tracers` in order, runs work(), stops them in reverse (those started, on a
    failure too); returns prog_stats() before and after work."""
    started = []
    try:
        for t in tracers:
            t.start()
            started.append(t)
        s0 = prog_stats()
        work()
        return s0, prog_stats()
    finally:
        for t in reversed(started):
            t.stop()


def bench_user_stacks(a, bins):
    """--user-stacks walking unwind tables, --user-stacks by frame pointers, and kernel stacks
    only, the three on the same tracepoint at once (same events), the attach order rotated
    per round: in-kernel ns/event of each and the ratios to kernel stacks only."""
    rounds = []
    names = ("user_tables", "user_fp", "kernel_only")
    for r in range(a.px_rounds):
        daemons = [Stackmapd(bins["stackmapd"], "user_tables", (EVENT,), 14, ["--user-stacks"]),
                   Stackmapd(bins["stackmapd"], "user_fp", (EVENT,), 14,
                             ["--user-stacks", "--user-unwind", "fp"]),
                   Stackmapd(bins["stackmapd"], "kernel_only", (EVENT,), 14),
                   Bpftrace("bpftrace_ustack",
                            "tracepoint:%s { @[kstack, ustack] = count(); }" % EVENT)]
        seq = daemons[r % 4:] + daemons[:r % 4]
        s0, s1 = stats_around(seq, lambda: workload(bins["alloc_loop"], a.cpu, a.seconds))
        row = {"order": [t.name for t in seq]}
        for t in daemons:
            pid = t.prog_ids[0]
            dn = s1[pid][1] - s0[pid][1]
            row[t.name] = (s1[pid][0] - s0[pid][0]) / dn if dn else None
        for n in ("user_tables", "user_fp", "bpftrace_ustack"):
            row[n + "_ratio"] = (row[n] / row["kernel_only"]
                                 if row[n] and row["kernel_only"] else None)
        # The tables against the frame-pointer walk, the figure their cost is judged by.
        row["tables_to_fp"] = (row["user_tables"] / row["user_fp"]
                               if row["user_tables"] and row["user_fp"] else None)
        rounds.append(row)
        log("user stacks round %d (%s first): ns/event %s with unwind tables, %s with frame "
            "pointers, %s kernel only, %s bpftrace ustack; ratios %s, %s" % (
                r + 1, seq[0].name, num(row["user_tables"]), num(row["user_fp"]),
                num(row["kernel_only"]), num(row["bpftrace_ustack"]),
                num(row["user_tables_ratio"], 3), num(row["user_fp_ratio"], 3)))
    res = {"event": EVENT, "rounds": rounds}
    for k in names + ("user_tables_ratio", "user_fp_ratio", "bpftrace_ustack",
                      "bpftrace_ustack_ratio", "tables_to_fp"):
        res[k] = summary([r[k] for r in rounds])
    res["profile"] = bench_user_profile(a, bins)
    return res


def bench_user_profile(a, bins):
    """--profile 999 --user-stacks on a user-bound program (-O2, no frame pointers,
    calling back through glibc: unwind_vs_perf's callback_loop) pinned to the workload
    CPU, with unwind tables, with frame pointers, and bpftrace `@[kstack, ustack]`, the
    three at once, the order rotated: in-kernel ns per sample of the program (run time
    over the samples each counted for it; bpftrace's also runs, cheaply, for the other
    CPU's samples its filter rejects)."""
    tmp = tempfile.mkdtemp(prefix="stackmapd-bench-profile-")
    loop = os.path.join(tmp, "callback_loop")
    subprocess.run(["cc", "-O2", "-g", "-fomit-frame-pointer", "-pthread", "-x", "c", "-", "-o",
                    loop], input=CALLBACK_C.encode(), check=True)
    prog = subprocess.Popen(["taskset", "-c", str(a.cpu), loop])
    names = ("user_tables", "user_fp", "bpftrace_ustack")
    rounds = []
    try:
        for r in range(a.px_rounds):
            common = ["--profile", "999", "--cpu", str(a.cpu), "--pid", str(prog.pid),
                      "--user-stacks"]
            tracers = [Stackmapd(bins["stackmapd"], "user_tables", (), 14, common),
                       Stackmapd(bins["stackmapd"], "user_fp", (), 14,
                                 common + ["--user-unwind", "fp"]),
                       Bpftrace("bpftrace_ustack", "profile:hz:999 /pid == %d/ "
                                "{ @[kstack, ustack] = count(); }" % prog.pid, counted=True)]
            seq = tracers[r % 3:] + tracers[:r % 3]
            s0, s1 = stats_around(seq, lambda: time.sleep(a.seconds))
            row = {"order": [t.name for t in seq]}
            for t in tracers:
                counted = (t.counted if isinstance(t, Bpftrace) else
                           int(t.stat.get("events_total", 0) or 0))
                ns = sum(s1[p][0] - s0[p][0] for p in t.prog_ids)
                row[t.name] = ns / counted if counted else None
                row[t.name + "_samples"] = counted
            rounds.append(row)
            log("user profile round %d (%s first): ns/sample %s with unwind tables, %s with "
                "frame pointers, %s bpftrace ustack" % (
                    r + 1, seq[0].name, num(row["user_tables"]), num(row["user_fp"]),
                    num(row["bpftrace_ustack"])))
    finally:
        prog.kill()
        prog.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    res = {"rounds": rounds}
    for k in names:
        res[k] = summary([r[k] for r in rounds])
    return res


COMPARE_FIGURES = (("ns_per_event", "in-kernel ns/event (bpf_stats run_time_ns / run_cnt)", 0),
                   ("ops_per_s", "workload ops/s", 0),
                   ("daemon_cpu_s_per_million", "daemon CPU s per million events", 4),
                   ("ring_bytes_per_event", "ring-buffer bytes per event", 1))


def ab_pairs(n, order, ratio, run, keys, what):
    """n rounds of one stackmapd session per name of `order` (A B A B ...; run(name)
    -> stackmapd_run's figures); per pair the ratio ratio[0] / ratio[1] of each of
    `keys`; returns the pairs and, per key, each name's summary and the ratio's."""
    num_, den = ratio
    pairs = []
    for r in range(n):
        pair = {}
        for name in order:
            x = run(name)
            pair[name] = dict({k: x.get(k) for k in keys + ["events", "stat_events"]},
                              ops_per_s=x["work"])
        pair["ratio"] = {k: pair[num_][k] / pair[den][k] if pair[num_][k] and pair[den][k]
                         else None for k in keys}
        pairs.append(pair)
        log("%s pair %d: ns/event %s %s, %s %s (ratio %s); ops/s ratio %s" % (
            what, r + 1, num_, num(pair[num_]["ns_per_event"]), den, num(pair[den]["ns_per_event"]),
            num(pair["ratio"]["ns_per_event"], 3), num(pair["ratio"]["ops_per_s"], 3)))
    res = {"pairs": pairs}
    for k in keys:
        res[k] = {name: summary([p[name][k] for p in pairs]) for name in order}
        res[k]["ratio"] = summary([p["ratio"][k] for p in pairs])
    return res


def bench_compare(a, bins):
    """This build (A) against --baseline-stackmapd (B): one daemon at a time on the
    same tracepoint under the same pinned workload, in the order A B A B ...;
    per pair, the ratio A / B of each figure (< 1: this build costs less)."""
    builds = {"current": (bins["stackmapd"], a.current_args.split()),
              "baseline": (bins["baseline_stackmapd"], a.baseline_args.split())}

    def run(name):
        binary, extra = builds[name]
        return stackmapd_run(Stackmapd(binary, name, extra=extra),
                             lambda: workload(bins["alloc_loop"], a.cpu, a.seconds))
    res = {"order": "A B A B ... (A = this build, B = baseline), one daemon at a time",
           "current": bins["stackmapd"], "baseline": bins["baseline_stackmapd"],
           "current_args": a.current_args, "baseline_args": a.baseline_args}
    res.update(ab_pairs(a.compare_rounds, list(builds), ("current", "baseline"), run,
                        [k for k, _, _ in COMPARE_FIGURES], "compare"))
    return res


def pipe_workload(cpu, loops):
    """`perf bench sched pipe` on one CPU: two tasks passing a token, a context
    switch per pass. Returns its ops/s."""
    out = sh(["taskset", "-c", str(cpu), "perf", "bench", "sched", "pipe", "-l", str(loops)])
    for line in out.splitlines():
        if "ops/sec" in line:
            return float(line.split()[0])
    raise RuntimeError("perf bench sched pipe printed no ops/sec: " + out[-200:])


def bench_offcpu(a, bins):
    """--offcpu next to plain counting of the same tracepoint: `-e sched:sched_switch`
    (A) and `--offcpu` (B), one daemon at a time, A B A B ..., under a pipe ping-pong
    on the workload CPU; in-kernel ns per sched_switch and the ping-pong's ops/s."""
    loops = 20000 if a.smoke else 200000
    modes = {"plain": ([], ["sched:sched_switch"]), "offcpu": (["--offcpu"], [])}

    def run(name):
        extra, events = modes[name]
        return stackmapd_run(Stackmapd(bins["stackmapd"], name, events=events, extra=extra),
                             lambda: pipe_workload(a.cpu, loops))
    res = {"order": "A B A B ... (A = -e sched:sched_switch, B = --offcpu), one daemon at a time"}
    res.update(ab_pairs(1 if a.smoke else a.compare_rounds, list(modes), ("offcpu", "plain"), run,
                        ["ns_per_event", "ops_per_s"], "offcpu"))
    return res


# Each daemon configuration that loads a program of its own shape (settings in
# .rodata prune what is off, so a program's size depends on them).
# (name, options, the program it is about: the last one the daemon loads).
PROG_CONFIGS = (("tracepoint", ["-e", EVENT], "stackmapd_tracepoint"),
                ("trace", ["--trace", "/dev/null", "-e", EVENT], "stackmapd_tracepoint"),
                ("user_stacks", ["--user-stacks", "-e", EVENT], "stackmapd_tracepoint"),
                ("profile", ["--profile", "99"], "stackmapd_profile"),
                ("fentry", ["-f", "vfs_read"], "stackmapd_fentry"),
                ("offcpu", ["--offcpu"], "stackmapd_offcpu"))


def held_programs(pid):
    """{prog id: fdinfo} of the BPF programs process `pid` holds open (fdinfo has
    prog_type and verified_insns, which this bpftool's JSON lacks)."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in f)}
        except OSError:  # closed meanwhile
            continue
        out[int(info["prog_id"])] = info
    return out


def program_sizes(binary, args, wanted):
    """{"programs": [{name, id, bytes_xlated, bytes_jited, verified_insns}]} of the
    programs one daemon of `binary` started with `args` holds once it holds
    `wanted` (each program is verified in turn, for up to seconds), or
    {"error": its last line} when it exits first."""
    outdir = tempfile.mkdtemp(prefix="stackmapd-bench-progs-")
    proc = subprocess.Popen(pinned([binary, "--output", outdir] + args),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        shown, end = {}, time.time() + 60
        while True:
            if proc.poll() is not None:  # e.g. no fentry on this kernel: its message instead
                return {"error": (proc.stderr.read().strip().splitlines() or ["?"])[-1]}
            held = held_programs(proc.pid)
            for prog_id in held.keys() - shown.keys():
                shown[prog_id] = json.loads(sh(["bpftool", "-j", "prog", "show", "id",
                                                str(prog_id)]))
            if any(shown[i]["name"] == wanted for i in held):
                break
            if time.time() > end:
                raise RuntimeError(f"{binary} {' '.join(args)}: no {wanted} within 60 s")
            time.sleep(0.2)
        return {"programs": [
            {"name": shown[i]["name"], "id": i, "bytes_xlated": shown[i]["bytes_xlated"],
             "bytes_jited": shown[i].get("bytes_jited"),
             "verified_insns": int(held[i]["verified_insns"]) if "verified_insns" in held[i]
             else None} for i in sorted(held)]}
    finally:
        stop_proc(proc)
        subprocess.run(["rm", "-rf", outdir])


def bench_progs(a, bins):
    """The BPF programs each daemon configuration loads: translated (xlated) bytes
    and the instructions the verifier walked to accept them, for this build and
    (with --baseline-stackmapd) the baseline."""
    builds = {"current": bins["stackmapd"]}
    if a.baseline_stackmapd:
        builds["baseline"] = bins["baseline_stackmapd"]
    res = {}
    for build, binary in builds.items():
        res[build] = {}
        for config, args, wanted in PROG_CONFIGS:
            x = res[build][config] = program_sizes(binary, args, wanted)
            log("programs %-8s %-11s %s" % (build, config, x.get("error") or ", ".join(
                f"{p['name']} {p['bytes_xlated']} B xlated, {p['verified_insns']} insns verified"
                for p in x["programs"])))
    return res


SNAPSHOT_CONFIGS = (("kernel stacks, 3 pids each", []), ("under 3 user stacks", ["--user"]))


def bench_snapshot(a, bins):
    """What one snapshot costs off the hot path, stage by stage: the store's copy,
    the model's callstack ids, the frame names, each output (snapshot_bench)."""
    stacks, rounds = (2000, 1) if a.smoke else (20000, 5)
    res = {}
    for config, extra in SNAPSHOT_CONFIGS:
        res[config] = json.loads(sh([bins["snapshot_bench"], "--stacks", str(stacks), "--depth", "16",
                                     "--keys", "3", "--rounds", str(rounds)] + extra))
        log("snapshot %-27s %s" % (config, ", ".join(
            f"{k} {v} ms" for k, v in res[config]["ms"].items())))
    return res


UNWIND_FILES = ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2",
                "/usr/bin/python3.11", "/usr/bin/gzip")


def bench_unwind(a, bins):
    """Each file's unwind table: build time (first build of the process apart), rows, bytes."""
    files = [f for f in UNWIND_FILES if os.path.exists(f)]
    res = json.loads(sh([bins["cfi_bench"], "--rounds", "1" if a.smoke else "9",
                         "--sandbox", bins["stackmapd"]] + files))
    for f in res["files"]:
        log("unwind %-34s %6d rows %8d B  %.1f ms (first %.1f ms), in the sandbox %.1f ms; "
            "frames/s %d in process, %d in the sandbox" % (
                f["path"], f["rows"], f["bytes"], f["median_ms"], f["first_ms"],
                f["sandbox_median_ms"], f["symbols"]["in_process_per_s"],
                f["symbols"]["sandbox_per_s"]))
    return res


def sha256_of(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def describe_baseline(a):
    """What the baseline is, and whether its BPF object is the one its binary embeds."""
    d = {"stackmapd": os.path.abspath(a.baseline_stackmapd),
         "stackmapd_sha256": sha256_of(a.baseline_stackmapd)}
    if a.baseline_bpf_obj:
        with open(a.baseline_bpf_obj, "rb") as f:
            obj = f.read()
        with open(a.baseline_stackmapd, "rb") as f:
            embedded = obj in f.read()  # the skeleton carries the object's bytes verbatim
        d.update({"bpf_obj": os.path.abspath(a.baseline_bpf_obj),
                  "bpf_obj_sha256": sha256_of(a.baseline_bpf_obj),
                  "bpf_obj_embedded_in_binary": embedded})
        if not embedded:
            log(f"warning: {a.baseline_bpf_obj} is not the BPF object embedded in "
                f"{a.baseline_stackmapd}: the comparison measures the binary's own object")
    return d


# ------------------------------------------------------------------- output
def fmt(s, unit="", digits=0):
    if not s:
        return "n/a"
    f = f"{{:.{digits}f}}"
    return (f"{f.format(s['median'])}{unit} ({f.format(s['min'])}–{f.format(s['max'])})")


def scaled(s, f):
    """A summary with f applied to its median, min and max (None stays None)."""
    return {k: f(s[k]) for k in ("median", "min", "max")} if s else None


def table(L, title, head, rows):
    """Appends a titled markdown table (rows: lists of cells) to L."""
    L += [title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    L += ["| " + " | ".join(r) + " |" for r in rows] + [""]


def ab_rows(res, a, b, figures):
    """Rows [label, A, B, ratio] of an A-against-B result (figures: (key, label, digits))."""
    return [[label, fmt(res[k][a], "", digits), fmt(res[k][b], "", digits),
             fmt(res[k]["ratio"], "×", 3)] for k, label, digits in figures]


RING_SOURCE = {"stack_map_stat": "stack_map_stat `ring_bytes` / (`events_total` - "
                                 "`drop_ringbuf_full`), the events that reached the ring, whole "
                                 "session",
               "producer position": "the ring's producer position / program runs (this daemon "
                                    "writes no `ring_bytes`)"}
RING_GOALS = {("by", "alloc_loop"): "≤ 5 B (stretch ≤ 1 B on repetitive phases)",
              ("trace", "alloc_loop"): "≤ 16 B beyond the event's own fields"}


def goal_rows(res):
    """The figures that have a goal, one row each: [figure, value, goal]."""
    rows = []
    ring = res.get("ring")
    if ring:
        for (c, clabel, _), (w, wlabel, _) in itertools.product(RING_CONFIGS[:2], RING_WORKLOADS):
            value = fmt(ring["bytes_per_event"][c][w], " B", 2)
            if c == "trace" and ring.get("trace_beyond_fields"):
                value += (f": {fmt(ring['trace_beyond_fields'][w], ' B', 2)} beyond the event's "
                          f"{ring['trace_fields_bytes']} B of fields")
            rows.append([f"ring bytes/event, {clabel}, {wlabel}", value,
                         RING_GOALS.get((c, w), "reported")])
    ns = res.get("ns_per_event")
    if ns:
        bal = ns["balanced"]
        rows += [["in-kernel ns/event, stackmapd / bpftrace `@[kstack]=count()`, order-balanced",
                  fmt(bal["stackmapd/bpftrace"], "×", 3), "≤ 1.00× (stretch 0.97×)"],
                 ["in-kernel ns/event, bare `bpf_get_stack` / bpftrace, order-balanced",
                  fmt(bal["bare_get_stack/bpftrace"], "×", 3), "reference"],
                 ["stackmapd's own work on top of bare `bpf_get_stack` (order-balanced ratio − 1)",
                  fmt(scaled(bal["stackmapd/bare_get_stack"], lambda r: (r - 1) * 100), " %", 1),
                  "≤ 3 %"]]
    tp = res.get("throughput")
    if tp:
        rows += [[f"workload throughput (untraced = 1), {label}", fmt(tp["ratio"][k], "", 3),
                  "≥ bpftrace's and ftrace's" if k == "stackmapd" else "reference"]
                 for k, label in THROUGHPUT_TRACERS]
    load = (res.get("daemon") or {}).get("load")
    for name, _ in LOAD_CONFIGS if load else ():
        x = load["summary"][name]
        rows += [[f"daemon CPU ({name}), /proc/PID/stat, at {fmt(x['events_per_s'])} events/s, "
                  f"CPUs {','.join(map(str, load['cpus']))} producing",
                  fmt(x["daemon_cpu_percent_stat"], " %", 2) + " = " +
                  fmt(x["daemon_cpu_s_per_million_stat"], " s", 4) + " per million events",
                  f"≤ 0.3 % at {LOAD_EVENTS_PER_S // 1000} k events/s"],
                 [f"daemon VmRSS / VmHWM ({name}, --bits 14, under that load)",
                  fmt(scaled(x["vm_rss_kb"], lambda v: v / 1024), " MB", 1) + " / " +
                  fmt(scaled(x["vm_hwm_kb"], lambda v: v / 1024), " MB", 1), "≤ 24 MB"]]
    return rows


THROUGHPUT_TRACERS = (("stackmapd", "stackmapd"), ("bpftrace", "bpftrace `@[kstack]=count()`"),
                      ("ftrace", "ftrace event + `options/stacktrace`"),
                      ("perf", "`perf record -g -C N`"))


def markdown(res):
    m = res["meta"]
    L = []
    L.append(f"Run {m['date']} on {m['cpu_model']} ({m['nproc']} CPUs), kernel {m['kernel']}, "
             f"stackmapd {m['git']}{' (quick mode)' if m['quick'] else ''}"
             f"{' (SMOKE: seconds per section, figures mean nothing)' if m.get('smoke') else ''}; workload on CPU "
             f"{m['workload_cpu']}, {m['seconds']} s per measurement. Medians (min–max).")
    L.append("")
    rows = goal_rows(res)
    if rows:
        table(L, "**Figures with a goal, this run** (each from its section below; the goal column "
                 "is for reading, not a verdict)", ["figure", "value", "goal"],
              rows)
    ns = res.get("ns_per_event")
    if ns:
        n_rounds = len(ns["rounds"])
        n_orders = len({tuple(r["order"]) for r in ns["rounds"]})
        rows = [[n, fmt(ns["programs"][n]), fmt(ns["ratio_to_bpftrace"][n], "×", 3),
                 " / ".join(fmt(ns["by_position"][n][p]) for p in ("1", "2", "3"))]
                for n in ("stackmapd", "bpftrace", "bare_get_stack")]
        table(L, f"**In-kernel ns/event** (`{EVENT}`, all three attached at once, {n_rounds} rounds "
                 f"over {'all 6' if n_orders == 6 else n_orders} attach orders, each order next to "
                 "its reverse)",
              ["program", "ns/event", "ratio to bpftrace (same round)",
               "ns when attached 1st / 2nd / 3rd"], rows)
        table(L, "Order-balanced: per mirror pair of rounds (an order and its reverse), the "
                 "geometric mean of the two same-round ratios",
              ["ratio", "value"], [[k.replace("/", " / "), fmt(v, "×", 3)]
                                   for k, v in ns["balanced"].items()])
    tp = res.get("throughput")
    if tp:
        t = tp["transport"]
        notes = {"stackmapd": f"{fmt(t['stackmapd']['measured'], ' B', 1)} ring buffer "
                              f"({RING_SOURCE.get(t['stackmapd']['source'], 'n/a')})",
                 "bpftrace": "— (aggregates in the kernel, no per-event record)",
                 "ftrace": f"{fmt(t['ftrace']['measured'], ' B', 1)} ({num(t['ftrace']['stack_part'], 1)} "
                           f"B of it the stack; event alone {num(t['ftrace']['event_only'], 1)} B)",
                 "perf": f"{fmt(t['perf']['measured'], ' B', 1)} perf.data per sample"}
        table(L, f"**Workload throughput** (untraced = 1; untraced {fmt(tp['untraced_ops_per_s'])} "
                 f"ops/s, ~3 events/op; {len(tp['rounds'])} interleaved rounds) and "
                 "**transport bytes/event**", ["tracer", "throughput ratio", "bytes/event"],
              [[label, fmt(tp["ratio"][k], "", 3), notes[k]] for k, label in THROUGHPUT_TRACERS])
    ring = res.get("ring")
    if ring:
        table(L, f"**stackmapd ring bytes per event** (`{EVENT}`, one daemon at a time, "
                 f"rounds: {ring['n_rounds']}; "
                 f"{RING_SOURCE.get(ring['source'], 'n/a')}; headers included)",
              ["daemon"] + [label for _, label, _ in RING_WORKLOADS],
              [[clabel] + [fmt(ring["bytes_per_event"][c][w], " B", 2) for w, _, _ in RING_WORKLOADS]
               for c, clabel, _ in RING_CONFIGS])
    d = res.get("daemon")
    if d:
        dr = d["drain"]
        rows = [["drain rate, synthetic producer replaying real ids",
                 fmt(scaled(dr["ids_per_cpu_s"], lambda v: v / 1e6), " M ids/s", 1)],
                ["daemon CPU per million ids (drain only)", fmt(dr["cpu_s_per_million"], " s", 4)]]
        dl = tp["daemon_under_load"] if tp else None
        if dl:
            rows.append([f"daemon CPU per million events, real session under the workload "
                         f"({fmt(dl['events_per_s'])} events/s)",
                         f"{fmt(dl['cpu_s_per_million'], ' s', 4)} = {fmt(dl['cpu_percent'], ' %', 2)} CPU"])
        lo = d["at_10k_events_per_s"]
        rows.append([f"daemon CPU at {lo['events_per_s']:.0f} events/s ({lo['seconds']:.0f} s)",
                     f"{lo['cpu_percent']:.2f} %"])
        load = d.get("load")
        for name, _ in LOAD_CONFIGS if load else ():
            x = load["summary"][name]
            rows.append([f"daemon ({name}) with CPUs {','.join(map(str, load['cpus']))} producing, "
                         f"{fmt(x['events_per_s'])} events/s (target {LOAD_EVENTS_PER_S}): CPU from "
                         "/proc/PID/stat; schedstat",
                         f"{fmt(x['daemon_cpu_percent_stat'], ' %', 2)} "
                         f"({fmt(x['daemon_cpu_s_per_million_stat'], ' s', 4)} per million events); "
                         f"{fmt(x['daemon_cpu_percent'], ' %', 2)}; VmRSS "
                         f"{fmt(scaled(x['vm_rss_kb'], lambda v: v / 1024), ' MB', 1)}, VmHWM "
                         f"{fmt(scaled(x['vm_hwm_kb'], lambda v: v / 1024), ' MB', 1)}"])
        rows.append(["ring bytes per record (producer position)",
                     fmt(dr["ring_bytes_per_record"], " B", 1)])
        rows += [[f"RSS at {r['store_stacks']} unique stacks (--bits {r['bits']}, depth {r['depth']})",
                  f"{r['rss_kb'] / 1024:.1f} MB: anon (StackStore, heap) {r['rss_anon_kb'] / 1024:.1f} "
                  f"MB + mapped BPF maps {r['rss_file_kb'] / 1024:.1f} MB; kernel memlock "
                  f"slots+pool+ring {(r['memlock_slots'] + r['memlock_pool'] + r['memlock_ring']) / 2**20:.1f} MB"]
                 for r in d["rss"]]
        table(L, "**Daemon** (consumer pinned to one core)", ["figure", "value"], rows)
    px = res.get("pool_exhausted")
    if px:
        table(L, f"**After the element pool is exhausted** (`--bits 10` filled by a filler, next "
                 f"to `--bits 14`, both on {len(px['events'])} busy tracepoints, same events, "
                 f"{len(px['rounds'])} order-alternated rounds)",
              ["window", "--bits 10, pool full: ns/event", "--bits 14: ns/event", "ratio"],
              ab_rows(px, "bits10_exhausted", "bits14",
                      (("filler", "filler (shell commands: new stacks keep coming)", 0),
                       ("alloc_loop", "alloc_loop (the pinned workload)", 0))))
        L.append(f"The --bits 10 daemon dropped "
                 f"{fmt(scaled(px['bits10_pool_full_drop_share'], lambda v: v * 100), ' %', 1)}"
                 " of its events as `drop_pool_full` over each whole session (its stack_map_stat).")
        L.append("")
    o = res.get("offcpu")
    if o:
        table(L, f"**--offcpu next to plain counting** (`-e sched:sched_switch` against "
                 f"`--offcpu`, one daemon at a time under `perf bench sched pipe` on CPU "
                 f"{res['meta']['workload_cpu']}, {len(o['pairs'])} pairs A B A B ...)",
              ["figure", "plain", "--offcpu", "ratio --offcpu / plain"],
              ab_rows(o, "plain", "offcpu", (("ns_per_event", "in-kernel ns per sched_switch", 0),
                                             ("ops_per_s", "ping-pong ops/s", 0))))
    bp = res.get("bpf_programs")
    if bp:
        base = bp.get("baseline", {})
        rows = []
        for config, _, _ in PROG_CONFIGS:
            cur = bp["current"][config]
            if "error" in cur:
                rows.append([f"{config}: not loaded ({cur['error']})", "n/a", "n/a"] +
                            (["n/a", "n/a"] if base else []))
            old = {p["name"]: p for p in base.get(config, {}).get("programs", [])}
            for p in cur.get("programs", []):
                b = old.get(p["name"])
                rows.append([f"{config}: `{p['name']}`", str(p["bytes_xlated"]),
                             str(p["verified_insns"])] +
                            ([str(b["bytes_xlated"]), str(b["verified_insns"])] if b else
                             ["n/a", "n/a"] if base else []))
        table(L, "**BPF programs** (each daemon configuration's programs, from `bpftool prog show` "
                 "and the daemon's fdinfo while it runs; the verifier's count depends on the "
                 "settings it prunes)",
              ["configuration: program", "xlated bytes", "verified insns"] +
              (["baseline xlated bytes", "baseline verified insns"] if base else []), rows)
    us = res.get("user_stacks")
    if us:
        table(L, f"**User stacks** (three daemons and bpftrace on `{us['event']}` at once, same "
                 f"events, {len(us['rounds'])} rounds, attach order rotated; in-kernel ns/event)",
              ["figure", "median (min–max)"],
              [["--user-stacks, unwind tables", fmt(us["user_tables"])],
               ["--user-stacks --user-unwind fp", fmt(us["user_fp"])],
               ["kernel stacks only", fmt(us["kernel_only"])],
               ["bpftrace `@[kstack, ustack] = count()`", fmt(us.get("bpftrace_ustack"))],
               ["tables / kernel only", fmt(us["user_tables_ratio"], digits=3)],
               ["fp / kernel only", fmt(us["user_fp_ratio"], digits=3)],
               ["bpftrace ustack / kernel only", fmt(us.get("bpftrace_ustack_ratio"), digits=3)],
               ["tables / fp, per round", fmt(us.get("tables_to_fp"), digits=3)]])
        up = us.get("profile")
        if up:
            table(L, f"**User stacks, CPU profile** (`--profile 999 --user-stacks` of a -O2 program "
                     f"without frame pointers calling back through glibc, two daemons and bpftrace "
                     f"at once, {len(up['rounds'])} rounds, order rotated; in-kernel ns per sample "
                     f"of the program)",
                  ["figure", "median (min–max)"],
                  [["unwind tables", fmt(up["user_tables"])],
                   ["--user-unwind fp", fmt(up["user_fp"])],
                   ["bpftrace `@[kstack, ustack] = count()`", fmt(up["bpftrace_ustack"])]])
    uw = res.get("unwind")
    if uw:
        table(L, "**Unwind tables and names, in process and in the parser sandbox** "
                 "(`bench/cfi_bench --sandbox`: each file's table built from its CFI, alternately "
                 "in process and the daemon's way, in its sandbox; ms the median of its rounds, the "
                 "process's first build apart: it loads libdw's backend; 8-byte rows; frames/s "
                 "over 2000 new offsets a round, 8 a call in the sandbox)",
              ["file", "CFI", "FDEs", "rows", "bytes", "build ms", "first build ms",
               "sandbox ms", "frames/s", "sandbox frames/s"],
              [[f"`{f['path']}`", f["section"], str(f["fdes"]), str(f["rows"]), str(f["bytes"]),
                str(f["median_ms"]), str(f["first_ms"]), str(f["sandbox_median_ms"]),
                str(f["symbols"]["in_process_per_s"]), str(f["symbols"]["sandbox_per_s"])]
               for f in uw["files"]])
    sn = res.get("snapshot")
    if sn:
        stages = list(next(iter(sn.values()))["ms"])
        first = next(iter(sn.values()))
        table(L, f"**One snapshot, stage by stage** (`bench/snapshot_bench`, {first['stacks']} kernel "
                 f"stacks of {first['depth']} frames, 3 pids each; ms, the median of its rounds)",
              ["stage"] + list(sn), [[f"`{st}`"] + [str(sn[c]["ms"].get(st, "n/a")) for c in sn]
                                     for st in stages])
    c = res.get("compare")
    if c:
        base = res["meta"].get("baseline", {})
        obj = (f"; its BPF object {base['bpf_obj']} is "
               f"{'the one it embeds' if base.get('bpf_obj_embedded_in_binary') else 'NOT the one it embeds'}"
               if base.get("bpf_obj") else "")
        args = "".join(f"; {who} with `{c.get(k)}`" for who, k in
                       (("this build", "current_args"), ("the baseline", "baseline_args"))
                       if c.get(k))
        table(L, f"**This build against the baseline** (`{c['baseline']}`{obj}{args}; one daemon "
                 f"at a time on `{EVENT}`, {len(c['pairs'])} pairs in the order A B A B ..., ratio "
                 "per pair; below 1 = this build costs less)",
              ["figure", "this build", "baseline", "ratio this / baseline"],
              ab_rows(c, "current", "baseline", COMPARE_FIGURES))
    return "\n".join(L)


def chart(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 3, figsize=(17, 14))
    fig.suptitle(f"stackmapd benchmarks — {res['meta']['date']}, kernel {res['meta']['kernel']}"
                 f"{' (quick)' if res['meta']['quick'] else ''}  ·  bars: median, whiskers: min–max",
                 fontsize=13)
    colors = {"stackmapd": "#2a7ab0", "bpftrace": "#e08a2c", "bare_get_stack": "#8a8a8a",
              "ftrace": "#5aa05a", "perf": "#b04a4a", "untraced": "#cccccc"}

    def bars(ax, labels, sums, keys, title, ylabel, fmtstr, notes=None):
        med = [s["median"] if s else 0 for s in sums]
        lo = [s["median"] - s["min"] if s else 0 for s in sums]
        hi = [s["max"] - s["median"] if s else 0 for s in sums]
        b = ax.bar(labels, med, yerr=[lo, hi], capsize=5,
                   color=[colors.get(k, "#777") for k in keys])
        for i, (rect, s) in enumerate(zip(b, sums)):
            txt = fmtstr.format(s["median"]) if s else "n/a"
            if notes and notes[i]:
                txt += "\n" + notes[i]
            top = s["max"] if s else 0  # above the whisker, never on it
            ax.annotate(txt, (rect.get_x() + rect.get_width() / 2, top),
                        xytext=(0, 4), textcoords="offset points",
                        ha="center", va="bottom", fontsize=10)
        ax.set_title(title, fontsize=11)
        ax.set_ylabel(ylabel)
        ax.margins(y=0.25)
        ax.grid(axis="y", alpha=0.3)

    def grouped(ax, groups, series, title, ylabel, fmtstr):
        """Bars per group (x) and series (colour); series: [(label, colour, [summary per group])]."""
        import numpy as np
        x, width = np.arange(len(groups)), 0.8 / len(series)
        for j, (lab, col, sums) in enumerate(series):
            med = [v["median"] if v else 0 for v in sums]
            err = [[v["median"] - v["min"] if v else 0 for v in sums],
                   [v["max"] - v["median"] if v else 0 for v in sums]]
            b = ax.bar(x + (j - (len(series) - 1) / 2) * width, med, width, yerr=err, capsize=4,
                       color=col, label=lab)
            for rect, v in zip(b, sums):
                ax.annotate(fmtstr.format(v["median"]) if v else "n/a",
                            (rect.get_x() + rect.get_width() / 2, v["max"] if v else 0),
                            xytext=(0, 3), textcoords="offset points", ha="center", fontsize=10)
        ax.set_xticks(x)
        ax.set_xticklabels(groups)
        ax.set_title(title, fontsize=11)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=9, loc="upper right")
        ax.margins(y=0.3)
        ax.grid(axis="y", alpha=0.3)

    ns = res.get("ns_per_event")
    ax = axes[0][0]
    if ns:
        keys = ["bare_get_stack", "bpftrace", "stackmapd"]
        notes = [f"{num((ns['ratio_to_bpftrace'][k] or {}).get('median'), 3)}× bpftrace" for k in keys]
        bars(ax, ["bare\nbpf_get_stack", "bpftrace\n@[kstack]=count()", "stackmapd\n(dedup + id)"],
             [ns["programs"][k] for k in keys], keys,
             "In-kernel cost per event (lower is better)", "ns / event", "{:.0f} ns", notes)
    tp = res.get("throughput")
    ax = axes[0][1]
    if tp:
        keys = ["stackmapd", "bpftrace", "ftrace", "perf"]
        bars(ax, ["stackmapd", "bpftrace\nkstack", "ftrace\n+stacktrace", "perf\nrecord -g"],
             [tp["ratio"][k] for k in keys], keys,
             "Workload throughput, untraced = 1 (higher is better)", "ratio to untraced", "{:.2f}")
        ax.axhline(1.0, color="#444", lw=1, ls="--")
        ax = axes[0][2]
        t = tp["transport"]
        keys = ["stackmapd", "ftrace", "perf"]
        bars(ax, ["stackmapd\nring buffer", "ftrace\nevent+stack", "perf.data\nper sample"],
             [t[k]["measured"] for k in keys], keys,
             "Transport bytes per event (lower is better)", "bytes / event", "{:.1f} B",
             [t["stackmapd"].get("source") or "", f"{num(t['ftrace']['stack_part'])} B stack", ""])
        ax.text(0.98, 0.97, "bpftrace: aggregates in kernel,\nno per-event record",
                transform=ax.transAxes, ha="right", va="top", fontsize=9, color="#555")
    d = res.get("daemon")
    if d:
        ax = axes[1][0]
        labels = [f"{r['store_stacks'] // 1024} K stacks\n(--bits {r['bits']})" for r in d["rss"]]
        anon = [r["rss_anon_kb"] / 1024 for r in d["rss"]]
        mapped = [r["rss_file_kb"] / 1024 for r in d["rss"]]
        ax.bar(labels, anon, color="#2a7ab0", label="daemon heap (StackStore)")
        ax.bar(labels, mapped, bottom=anon, color="#9cc3e0", label="mmapped BPF maps (ring ×2, pool, slots)")
        for i, (x, y) in enumerate(zip(anon, mapped)):
            ax.annotate(f"{x + y:.0f} MB\n(heap {x:.1f})", (i, x + y), xytext=(0, 3),
                        textcoords="offset points", ha="center", fontsize=10)
        ax.set_yscale("log")
        ax.set_ylim(0.1, max(a + m for a, m in zip(anon, mapped)) * 6)
        ax.set_ylabel("RSS, MB (log)")
        ax.set_title("Daemon RSS by unique stacks", fontsize=11)
        ax.legend(fontsize=9, loc="upper left")
        ax.grid(axis="y", alpha=0.3)
        ax = axes[1][2]
        ax.axis("off")
        dr = d["drain"]
        lo = d["at_10k_events_per_s"]
        lines = [
            "Daemon (consumer on one core)",
            f"drain rate: {dr['ids_per_cpu_s']['median'] / 1e6:.0f} M ids/s "
            f"({dr['ids_per_cpu_s']['min'] / 1e6:.0f}–{dr['ids_per_cpu_s']['max'] / 1e6:.0f})",
            f"CPU per million ids (drain): {dr['cpu_s_per_million']['median'] * 1e3:.1f} ms",
        ]
        if tp:
            dl = tp["daemon_under_load"]
            lines.append(f"real session at {dl['events_per_s']['median'] / 1e6:.2f} M events/s: "
                         f"{dl['cpu_percent']['median']:.1f} % CPU")
        lines.append(f"at {lo['events_per_s'] / 1e3:.0f} k events/s: {lo['cpu_percent']:.2f} % CPU")
        lines.append(f"ring bytes / record: {dr['ring_bytes_per_record']['median']:.0f} B")
        lines.append(f"producer reserve+submit: {dr['producer_ns_per_record']['median']:.0f} ns/record")
        ax.text(0.02, 0.95, "\n".join(lines), va="top", fontsize=12, family="monospace",
                transform=ax.transAxes)
    px = res.get("pool_exhausted")
    if px:
        wins = ["filler", "alloc_loop"]
        grouped(axes[1][1], ["filler\n(new stacks keep coming)", "alloc_loop\n(pinned workload)"],
                [(lab, col, [px[w][k] for w in wins]) for k, lab, col in (
                    ("bits14", "--bits 14 (room)", "#9cc3e0"),
                    ("bits10_exhausted", "--bits 10 (pool full)", "#2a7ab0"))],
                "Cost per event with the element pool exhausted", "ns / event", "{:.0f}")
        share = px["bits10_pool_full_drop_share"]
        if share:
            axes[1][1].text(0.02, 0.97, f"--bits 10: {share['median'] * 100:.1f}% of events\n"
                            "dropped pool_full", transform=axes[1][1].transAxes, va="top",
                            fontsize=9, color="#333")
    if ns:
        keys = list(ns["balanced"])
        bars(axes[2][0], [k.replace("_get_stack", "").replace("/", " /\n") for k in keys],
             [ns["balanced"][k] for k in keys], [k.split("/")[0] for k in keys],
             "In-kernel ns/event ratios, order-balanced\n(geometric mean of an attach order and "
             "its reverse)", "ratio", "{:.3f}×",
             [f"own work {((ns['balanced'][k] or {}).get('median', 1) - 1) * 100:+.1f} %"
              if k == "stackmapd/bare_get_stack" else "" for k in keys])
        axes[2][0].axhline(1.0, color="#444", lw=1, ls="--")
    ring = res.get("ring")
    if ring:
        grouped(axes[2][1], [label.replace(" (", "\n(") for _, label, _ in RING_WORKLOADS],
                [(clabel.replace("`", ""), col, [ring["bytes_per_event"][c][w]
                                                 for w, _, _ in RING_WORKLOADS])
                 for (c, clabel, _), col in zip(RING_CONFIGS, ("#2a7ab0", "#9cc3e0", "#cccccc"))],
                "stackmapd ring bytes per event (lower is better)", "bytes / event", "{:.1f}")
    load = (d or {}).get("load")
    if load:
        sm = load["summary"]
        bars(axes[2][2], [n.replace(" ", "\n", 1) for n, _ in LOAD_CONFIGS],
             [sm[n]["daemon_cpu_percent_stat"] for n, _ in LOAD_CONFIGS], ["stackmapd"] * len(sm),
             f"Daemon CPU, CPUs {','.join(map(str, load['cpus']))} producing "
             "(/proc/PID/stat)", "% of one CPU", "{:.2f} %",
             [f"{num((sm[n]['events_per_s'] or {}).get('median'))} events/s\nVmHWM "
              f"{num((sm[n]['vm_hwm_kb'] or {}).get('median', 0) / 1024, 1)} MB"
              for n, _ in LOAD_CONFIGS])
    for ax in axes.flat:  # a section left out (--only) leaves no empty frame
        if not ax.has_data() and not ax.texts:
            ax.axis("off")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=90)


BEGIN, END = "<!-- results:begin (bench/run.py) -->", "<!-- results:end -->"


def update_benchmarks_md(md, a):
    """Replaces the results section of BENCHMARKS.md (only for the default output dir)."""
    path = os.path.join(ROOT, "BENCHMARKS.md")
    if os.path.abspath(a.out) != os.path.join(HERE, "results") or not os.path.exists(path):
        return
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        return
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + md + "\n" + END + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="fewer, shorter rounds (~4 min)")
    mode.add_argument("--smoke", action="store_true",
                      help="every section once, for seconds (CI): proves the suite runs, "
                           "judges no figure; fails only if a section crashes")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1, help="workload CPU")
    ap.add_argument("--out", default=None,
                    help="where latest.{json,md,png} go (default bench/results; with --smoke "
                         "a temporary directory)")
    ap.add_argument("--only", default=None,
                    help="comma-separated sections: ns,throughput,ring,daemon,pool,user,offcpu,progs,snapshot,unwind,compare "
                         "(default: all; compare only with --baseline-stackmapd)")
    ap.add_argument("--baseline-stackmapd", metavar="BINARY",
                    help="another stackmapd build to compare this one with (section compare), "
                         "e.g. /tmp/baseline/stackmapd")
    ap.add_argument("--baseline-bpf-obj", metavar="OBJ",
                    help="the baseline's BPF object (stackmapd.bpf.o): recorded by its sha256 and "
                         "checked to be the one embedded in --baseline-stackmapd")
    ap.add_argument("--current-args", default="", metavar="ARGS",
                    help="extra options for this build's daemon in section compare, e.g. "
                         "'--by pid,cgroup,source'")
    ap.add_argument("--baseline-args", default="", metavar="ARGS",
                    help="extra options for the baseline's daemon in section compare")
    ap.add_argument("--compare-rounds", type=int, default=None,
                    help="A B pairs in the compare section (default 8, quick 4, smoke 1)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: run as root (BPF, tracefs, perf, bpf_stats)")
    a.daemon_cpu = 0 if a.cpu != 0 else 1
    TRACER_CPU[0] = a.daemon_cpu
    a.ns_orders, a.rss_sizes = 6, ((1024, 10), (16384, 14), (262144, 18))
    if a.smoke:
        a.seconds, a.ns_rounds, a.tp_rounds, a.drain_rounds = 0.3, 1, 1, 2
        a.px_rounds, a.fill_seconds, a.low_rate_seconds = 1, 0.5, 0.5
        a.ns_orders, a.rss_sizes, cmp_rounds = 2, ((1024, 10), (16384, 14)), 1
        a.ring_rounds, a.load_rounds, a.load_seconds = 1, 1, 0.3
        STOP_TIMEOUT[0] = 10
    elif a.quick:
        a.seconds, a.ns_rounds, a.tp_rounds, a.drain_rounds = 1.0, 1, 3, 5
        a.px_rounds, a.fill_seconds, a.low_rate_seconds, cmp_rounds = 2, 2.0, 3.0, 4
        a.ring_rounds, a.load_rounds, a.load_seconds = 1, 1, 3.0
    else:
        a.seconds, a.ns_rounds, a.tp_rounds, a.drain_rounds = 2.0, 2, 6, 10
        a.px_rounds, a.fill_seconds, a.low_rate_seconds, cmp_rounds = 4, 3.0, 10.0, 8
        a.ring_rounds, a.load_rounds, a.load_seconds = 3, 2, 15.0
    if a.compare_rounds is None:
        a.compare_rounds = cmp_rounds
    if a.out is None:
        a.out = (tempfile.mkdtemp(prefix="stackmapd-bench-smoke-") if a.smoke
                 else os.path.join(HERE, "results"))
    if a.only is None:
        a.only = "ns,throughput,ring,daemon,pool,user,offcpu,progs,snapshot,unwind" + (",compare" if a.baseline_stackmapd else "")
    b = a.build_dir
    bins = {"stackmapd": f"{b}/stackmapd", "alloc_loop": f"{b}/bench/alloc_loop",
            "bare_stack": f"{b}/bench/bare_stack", "drain_bench": f"{b}/bench/drain_bench",
            "snapshot_bench": f"{b}/bench/snapshot_bench", "cfi_bench": f"{b}/bench/cfi_bench"}
    if a.baseline_stackmapd:
        bins["baseline_stackmapd"] = a.baseline_stackmapd
    for k, v in bins.items():
        if not os.access(v, os.X_OK):
            sys.exit(f"bench: {v} missing: build first (cmake -S . -B build && cmake --build build)")
    for tool in ("bpftool", "bpftrace", "perf", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} missing (bench/run.sh installs it: bpftrace linux-perf bpftool)")
    with open(WORKFILE, "w") as f:
        f.write("stackmapd bench\n")
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(stats_path) as f:
        stats_before = f.read().strip()
    with open(stats_path, "w") as f:
        f.write("1")
    try:
        git = sh(["git", "-C", ROOT, "describe", "--always", "--dirty"]).strip()
    except Exception:
        git = "unknown"
    cpu_model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    res = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "kernel": platform.release(),
                    "cpu_model": cpu_model, "nproc": os.cpu_count(), "git": git,
                    "quick": a.quick, "smoke": a.smoke, "workload_cpu": a.cpu, "seconds": a.seconds,
                    "command": "sudo bench/run.sh" + (" --quick" if a.quick else "") +
                               (" --smoke" if a.smoke else ""),
                    "bpftrace_program": BPFTRACE_PROG}}
    foreign = [{"pid": p, "prog_id": i, "tracepoint": tp} for p, i, tp in perf_attachments()]
    if foreign:
        log(f"warning: other BPF programs are attached to tracepoints (they slow every run "
            f"and run before ours): {foreign}")
    res["meta"]["foreign_attachments_at_start"] = foreign
    if a.baseline_stackmapd:
        res["meta"]["baseline"] = describe_baseline(a)
    t_start = time.time()
    sections = a.only.split(",")
    known = {"ns": ("in-kernel ns/event", "ns_per_event", bench_ns_per_event),
             "throughput": ("throughput and transport", "throughput", bench_throughput),
             "ring": ("ring bytes per event by configuration and workload", "ring", bench_ring),
             "daemon": ("daemon", "daemon", bench_daemon),
             "pool": ("pool exhausted", "pool_exhausted", bench_pool_exhausted),
             "offcpu": ("--offcpu next to plain counting", "offcpu", bench_offcpu),
             "user": ("--user-stacks (tables, frame pointers) next to kernel stacks only",
                      "user_stacks",
                      bench_user_stacks),
             "progs": ("BPF programs: xlated bytes and verified instructions", "bpf_programs",
                       bench_progs),
             "snapshot": ("one snapshot, stage by stage", "snapshot", bench_snapshot),
             "unwind": ("unwind tables: build time and size", "unwind", bench_unwind),
             "compare": ("this build against the baseline", "compare", bench_compare)}
    for s in sections:
        if s not in known:
            sys.exit(f"bench: unknown section {s!r} (sections: {', '.join(known)})")
    if "compare" in sections and not a.baseline_stackmapd:
        sys.exit("bench: section compare needs --baseline-stackmapd BINARY")
    crashed = {}
    res["meta"]["section_seconds"] = {}
    try:
        for key in [k for k in known if k in sections]:
            title, field, fn = known[key]
            log(f"section: {title}")
            t0 = time.time()
            try:
                res[field] = fn(a, bins)
            except Exception as e:  # a crash: reported, the other sections still run
                err = (getattr(e, "stderr", None) or "").strip()
                crashed[key] = f"{type(e).__name__}: {e}" + (f" ({err[-400:]})" if err else "")
                log(f"section {key} CRASHED: {crashed[key]}\n{traceback.format_exc()}")
            res["meta"]["section_seconds"][key] = round(time.time() - t0, 1)
            log(f"section {key}: {res['meta']['section_seconds'][key]} s")
    finally:
        with open(stats_path, "w") as f:
            f.write(stats_before)
    res["meta"]["elapsed_s"] = time.time() - t_start
    res["meta"]["crashed_sections"] = crashed
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = markdown(res)
    with open(os.path.join(a.out, "latest.md"), "w") as f:
        f.write(md + "\n")
    try:
        chart(res, os.path.join(a.out, "latest.png"))
    except ImportError:
        log("matplotlib missing: no chart (apt-get install python3-matplotlib)")
    except Exception as e:  # a figure the chart cannot draw is not a failure of the suite
        log(f"warning: no chart: {type(e).__name__}: {e}")
    if not a.smoke and not crashed:
        update_benchmarks_md(md, a)
    print(md)
    log(f"done in {res['meta']['elapsed_s']:.0f} s (per section: "
        + ", ".join(f"{k} {v} s" for k, v in res["meta"]["section_seconds"].items())
        + f"): {a.out}/latest.json, latest.png, latest.md"
        + (" [smoke: figures not judged]" if a.smoke else ""))
    if crashed:
        log("FAILED: sections that crashed: " + "; ".join(f"{k}: {v}" for k, v in crashed.items()))
        sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""User stacks against perf's DWARF unwinding, the same workload at the same time.

For each workload, `stackmapd --profile 99 --user-stacks --pid P` and
`perf record -F 99 --call-graph dwarf,65528 -p P` sample the same process for
the same seconds at once. Per tool: samples with user frames, the share whose
outermost frame is a thread's root (_start, __libc_start_call_main,
start_thread, clone3), garbage frames (a frame in no file: perf's [unknown]),
the median user depth; then, over stackmapd's samples whose leaf function perf
also saw, the share whose (leaf, caller) pair perf saw too. Figures, never a
pass or fail (issue 27's targets 1 and 2; BENCHMARKS.md).

    sudo bench/unwind_vs_perf.py --stackmapd build/stackmapd [--seconds 5] [--only NAME,...]

Workloads: Debian's own python3, gzip -6, xz -6, sqlite3, openssl speed, find,
a postgres backend (postgres --single, as the postgres user), and a -O2
-fomit-frame-pointer program calling back through glibc (qsort, bsearch,
pthread_create), compiled here with cc. A workload whose program is missing
is said and left out.
"""
import argparse
import collections
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOTS = {"_start", "__libc_start_call_main", "__libc_start_main", "start_thread", "clone3",
         "__clone3", "clone", "__clone"}

CALLBACK_C = r"""
#include <pthread.h>
#include <search.h>
#include <stdlib.h>
static volatile long sink;
static int cmp(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}
__attribute__((noinline)) static void sort_round(long *v, long n, unsigned *seed) {
  for (long i = 0; i < n; i++) v[i] = rand_r(seed);
  qsort(v, n, sizeof *v, cmp);
  for (long i = 0; i < n; i++) sink += bsearch(&v[i], v, n, sizeof *v, cmp) != 0;
}
static void *worker(void *arg) {
  unsigned seed = (unsigned)(long)arg;
  long *v = malloc(4096 * sizeof *v);
  for (;;) sort_round(v, 4096, &seed);
  return 0;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, worker, (void *)1);
  worker((void *)2);
}
"""

PY_LOOP = """
def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)
def work():
    while True:
        fib(22); sorted(str(i) for i in range(5000))
work()
"""

SQL_LOOP = """
create table t(a integer, b text);
with recursive c(x) as (select 1 union all select x + 1 from c where x < 200000)
insert into t select x % 1000, hex(randomblob(8)) from c;
"""


def workloads(tmp, only):
    data = os.path.join(tmp, "data.bin")
    with open(data, "wb") as f:
        f.write(os.urandom(1 << 20) * 2 + bytes(range(256)) * 8192)
    sql = os.path.join(tmp, "q.sql")
    with open(sql, "w") as f:
        f.write(SQL_LOOP + "select a, count(*), max(b) from t group by a order by 2;\n" * 2000)
    out = {
        "python3": ["/usr/bin/python3", "-c", PY_LOOP],
        # One long-lived compressor each, fed without end.
        "gzip": ["sh", "-c", f"while :; do cat {data}; done | gzip -6 > /dev/null"],
        "xz": ["sh", "-c", f"while :; do cat {data}; done | xz -6 > /dev/null"],
        "sqlite3": ["sh", "-c", f"exec sqlite3 :memory: < {sql}"],
        "openssl": ["openssl", "speed", "-seconds", "600", "rsa2048"],
        "find": ["sh", "-c", "exec find " + " ".join(["/usr"] * 50) + " > /dev/null 2>&1"],
    }
    cb = os.path.join(tmp, "callback_loop.bin")
    if subprocess.run(["cc", "-O2", "-g", "-fomit-frame-pointer", "-pthread", "-x", "c", "-",
                       "-o", cb], input=CALLBACK_C.encode()).returncode == 0:
        out["callback_loop"] = [cb]
    pg = sorted(p for p in os.popen("ls /usr/lib/postgresql/*/bin/postgres 2>/dev/null").read().split())
    if pg and shutil.which("runuser"):
        out["postgres"] = ("postgres", pg[-1])
    return {k: v for k, v in out.items() if not only or k in only}


def start_postgres(tmp, postgres):
    """A postgres --single backend running an aggregate loop, as the postgres user."""
    bindir = os.path.dirname(postgres)
    pgdata = os.path.join(tmp, "pg")
    os.makedirs(pgdata)
    shutil.chown(tmp, "postgres")
    os.chmod(tmp, 0o755)
    shutil.chown(pgdata, "postgres")
    subprocess.run(["runuser", "-u", "postgres", "--", f"{bindir}/initdb", "-D", pgdata],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # From a file: a pipe would fill, and block us, long before the backend
    # has read its queries.
    queries = os.path.join(tmp, "q.sql")
    with open(queries, "w") as f:
        f.write("select count(*), sum(x % 7) from generate_series(1, 3000000) x;\n" * 10000)
    with open(queries) as stdin:
        return subprocess.Popen(["runuser", "-u", "postgres", "--", postgres, "--single", "-D",
                                 pgdata, "postgres"], stdin=stdin, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)


def target_pid(proc):
    """The process doing the work: the command itself, or its busiest descendant."""
    time.sleep(1.0)
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,pcpu=,comm="], capture_output=True,
                         text=True).stdout
    rows = [r.split(None, 3) for r in out.splitlines()]
    tree, best = {proc.pid}, None
    for _ in range(4):
        for pid, ppid, _, _ in rows:
            if int(ppid) in tree:
                tree.add(int(pid))
    for pid, ppid, pcpu, comm in rows:
        if int(pid) in tree and (best is None or float(pcpu) > best[0]):
            best = (float(pcpu), int(pid), comm)
    return best[1] if best else proc.pid


def perf_samples(path):
    """Each sample's user frames (function names, innermost first) from perf script."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "ip,sym,dso", "--no-inline"],
                         capture_output=True, text=True, errors="replace").stdout
    samples, cur = [], []
    for line in out.splitlines() + [""]:
        line = line.strip()
        if not line:
            if cur:
                samples.append(cur)
            cur = []
            continue
        m = re.match(r"([0-9a-f]+) (.*) \((.*)\)$", line)
        if not m or "kernel.kallsyms" in m.group(3) or m.group(1).startswith("ffffffff"):
            continue
        sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(2))
        garbage = m.group(3) == "[unknown]"
        cur.append(None if garbage else Frame(sym if sym != "[unknown]" else "?", m.group(3)))
    return [(s, False) for s in samples]  # perf marks no truncation


def stackmapd_samples(path):
    """Each sample's user frames (function names, innermost first), with its truncated flag."""
    d = json.load(open(path))
    us = {s["user_stack_id"]: s for s in d.get("user_stacks", {}).get("stacks", [])}
    out = []
    for s in d["stacks"]:
        for e in s.get("by", []):
            u = us.get(e.get("user_stack_id"))
            if not u:
                continue
            frames = []
            for f in u["frames"]:
                if f.get("binary", -1) < 0 and not f.get("symbols"):
                    frames.append(None)
                else:
                    name = f["symbols"][-1].split("+")[0] if f.get("symbols") else "?"
                    frames.append(Frame(name, f.get("path", "")))
            out += [(frames, u.get("truncated", False))] * e["count"]
    return out


def at_root(frames):
    """The outermost frame is a thread's root, by its name without glibc's
    symbol version; a stripped program's _start has none, but it is the one
    caller of __libc_start_main."""
    names = [f.split("@")[0] if f else f for f in frames]
    return bool(names) and (names[-1] in ROOTS or
                            (len(names) >= 2 and names[-2] == "__libc_start_main"))


def figures(samples):
    with_frames = [(f, t) for f, t in samples if f]
    if not with_frames:
        return {"samples": 0}
    return {
        "samples": len(with_frames),
        "root_pct": 100.0 * sum(at_root(f) and not t for f, t in with_frames) / len(with_frames),
        "garbage_frames": sum(f.count(None) for f, _ in with_frames),
        "median_depth": statistics.median(len(f) for f, _ in with_frames),
    }


class Frame(str):
    """A frame's function name, with the file it is in."""

    def __new__(cls, name, path):
        f = super().__new__(cls, name)
        f.path = path
        return f


_addresses = {}


def symbol_addresses(path):
    """Function name -> address in the file at path, from its symbols and
    its debug file's (/usr/lib/debug/.build-id)."""
    if path in _addresses:
        return _addresses[path]
    files = [path]
    note = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]{2})([0-9a-f]+)", note)
    if m:
        files.append(f"/usr/lib/debug/.build-id/{m.group(1)}/{m.group(2)}.debug")
    out = {}
    for f in files:
        for flags in ([], ["-D"]):
            nm = subprocess.run(["nm", "--defined-only", *flags, f], capture_output=True,
                                text=True).stdout
            for line in nm.splitlines():
                w = line.split()
                if len(w) == 3 and w[1] in "TtWwi":
                    out.setdefault(w[2].split("@")[0], int(w[0], 16))
    _addresses[path] = out
    return out


def canonical(frame):
    """A function by its file and address: glibc names one function many ways
    (malloc and __libc_malloc, free and cfree, qsort_r and __GI___qsort_r), and
    the tools pick different names."""
    if not frame or not getattr(frame, "path", "") or not os.path.exists(frame.path):
        return frame
    addr = symbol_addresses(frame.path).get(frame.split("@")[0])
    return frame if addr is None else (os.path.realpath(frame.path), addr)


def pair_agreement(ours, perfs):
    """The share of ours whose leaf perfs name too with a caller of perfs'
    (a leaf neither names, "?", compares nothing)."""
    callers = collections.defaultdict(set)
    for f, _ in perfs:
        if len(f) >= 2 and f[0] and f[1] and f[0] != "?":
            callers[canonical(f[0])].add(canonical(f[1]))
    seen = agree = 0
    for f, _ in ours:
        if len(f) >= 2 and canonical(f[0]) in callers:
            seen += 1
            agree += canonical(f[1]) in callers[canonical(f[0])]
    return (100.0 * agree / seen if seen else None), seen


def run_one(name, cmd, args, tmp):
    wdir = os.path.join(tmp, name)
    os.makedirs(wdir)
    if isinstance(cmd, tuple):
        proc = start_postgres(wdir, cmd[1])
    else:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        pid = target_pid(proc)
        sm = subprocess.Popen([args.stackmapd, "--profile", "99", "--user-stacks", "--pid",
                               str(pid), "--duration", str(args.seconds + 1), "--output",
                               os.path.join(wdir, "sm")],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(wdir, "sm.err"), "w"))
        for _ in range(600):  # perf starts once stackmapd traces
            if "tracing" in open(os.path.join(wdir, "sm.err")).read():
                break
            time.sleep(0.05)
        perf_data = os.path.join(wdir, "perf.data")
        subprocess.run(["perf", "record", "-q", "-F", "99", "--call-graph", "dwarf,65528", "-p",
                        str(pid), "-o", perf_data, "--", "sleep", str(args.seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sm.wait()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    ours = stackmapd_samples(os.path.join(wdir, "sm", "stack_map.json"))
    perfs = perf_samples(perf_data)
    agree, seen = pair_agreement(ours, perfs)
    # The other way round: a caller one tool sampled and the other did not
    # (a leaf called from many places) lowers both; a wrong unwind, one.
    back, back_seen = pair_agreement(perfs, ours)
    return {"workload": name, "pid": pid, "stackmapd": figures(ours), "perf": figures(perfs),
            "pairs_agree_pct": agree, "pairs_compared": seen,
            "perf_pairs_agree_pct": back, "perf_pairs_compared": back_seen}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stackmapd", required=True)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stackmapd-unwind-vs-perf.")
    os.chmod(tmp, 0o755)  # postgres runs as its own user, under it
    results = []
    try:
        for name, cmd in workloads(tmp, set(filter(None, args.only.split(",")))).items():
            r = run_one(name, cmd, args, tmp)
            results.append(r)
            s, p = r["stackmapd"], r["perf"]
            agree = "-" if r["pairs_agree_pct"] is None else f"{r['pairs_agree_pct']:.1f}%"
            back = "-" if r["perf_pairs_agree_pct"] is None else f"{r['perf_pairs_agree_pct']:.1f}%"
            print(f"{name:14} stackmapd {s.get('samples', 0):5} samples {s.get('root_pct', 0):5.1f}% "
                  f"to a root, {s.get('garbage_frames', 0)} garbage, median {s.get('median_depth', 0)} | "
                  f"perf {p.get('samples', 0):5} {p.get('root_pct', 0):5.1f}% "
                  f"{p.get('garbage_frames', 0)} garbage, median {p.get('median_depth', 0)} | "
                  f"(leaf, caller) as perf's: {agree} of {r['pairs_compared']}; "
                  f"perf's as ours: {back} of {r['perf_pairs_compared']}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    sys.exit(main())

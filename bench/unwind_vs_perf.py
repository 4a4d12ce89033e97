#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""User stacks against perf's DWARF unwinding, the same workload at the same time.

For each workload, `stackmapd --profile 99 --user-stacks --pid P` and
`perf record -F 99 --call-graph dwarf,65528 -p P` sample the same process for
the same seconds at once. Per tool: samples with user frames, the share whose
outermost frame is a thread's root (_start, __libc_start_call_main,
start_thread, clone3), garbage frames (a frame in no file: perf's [unknown]),
the median user depth; then, over stackmapd's samples whose leaf function perf
also saw, the share whose (leaf, caller) pair perf saw too, and the other way
round. Functions compare by file and address where the file's symbols name
them, else by name without a C++ parameter list (perf's `middle` is
`middle(int)`). Figures, never a pass or fail (issue 27's targets 1 and 2,
issue 39's system-wide target; BENCHMARKS.md).

    sudo bench/unwind_vs_perf.py --stackmapd build/stackmapd [--seconds 5] [--only NAME,...]
    sudo bench/unwind_vs_perf.py --stackmapd build/stackmapd --system-wide [--seconds 10]

--system-wide: a background load on the host (a `make -j2` loop over 25 small
C++ files, every other one by clang++ if installed; loops of 1000 runs of a 5 ms
program; git log -p, and rg and gawk where installed), then
`stackmapd --profile 99 --user-stacks --by comm` and `perf record -a` over the
whole host for the same seconds, the same figures per comm (other work on the
host under those comms counts too), and stackmapd's user_unwind_* counters with
user_unwind_not_loaded's share of their sum.

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


def perf_samples(path, by_comm=False):
    """Each sample's user frames (function names, innermost first) from perf
    script; by_comm: a list per comm."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,ip,sym,dso", "--no-inline"],
                         capture_output=True, text=True, errors="replace").stdout
    samples, cur, comm = collections.defaultdict(list), [], ""
    for line in out.splitlines() + [""]:
        if line and not line[0].isspace():  # a sample's header: its comm
            comm = line.strip()
            continue
        line = line.strip()
        if not line:
            if cur:
                samples[comm].append((cur, False))  # perf marks no truncation
            cur = []
            continue
        m = re.match(r"([0-9a-f]+) (.*) \((.*)\)$", line)
        if not m or "kernel.kallsyms" in m.group(3) or m.group(1).startswith("ffffffff"):
            continue
        sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(2))
        garbage = m.group(3) == "[unknown]"
        cur.append(None if garbage else Frame(sym if sym != "[unknown]" else "?", m.group(3)))
    return samples if by_comm else [s for v in samples.values() for s in v]


def stackmapd_samples(path, by_comm=False):
    """Each sample's user frames (function names, innermost first), with its
    truncated flag; by_comm (a --by comm run): a list per comm."""
    d = json.load(open(path))
    us = {s["user_stack_id"]: s for s in d.get("user_stacks", {}).get("stacks", [])}
    out = collections.defaultdict(list)
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
                    name = re.sub(r"\+0x[0-9a-f]+$", "", f["symbols"][-1]) if f.get("symbols") else "?"
                    frames.append(Frame(name, f.get("path", "")))
            out[e.get("comm", "")] += [(frames, u.get("truncated", False))] * e["count"]
    return out if by_comm else [s for v in out.values() for s in v]


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


def bare_name(name):
    """A C++ name without its parameter list, qualifiers and clone suffixes:
    stackmapd and perf demangle differently (perf's `middle` is `middle(int)`)."""
    name = re.sub(r"( \[clone [^]]*\])+$", "", name)
    name = re.sub(r"(\s*(const|volatile|&&|&|noexcept))+$", "", name)
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                # "operator()" keeps its own parentheses
                return name[:i] if i > 0 and not name[:i].endswith("operator") else name
    return name


def canonical(frame):
    """A function by its file and address: glibc names one function many ways
    (malloc and __libc_malloc, free and cfree, qsort_r and __GI___qsort_r), and
    the tools pick different names; else by its name without parameters."""
    if not frame:
        return frame
    name = bare_name(frame.split("@")[0])
    if not getattr(frame, "path", "") or not os.path.exists(frame.path):
        return name
    addr = symbol_addresses(frame.path).get(name)
    return name if addr is None else (os.path.realpath(frame.path), addr)


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


SPIN_C = r"""
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
int main(void) {
  double end = now() + 0.005;
  while (now() < end) {
  }
}
"""

# A small C++ file: templates and the standard library, a second or so to compile.
CXX_FILE = """
#include <algorithm>
#include <map>
#include <string>
#include <vector>
template <int N> struct Fold {{
  static long f(const std::vector<long> &v) {{ return v[N % 7] + Fold<N - 1>::f(v); }}
}};
template <> struct Fold<0> {{
  static long f(const std::vector<long> &) {{ return 0; }}
}};
long unit{i}(int n) {{
  std::map<std::string, std::vector<long>> m;
  for (int k = 0; k < n; k++) m[std::to_string(k)].push_back(k * {i});
  std::vector<long> v(8, {i});
  std::sort(v.begin(), v.end());
  return Fold<{depth}>::f(v) + static_cast<long>(m.size());
}}
"""

SPIN_COMM = "spin5ms"


def system_load(tmp):
    """Background load on the host, one process group each: a make -j2 loop
    over 25 C++ files (g++, then clang++ if installed), 1000-run loops of a
    5 ms program, and rg, git log -p and gawk where installed. Returns the
    groups and the comms to report (rather more: the host's own compilers are
    counted too)."""
    src = os.path.join(tmp, "cxx")
    os.makedirs(src)
    for i in range(25):
        with open(os.path.join(src, f"u{i}.cpp"), "w") as f:
            f.write(CXX_FILE.format(i=i, depth=60 + i))
    # Every other file by clang++ when installed, so both compilers run all along.
    cxxs = [c for c in ("g++", "clang++") if shutil.which(c)]
    with open(os.path.join(src, "Makefile"), "w") as f:
        f.write("all: " + " ".join(f"u{i}.o" for i in range(25)) + "\n")
        for i in range(25):
            f.write(f"u{i}.o: u{i}.cpp\n\t{cxxs[i % len(cxxs)]} -O2 -c $< -o $@\n")
    loads = {"make": f"cd {src} && while :; do make -s -B -j2 >/dev/null 2>&1; done"}
    comms = ["make", "cc1plus"] + (["clang", "clang++"] if "clang++" in cxxs else [])
    spin = os.path.join(tmp, SPIN_COMM)
    if subprocess.run(["cc", "-O2", "-g", "-x", "c", "-", "-o", spin],
                      input=SPIN_C.encode()).returncode == 0:
        loads["spin"] = f"while :; do i=0; while [ $i -lt 1000 ]; do {spin}; i=$((i+1)); done; done"
        comms.append(SPIN_COMM)
    if shutil.which("rg"):
        loads["rg"] = "while :; do rg -c 'static|struct' /usr/include >/dev/null 2>&1; done"
        comms.append("rg")
    repo = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse",
                           "--show-toplevel"], capture_output=True, text=True).stdout.strip()
    if repo:
        loads["git"] = f"while :; do git -C {repo} log -p -n 400 >/dev/null 2>&1; done"
        comms.append("git")
    if shutil.which("gawk"):
        loads["gawk"] = ("while :; do seq 1 300000 | gawk '{s[$1 % 1000] += length($1)} "
                         "END {for (k in s) n += s[k]; print n}' >/dev/null; done")
        comms.append("gawk")
    procs = [subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
             for cmd in loads.values()]
    return procs, comms


def unwind_counters(path):
    """stack_map_stat's user_unwind_* counters."""
    out = {}
    for line in open(path):
        k, _, v = line.partition(":")
        if k.startswith("user_unwind_") and v.strip().isdigit():
            out[k] = int(v)
    return out


def run_system_wide(args, tmp):
    """Both tools over the whole host for the same seconds, figures per comm."""
    procs, comms = system_load(tmp)
    try:
        time.sleep(2.0)  # the loops under way
        err = os.path.join(tmp, "sm.err")
        sm = subprocess.Popen([args.stackmapd, "--profile", "99", "--user-stacks", "--by", "comm",
                               "--duration", str(args.seconds + 1), "--output",
                               os.path.join(tmp, "sm")],
                              stdout=subprocess.DEVNULL, stderr=open(err, "w"))
        for _ in range(600):
            if "tracing" in open(err).read():
                break
            time.sleep(0.05)
        perf_data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-q", "-a", "-F", "99", "--call-graph", "dwarf,65528",
                        "-o", perf_data, "--", "sleep", str(args.seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sm.wait()
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    ours = stackmapd_samples(os.path.join(tmp, "sm", "stack_map.json"), by_comm=True)
    perfs = perf_samples(perf_data, by_comm=True)
    results = []
    for comm in (c for c in comms if ours.get(c) or perfs.get(c)):
        agree, seen = pair_agreement(ours.get(comm, []), perfs.get(comm, []))
        back, back_seen = pair_agreement(perfs.get(comm, []), ours.get(comm, []))
        results.append({"workload": comm, "stackmapd": figures(ours.get(comm, [])),
                        "perf": figures(perfs.get(comm, [])), "pairs_agree_pct": agree,
                        "pairs_compared": seen, "perf_pairs_agree_pct": back,
                        "perf_pairs_compared": back_seen})
    counters = unwind_counters(os.path.join(tmp, "sm", "stack_map_stat"))
    return results, counters


def print_result(r):
    s, p = r["stackmapd"], r["perf"]
    agree = "-" if r["pairs_agree_pct"] is None else f"{r['pairs_agree_pct']:.1f}%"
    back = "-" if r["perf_pairs_agree_pct"] is None else f"{r['perf_pairs_agree_pct']:.1f}%"
    print(f"{r['workload']:14} stackmapd {s.get('samples', 0):5} samples {s.get('root_pct', 0):5.1f}% "
          f"to a root, {s.get('garbage_frames', 0)} garbage, median {s.get('median_depth', 0)} | "
          f"perf {p.get('samples', 0):5} {p.get('root_pct', 0):5.1f}% "
          f"{p.get('garbage_frames', 0)} garbage, median {p.get('median_depth', 0)} | "
          f"(leaf, caller) as perf's: {agree} of {r['pairs_compared']}; "
          f"perf's as ours: {back} of {r['perf_pairs_compared']}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stackmapd", required=True)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--system-wide", action="store_true",
                    help="the whole host under a build and process churn, figures per comm")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stackmapd-unwind-vs-perf.")
    os.chmod(tmp, 0o755)  # postgres runs as its own user, under it
    results = []
    try:
        if args.system_wide:
            results, counters = run_system_wide(args, tmp)
            for r in results:
                print_result(r)
            total = sum(counters.values())
            nl = counters.get("user_unwind_not_loaded", 0)
            print(f"user_unwind_not_loaded: {nl} of {total} user samples "
                  f"({100.0 * nl / total if total else 0:.1f}%); "
                  + ", ".join(f"{k[len('user_unwind_'):]} {v}" for k, v in counters.items()))
            results.append({"user_unwind": counters})
        else:
            for name, cmd in workloads(tmp, set(filter(None, args.only.split(",")))).items():
                results.append(run_one(name, cmd, args, tmp))
                print_result(results[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    sys.exit(main())

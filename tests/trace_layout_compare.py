#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares a stackmapd --trace file with a tracefs `trace` file of the same
events, line by line: the same comm-pid, cpu, event name and field text,
timestamps (the same clock) within a tolerance; stackmapd's flags column is
"....." and its <stack_id N> entry stands where ftrace's <stack trace> does.

    trace_layout_compare.py OURS FTRACE PID [TOLERANCE_US]

Only entries of PID are compared (ftrace's ` => frame` lines dropped). Prints
one line per difference (the first 10) and exits 1 on any.
"""
import re
import sys

LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+\[(?P<cpu>\d{3})\] (?P<flags>\S{5})"
                  r"\s+(?P<secs>\d+)\.(?P<usecs>\d{6}): (?P<body>.*)$")


def entries(path, pid):
    out = []
    with open(path) as f:
        for n, text in enumerate(f, 1):
            text = text.rstrip("\n")
            if text.startswith("#") or text.startswith(" => ") or not text:
                continue
            m = LINE.match(text)
            if not m:
                out.append((n, None, text))
            elif m["pid"] == pid:
                out.append((n, m, text))
    return out


def main():
    ours_path, ftrace_path, pid = sys.argv[1:4]
    tolerance_us = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    ours, ref = entries(ours_path, pid), entries(ftrace_path, pid)
    problems = [] if ours else [f"no entries of pid {pid} in {ours_path}"]
    if len(ours) != len(ref):
        problems.append(f"{len(ours)} entries of pid {pid} in {ours_path}, {len(ref)} in {ftrace_path}")
    for (on, o, otext), (fn, f, ftext) in zip(ours, ref):
        where = f"{ours_path}:{on} vs {ftrace_path}:{fn}"
        if o is None or f is None:
            problems.append(f"{where}: not in ftrace's layout: {otext if o is None else ftext!r}")
            continue
        ts = lambda m: int(m["secs"]) * 1000000 + int(m["usecs"])
        body_ok = o["body"] == f["body"] or (
            re.fullmatch(r"<stack_id \d+>", o["body"]) and f["body"] == "<stack trace>")
        if (o["comm"].strip(), o["cpu"]) != (f["comm"].strip(), f["cpu"]) or not body_ok:
            problems.append(f"{where}: differ:\n  ours:   {otext}\n  ftrace: {ftext}")
        elif o["flags"] != ".....":
            problems.append(f"{where}: flags {o['flags']!r}, expected '.....'")
        elif abs(ts(o) - ts(f)) > tolerance_us:
            problems.append(f"{where}: timestamps {ts(o)} us and {ts(f)} us are over {tolerance_us} us apart")
    for p in problems[:10]:
        print(p)
    if problems:
        print(f"{len(problems)} differences")
        return 1
    print(f"{len(ours)} entries of pid {pid} read alike")
    return 0


if __name__ == "__main__":
    sys.exit(main())

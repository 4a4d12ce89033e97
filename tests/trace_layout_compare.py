#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares a stackmapd --trace file with a tracefs `trace` file of the same
events, line by line: the same comm-pid, cpu, event name and field text,
timestamps (the same clock) within a tolerance; stackmapd's flags column is
"....." and its <stack_id N> entry stands where ftrace's <stack trace> does.
With STACK_MAP (stackmapd's stack_map export of the session), each N resolves
to the frames ftrace listed under its <stack trace>, from the first frame of
ours on (ftrace's list starts in its own probe).

    trace_layout_compare.py OURS FTRACE PID [STACK_MAP]

Only entries of PID are compared. Prints one line per difference (the first
10) and exits 1 on any.
"""
import re
import sys

LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+\[(?P<cpu>\d{3})\] (?P<flags>\S{5})"
                  r"\s+(?P<secs>\d+)\.(?P<usecs>\d{6}): (?P<body>.*)$")


TOLERANCE_US = 2000


def entries(path, pid):
    """(line number, match or None, text, frames under it) per entry of pid."""
    out = []
    keep = False
    with open(path) as f:
        for n, text in enumerate(f, 1):
            text = text.rstrip("\n")
            if text.startswith(" => "):
                if keep:
                    out[-1][3].append(text[4:])
                continue
            if text.startswith("#") or not text:
                continue
            m = LINE.match(text)
            keep = m is None or m["pid"] == pid
            if keep:
                out.append((n, m, text, []))
    return out


def stack_map(path):
    """stack_id -> frame names, from the RFC's stack_map text."""
    stacks, frames = {}, None
    with open(path) as f:
        for line in f:
            head = re.match(r"^stack_id (\d+) ", line)
            frame = re.match(r"^\s+\[\d+\] ([^+\s]+)", line)
            if head:
                frames = stacks.setdefault(int(head[1]), [])
            elif frame and frames is not None:
                frames.append(frame[1])
    return stacks


def stack_problem(stack_id, ours, theirs):
    if not ours:
        return f"<stack_id {stack_id}> is not in stack_map"
    if ours[0] not in theirs:
        return f"<stack_id {stack_id}> starts in {ours[0]}, not among ftrace's frames {theirs}"
    tail = theirs[theirs.index(ours[0]):]
    if tail[:len(ours)] != ours[:len(tail)]:
        return f"<stack_id {stack_id}> is {ours}, ftrace's stack {tail}"
    return None


def main():
    ours_path, ftrace_path, pid = sys.argv[1:4]
    stacks = stack_map(sys.argv[4]) if len(sys.argv) > 4 else None
    ours, ref = entries(ours_path, pid), entries(ftrace_path, pid)
    problems = [] if ours else [f"no entries of pid {pid} in {ours_path}"]
    if len(ours) != len(ref):
        problems.append(f"{len(ours)} entries of pid {pid} in {ours_path}, {len(ref)} in {ftrace_path}")
    for (on, o, otext, _), (fn, f, ftext, frames) in zip(ours, ref):
        where = f"{ours_path}:{on} vs {ftrace_path}:{fn}"
        if o is None or f is None:
            problems.append(f"{where}: not in ftrace's layout: {otext if o is None else ftext!r}")
            continue
        ts = lambda m: int(m["secs"]) * 1000000 + int(m["usecs"])
        sid = re.fullmatch(r"<stack_id (\d+)>", o["body"])
        body_ok = o["body"] == f["body"] or (sid and f["body"] == "<stack trace>")
        if (o["comm"].strip(), o["cpu"]) != (f["comm"].strip(), f["cpu"]) or not body_ok:
            problems.append(f"{where}: differ:\n  ours:   {otext}\n  ftrace: {ftext}")
        elif o["flags"] != ".....":
            problems.append(f"{where}: flags {o['flags']!r}, expected '.....'")
        elif abs(ts(o) - ts(f)) > TOLERANCE_US:
            problems.append(f"{where}: timestamps {ts(o)} us and {ts(f)} us are over {TOLERANCE_US} us apart")
        elif sid and stacks is not None:
            p = stack_problem(int(sid[1]), stacks.get(int(sid[1]), []), frames)
            if p:
                problems.append(f"{where}: {p}")
    for p in problems[:10]:
        print(p)
    if problems:
        print(f"{len(problems)} differences")
        return 1
    print(f"{len(ours)} entries of pid {pid} read alike" + (", stacks too" if stacks else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Fails on an include that runs up the daemon's layers.

daemon/ is one folder per stage. The stages form a partial order, not a
tower: BELOW names the folders each one stands on directly, and a folder
includes only itself and what lies below it through BELOW (cmd/ sits on top
of all). The two backends, bpf/ and tracefs/, are siblings on the stage that
says what to trace (source/); export/ stands on neither backend.
Each violation prints as FILE:LINE with the rule it breaks.
Usage: check_layers.py [PROJECT_ROOT]
"""
import pathlib
import re
import sys

BELOW = {
    "sys": [],
    "model": ["sys"],
    "symbols": ["model"],
    "unwind": ["symbols"],
    "resolve": ["unwind"],
    "source": ["symbols"],
    "bpf": ["resolve", "source"],
    "tracefs": ["source"],
    "export": ["source"],
    "http": ["export"],
    "run": ["bpf", "tracefs", "http"],
}


def reach(folder, seen=None):
    """Every folder `folder` stands on, directly or not."""
    seen = set() if seen is None else seen
    for f in BELOW[folder]:
        if f not in seen:
            seen.add(f)
            reach(f, seen)
    return seen


LAYERS = list(BELOW)

INCLUDE = re.compile(r'^\s*#\s*include\s+"daemon/([^/"]+)/[^"]*"')


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    order = "; ".join(f"{f} on {', '.join(b)}" if b else f for f, b in BELOW.items())
    problems = []
    for path in sorted((root / "daemon").rglob("*")):
        if path.suffix not in (".h", ".cpp") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        folder = path.relative_to(root / "daemon").parts[0]
        if folder not in LAYERS:
            problems.append(f"{rel}:1: folder daemon/{folder}/ has no layer: add it to BELOW "
                            f"in scripts/check_layers.py ({order})")
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            included = line.split('"')[1]
            if target not in LAYERS:
                problems.append(f"{rel}:{n}: includes {included} of daemon/{target}/, "
                                f"a folder with no layer ({order})")
            elif target != folder and target not in reach(folder):
                problems.append(f"{rel}:{n}: {folder} includes {included}, but {target} is not "
                                f"below {folder}: a folder includes only folders below it ({order})")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) against the layers", file=sys.stderr)
        return 1
    print(f"daemon/ layers hold: {order}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

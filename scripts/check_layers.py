#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Fails on an include that runs up the daemon's layers.

daemon/ is one folder per stage, bottom-up as LAYERS lists them: a folder
includes only itself and the folders below it (cmd/ sits on top of all).
Each violation prints as FILE:LINE with the rule it breaks.
Usage: check_layers.py [PROJECT_ROOT]
"""
import pathlib
import re
import sys

LAYERS = ["sys", "model", "symbols", "unwind", "resolve", "bpf", "tracefs", "export", "http", "run"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"daemon/([^/"]+)/[^"]*"')


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    order = " < ".join(LAYERS)
    problems = []
    for path in sorted((root / "daemon").rglob("*")):
        if path.suffix not in (".h", ".cpp") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        folder = path.relative_to(root / "daemon").parts[0]
        if folder not in LAYERS:
            problems.append(f"{rel}:1: folder daemon/{folder}/ has no layer: add it to LAYERS "
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
            elif LAYERS.index(target) > LAYERS.index(folder):
                problems.append(f"{rel}:{n}: {folder} includes {included}, but {target} is above "
                                f"{folder}: a folder includes only folders below it ({order})")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) against the layers", file=sys.stderr)
        return 1
    print(f"daemon/ layers hold: {order}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: GPL-2.0
# hist_test.sh's arithmetic: log2 buckets (bpftrace's, stackmapd/hist.h's)
# computed here from --trace lines, against the exports' "bucket" keys.
#   hist_compare.py trace TRACE JSON FIELD   the JSON's buckets equal the trace's, per stack
#   hist_compare.py same JSON_A JSON_B       equal per symbolized stack (two sessions)
#   hist_compare.py sums JSON                each bucket's sum lies in it; buckets add up
# Prints one line per problem (at most 10) and "ok N" otherwise.
import json
import re
import sys
from collections import Counter, defaultdict


def lower(v):  # the lowest value of v's bucket: 0, 1, 2, 4, 8, ...
    return 0 if v == 0 else 1 << (v.bit_length() - 1)


def from_json(path, by_symbols=False):
    hist = defaultdict(Counter)
    for s in json.load(open(path))["stacks"]:
        key = tuple(s.get("symbols", [])) if by_symbols else s["stack_id"]
        for e in s.get("by", []):
            hist[key][e["bucket"]] += e["count"]
    return hist


def from_trace(path, field):
    hist, value = defaultdict(Counter), None
    pat = re.compile(r"\b" + re.escape(field) + r"=(\d+)")
    for line in open(path):
        m = re.search(r"<stack_id (\d+)>", line)
        if m and value is not None:
            hist[int(m.group(1))][lower(value)] += 1
            value = None
            continue
        m = pat.search(line)
        if m:
            value = int(m.group(1))
    return hist


def compare(a, b):
    problems = [f"stack {k}: {dict(a.get(k, {}))} != {dict(b.get(k, {}))}"
                for k in sorted(set(a) | set(b), key=str) if a.get(k) != b.get(k)]
    return problems, sum(sum(c.values()) for c in a.values())


def sums(path):
    problems, n = [], 0
    for s in json.load(open(path))["stacks"]:
        if sum(e["count"] for e in s["by"]) != s["ref_count"]:
            problems.append(f"stack {s['stack_id']}: buckets add up to another count")
        for e in s["by"]:
            lo, n = e["bucket"], n + e["count"]
            hi = 2 if lo == 0 else 2 * lo  # [0] holds 0 only, so its sum is 0
            if not (e["count"] * lo <= e["sum"] < e["count"] * hi) and not (lo == 0 and e["sum"] == 0):
                problems.append(f"stack {s['stack_id']}: sum {e['sum']} of {e['count']} not in bucket {lo}")
    return problems, n


mode = sys.argv[1]
if mode == "trace":
    problems, n = compare(from_json(sys.argv[3]), from_trace(sys.argv[2], sys.argv[4]))
elif mode == "same":
    problems, n = compare(from_json(sys.argv[2], True), from_json(sys.argv[3], True))
else:
    problems, n = sums(sys.argv[2])
for p in problems[:10]:
    print(p)
if not problems:
    print("ok", n)

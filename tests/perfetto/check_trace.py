#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
# The invariants of a `stackmapd --perfetto` trace that protoc --decode does
# not check, read from the wire format itself:
#   - every callstack iid (and frame, function name, mapping) is interned on
#     the sequence before a packet uses it, and each only once;
#   - callstack frame ids are written unpacked (Perfetto's decoder needs it);
#   - frames run root first: each callstack, reversed, is a stack of the
#     session's stack_map.json (rel_pc + the mapping's start = its ips);
#   - --user-stacks: user frames come before the kernel's, each callstack's
#     are a user stack of the JSON (binary path, rel_pc = its ELF address,
#     a return address less one, one frame per inlined function), a user
#     binary's mapping has an empty range; cpu_mode is kernel (1) with
#     kernel frames, else user (2);
#   - every PerfSample's thread is named by a ProcessTree packet before it;
#   - timestamps are BOOTTIME (clock id 6) within [BOOT_START, BOOT_END].
# Prints "samples N" (one PerfSample per event: the caller compares the hits),
# and for user frames "umapping PATH BUILD_ID", "uframe PATH REL_PC FUNCTION"
# (for addr2line) and "ucallstack NAMES" per callstack, root first, runs of
# kernel frames as K.
#   check_trace.py TRACE STACK_MAP_JSON BOOT_START_NS BOOT_END_NS
import json
import sys


def varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7


def fields(buf):
    """(number, wire_type, value) in order; value is an int or bytes."""
    pos, out = 0, []
    while pos < len(buf):
        tag, pos = varint(buf, pos)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, pos = varint(buf, pos)
        elif wt == 2:
            n, pos = varint(buf, pos)
            v = buf[pos:pos + n]
            pos += n
            if len(v) != n:
                raise ValueError("truncated field %d" % num)
        else:
            raise ValueError("unexpected wire type %d in field %d" % (wt, num))
        out.append((num, wt, v))
    return out


def get(msg, num, default=None):
    vals = [v for n, _, v in msg if n == num]
    return vals[-1] if vals else default


def main():
    trace, stack_json, boot_start, boot_end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    doc = json.load(open(stack_json))
    stacks = {tuple(int(ip, 16) for ip in s["ips"]) for s in doc["stacks"]}
    # Each JSON user stack as Perfetto frames root first: (path, rel_pc).
    user_stacks = set()
    for us in doc.get("user_stacks", {}).get("stacks", []):
        n = len(us["frames"])
        want = []
        for i in reversed(range(n)):
            f = us["frames"][i]
            if "path" in f:
                pc = int(f.get("elf_addr", f["file_offset"]), 16)
            else:
                pc = int(f["address"], 16)
            if i > 0 and pc:
                pc -= 1
            want += [(f.get("path", "[unknown]"), pc)] * max(1, len(f["symbols"]))
        user_stacks.add(tuple(want))
    errors = []
    callstacks, frames, names, mappings, threads = {}, {}, {}, {}, set()
    paths, build_ids, user_frames, user_mappings = {}, {}, set(), set()
    modes, frame_msgs, callstack_names = {}, {}, []
    samples = stacks_checked = 0
    data = open(trace, "rb").read()
    for i, (num, wt, pkt) in enumerate(fields(data)):
        if num != 1 or wt != 2:
            errors.append("top-level field %d is not a Trace.packet" % num)
            continue
        p = fields(pkt)
        if get(p, 10) != 1:
            errors.append("packet %d: trusted_packet_sequence_id %s, not 1" % (i, get(p, 10)))
        if i == 0 and get(p, 13) != 1:
            errors.append("the first packet does not clear the incremental state (flags %s)" % get(p, 13))
        interned = get(p, 12)
        if interned is not None:
            d = fields(interned)
            for n, _, v in d:
                m = fields(v)
                iid = get(m, 1)
                if n == 5:
                    if iid in names:
                        errors.append("function name %d interned twice" % iid)
                    names[iid] = get(m, 2).decode()
                elif n == 17:
                    paths[iid] = get(m, 2).decode()
                elif n == 16:
                    build_ids[iid] = get(m, 2).hex()
                elif n == 19:
                    path = paths.get(get(m, 7))
                    if path is None:
                        errors.append("mapping %d: path %s not interned before it" % (iid, get(m, 7)))
                    kernel = path == "[kernel.kallsyms]"
                    if not kernel:
                        if get(m, 4, 0) != get(m, 5, 0):
                            errors.append("user mapping %d (%s) has a range: Perfetto would "
                                          "bind it to one process" % (iid, path))
                        user_mappings.add((path, build_ids.get(get(m, 2), "-")))
                    mappings[iid] = (get(m, 4, 0), kernel, path)
                elif n == 6:
                    if iid in frames:
                        errors.append("frame %d interned twice" % iid)
                    frame_msgs[iid] = m
                    fn, mp = get(m, 2), get(m, 3)
                    if fn is not None and fn not in names:
                        errors.append("frame %d names function %d before it is interned" % (iid, fn))
                    if mp not in mappings:
                        errors.append("frame %d uses mapping %s before it is interned" % (iid, mp))
                    start, kernel, path = mappings.get(mp, (0, True, "?"))
                    if kernel:
                        frames[iid] = (True, get(m, 4, 0) + start)
                    else:
                        frames[iid] = (False, (path, get(m, 4, 0)))
                        if fn is not None:
                            user_frames.add((path, get(m, 4, 0), names.get(fn, "?")))
                elif n == 7:
                    if iid in callstacks:
                        errors.append("callstack %d interned twice" % iid)
                    ids = []
                    for fnum, fwt, fv in m:
                        if fnum != 2:
                            continue
                        if fwt != 0:
                            errors.append("callstack %d: frame_ids packed, Perfetto wants them unpacked" % iid)
                            continue
                        if fv not in frames:
                            errors.append("callstack %d uses frame %d before it is interned" % (iid, fv))
                        ids.append(fv)
                    callstacks[iid] = ids
                    kinds = [frames.get(f, (True, 0)) for f in ids]
                    user = [v for k, v in kinds if not k]
                    ips = tuple(v for k, v in reversed(kinds) if k)
                    if kinds != [(False, u) for u in user] + [(True, ip) for ip in reversed(ips)]:
                        errors.append("callstack %d: a user frame after a kernel frame (not root "
                                      "first?)" % iid)
                    if ips and ips not in stacks:
                        errors.append("callstack %d, reversed, is no stack of %s (not root first?)"
                                      % (iid, stack_json))
                    if user and tuple(user) not in user_stacks:
                        errors.append("callstack %d: its user frames %s are no user stack of %s"
                                      % (iid, user[:3], stack_json))
                    modes[iid] = 1 if ips else 2
                    shown = []
                    for f in ids:
                        k, v = frames.get(f, (True, 0))
                        fn = get(frame_msgs.get(f, []), 2)
                        name = "K" if k else names.get(fn, "?") if fn else "?"
                        if name != "K" or not shown or shown[-1] != "K":
                            shown.append(name)
                    callstack_names.append(" ".join(shown))
                    stacks_checked += 1
        tree = get(p, 2)
        if tree is not None:
            for n, _, v in fields(tree):
                if n == 2:
                    threads.add(get(fields(v), 1))
        sample = get(p, 66)
        if sample is not None:
            s = fields(sample)
            samples += 1
            cs = get(s, 4)
            if cs not in callstacks:
                errors.append("packet %d: callstack %s used before it is interned" % (i, cs))
            if get(s, 3) not in threads:
                errors.append("packet %d: thread %s not named before its sample" % (i, get(s, 3)))
            if get(s, 5) != modes.get(cs, 1):
                errors.append("packet %d: cpu_mode %s, not %d" % (i, get(s, 5), modes.get(cs, 1)))
            if get(p, 58) != 6:
                errors.append("packet %d: clock %s, not BOOTTIME (6)" % (i, get(p, 58)))
            ts = get(p, 8, 0)
            if not boot_start <= ts <= boot_end:
                errors.append("packet %d: timestamp %d outside the session's BOOTTIME [%d, %d]"
                              % (i, ts, boot_start, boot_end))
            if get(p, 13) != 2:
                errors.append("packet %d: sample without SEQ_NEEDS_INCREMENTAL_STATE" % i)
    for e in errors[:20]:
        print("error: " + e)
    print("samples %d" % samples)
    print("callstacks %d (each one a stack of the JSON: %d)" % (len(callstacks), stacks_checked))
    print("threads %d" % len(threads))
    for path, build_id in sorted(user_mappings):
        print("umapping %s %s" % (path, build_id))
    for path, pc, fn in sorted(user_frames):
        print("uframe %s 0x%x %s" % (path, pc, fn))
    if user_mappings:
        for names_root_first in callstack_names:
            print("ucallstack " + names_root_first)
    sys.exit(1 if errors else 0)


main()

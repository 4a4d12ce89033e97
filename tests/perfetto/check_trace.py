#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
# The invariants of a `stackmapd --perfetto` trace that protoc --decode does
# not check, read from the wire format itself (Perfetto's field numbers,
# tests/perfetto/stackmapd_trace.proto names them):
#   - each source of the session (the JSON's "sources") samples on a
#     trusted_packet_sequence_id of its own (trace processor makes a perf
#     session of each): its first packet clears the incremental state and
#     holds the defaults, BOOTTIME and the timebase that names the source
#     (-e CAT:NAME: tracepoint CAT:NAME, period 1; --profile HZ: cpu-clock
#     at HZ; -f FN: named FN, period 1; --offcpu: named offcpu); ProcessTree
#     packets are on a sequence without samples;
#   - every sample has timebase_count, running per (sequence, cpu): by 1 an
#     event for period 1, by 1e9/HZ for cpu-clock, never down; with --sum a
#     follower count per sample, whose totals add up to the JSON's sum;
#   - the kernel's mapping is traced_perf's, which trace processor takes for
#     the kernel: one path component "kernel", start, end, exact_offset and
#     build id 0; its frames' rel_pc are their addresses;
#   - every callstack iid (and frame, function name, mapping) is interned on
#     its sequence before a packet of it uses it, and each only once;
#   - callstack frame ids are written unpacked (Perfetto's decoder needs it);
#   - frames run root first: each callstack, reversed, is a stack of the
#     session's stack_map.json (rel_pc + the mapping's start = its ips); with
#     `--by source` a stack the JSON counts for the sequence's source, and
#     each sequence has as many samples as the JSON counts for its source;
#   - --user-stacks: user frames come before the kernel's, each callstack's
#     are a user stack of the JSON (binary path, rel_pc = its ELF address,
#     a return address less one, one frame per inlined function), a user
#     binary's mapping has an empty range; cpu_mode is kernel (1) with
#     kernel frames, else user (2);
#   - every PerfSample's thread is named by a ProcessTree packet before it,
#     in the sample's process: Thread.tgid (3) is its pid;
#   - timestamps are BOOTTIME (clock id 6) within [BOOT_START, BOOT_END].
# Prints "samples N" (one PerfSample per event: the caller compares the hits),
# "session SEQUENCE SOURCE TIMEBASE samples N" per source sequence, and for
# user frames "umapping PATH BUILD_ID", "uframe PATH REL_PC FUNCTION"
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


def describe_timebase(t):
    """(source name it stands for, text) of a PerfEvents.Timebase, or None."""
    tracepoint, name = get(t, 3), get(t, 10)
    period, freq, counter = get(t, 1), get(t, 2), get(t, 4)
    if tracepoint is not None:
        tp = get(fields(tracepoint), 1, b"").decode()
        return tp, "tracepoint %s period %s" % (tp, period)
    if counter == 1:
        return "profile", "cpu-clock frequency %s" % freq
    if name is not None:
        name = name.decode()
        return name, "named %s period %s" % (name, period)
    return None, "no event, no name"


def expected_timebase(source, t):
    """What is wrong with timebase t (its fields) for the source, or None."""
    if ":" in source:
        ok = get(t, 1) == 1 and get(t, 3) is not None and get(t, 10) is None
    elif source == "profile":
        ok = get(t, 4) == 1 and (get(t, 2) or 0) > 0 and get(t, 10) is None
    elif source == "offcpu":
        ok = get(t, 10) == b"offcpu" and get(t, 3) is None and get(t, 4) is None
    else:
        ok = get(t, 10) == source.encode() and get(t, 1) == 1
    return None if ok else "timebase %s does not describe source %s" % (
        describe_timebase(t)[1], source)


def main():
    trace, stack_json, boot_start, boot_end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    doc = json.load(open(stack_json))
    stacks = {tuple(int(ip, 16) for ip in s["ips"]) for s in doc["stacks"]}
    sources = doc.get("sources", [])
    # --by source: the events the JSON counts per source, and its stacks of each.
    by_source, stacks_of, sum_of = {}, {}, {}
    for st in doc["stacks"]:
        for k in st.get("by", []):
            if "source" in k:
                by_source[k["source"]] = by_source.get(k["source"], 0) + k["count"]
                if "sum" in k:
                    sum_of[k["source"]] = sum_of.get(k["source"], 0) + k["sum"]
                stacks_of.setdefault(k["source"], set()).add(tuple(int(ip, 16) for ip in st["ips"]))
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
    # Samples taken in user mode without their user stack (the JSON's stack
    # 4294967293, no --user-stacks) are one frame in the "[unknown]" mapping.
    if any(s["stack_id"] == 4294967293 for s in doc["stacks"]):
        user_stacks.add((("[unknown]", 0),))
    errors = []
    # Interned data, by sequence.
    callstacks, frames, names, mappings, paths, build_ids = {}, {}, {}, {}, {}, {}
    threads = {}  # tid -> tgid
    user_frames, user_mappings = set(), set()
    modes, frame_msgs, callstack_names, callstack_ips = {}, {}, [], {}
    sessions = {}  # sequence -> {"source", "timebase", "samples", "period", "step"}
    counts = {}    # (sequence, cpu) -> last timebase_count
    sums = {}      # (sequence, cpu) -> last follower count (--sum's field)
    tree_sequences, kernel_mappings, kernel_named = set(), {}, 0
    samples = stacks_checked = 0
    data = open(trace, "rb").read()
    for i, (num, wt, pkt) in enumerate(fields(data)):
        if num != 1 or wt != 2:
            errors.append("top-level field %d is not a Trace.packet" % num)
            continue
        p = fields(pkt)
        seq = get(p, 10)
        if seq is None:
            errors.append("packet %d: no trusted_packet_sequence_id" % i)
        if get(p, 13) == 1:  # a sequence starts: its defaults
            if get(p, 87) != 1:
                errors.append("packet %d: sequence %s starts without first_packet_on_sequence" % (i, seq))
            if seq in sessions:
                errors.append("sequence %s cleared twice" % seq)
            defaults = get(p, 59)
            if defaults is None:
                errors.append("sequence %s: no trace_packet_defaults: trace processor would "
                              "take it for cpu-clock" % seq)
                sessions[seq] = {"source": None, "timebase": "none", "samples": 0, "step": None}
            else:
                d = fields(defaults)
                if get(d, 58) != 6:
                    errors.append("sequence %s: default clock %s, not BOOTTIME (6)" % (seq, get(d, 58)))
                t = fields(get(fields(get(d, 12, b"")), 1, b""))
                source, text = describe_timebase(t)
                if source not in sources:
                    errors.append("sequence %s: timebase %s names no source of %s (%s)"
                                  % (seq, text, stack_json, sources))
                else:
                    wrong = expected_timebase(source, t)
                    if wrong:
                        errors.append("sequence %s: %s" % (seq, wrong))
                if any(v["source"] == source for v in sessions.values()):
                    errors.append("sequence %s: source %s has a sequence already: trace processor "
                                  "could not tell them apart" % (seq, source))
                step = 1 if get(t, 1) == 1 else (10**9 // get(t, 2)) if get(t, 4) == 1 else None
                followers = [get(fields(f), 4, b"").decode()
                             for n, _, f in fields(get(d, 12, b"")) if n == 4]
                if followers:
                    text += " follower " + ",".join(followers)
                sessions[seq] = {"source": source, "timebase": text, "samples": 0, "step": step,
                                 "followers": len(followers)}
        interned = get(p, 12)
        if interned is not None:
            if seq not in sessions:
                errors.append("packet %d: interned data on sequence %s before it cleared its "
                              "incremental state" % (i, seq))
            d = fields(interned)
            for n, _, v in d:
                m = fields(v)
                iid = (seq, get(m, 1))
                if n == 5:
                    if iid in names:
                        errors.append("function name %s interned twice" % (iid,))
                    names[iid] = get(m, 2).decode()
                elif n == 17:
                    paths[iid] = get(m, 2).decode()
                elif n == 16:
                    build_ids[iid] = get(m, 2).hex()
                elif n == 19:
                    path = paths.get((seq, get(m, 7)))
                    if path is None:
                        errors.append("mapping %s: path %s not interned before it" % (iid, get(m, 7)))
                    if len([x for x in m if x[0] == 7]) != 1:
                        errors.append("mapping %s: not one path component" % (iid,))
                    if path in ("[kernel.kallsyms]", "/kernel"):
                        errors.append("mapping %s: path %s: trace processor recognizes the kernel "
                                      "only as the one component \"kernel\"" % (iid, path))
                    kernel = path == "kernel"
                    if kernel:
                        kernel_mappings.setdefault(seq, []).append(iid[1])
                        for fnum, what in ((2, "build_id"), (3, "start_offset"), (4, "start"),
                                           (5, "end"), (8, "exact_offset")):
                            if get(m, fnum, 0) != 0:
                                errors.append("kernel mapping %s: %s %s: trace processor would "
                                              "take it for a user mapping" % (iid, what, get(m, fnum)))
                    else:
                        if get(m, 4, 0) != get(m, 5, 0):
                            errors.append("user mapping %s (%s) has a range: Perfetto would "
                                          "bind it to one process" % (iid, path))
                        user_mappings.add((path, build_ids.get((seq, get(m, 2)), "-")))
                    mappings[iid] = (get(m, 4, 0), kernel, path)
                elif n == 6:
                    if iid in frames:
                        errors.append("frame %s interned twice" % (iid,))
                    frame_msgs[iid] = m
                    fn, mp = get(m, 2), get(m, 3)
                    if fn is not None and (seq, fn) not in names:
                        errors.append("frame %s names function %d before it is interned" % (iid, fn))
                    if (seq, mp) not in mappings:
                        errors.append("frame %s uses mapping %s before it is interned" % (iid, mp))
                    start, kernel, path = mappings.get((seq, mp), (0, True, "?"))
                    if kernel:
                        frames[iid] = (True, get(m, 4, 0) + start)
                        kernel_named += fn is not None
                    else:
                        frames[iid] = (False, (path, get(m, 4, 0)))
                        if fn is not None:
                            user_frames.add((path, get(m, 4, 0), names.get((seq, fn), "?")))
                elif n == 7:
                    if iid in callstacks:
                        errors.append("callstack %s interned twice" % (iid,))
                    ids = []
                    for fnum, fwt, fv in m:
                        if fnum != 2:
                            continue
                        if fwt != 0:
                            errors.append("callstack %s: frame_ids packed, Perfetto wants them unpacked" % (iid,))
                            continue
                        if (seq, fv) not in frames:
                            errors.append("callstack %s uses frame %d before it is interned" % (iid, fv))
                        ids.append((seq, fv))
                    callstacks[iid] = ids
                    kinds = [frames.get(f, (True, 0)) for f in ids]
                    user = [v for k, v in kinds if not k]
                    ips = tuple(v for k, v in reversed(kinds) if k)
                    callstack_ips[iid] = ips
                    if kinds != [(False, u) for u in user] + [(True, ip) for ip in reversed(ips)]:
                        errors.append("callstack %s: a user frame after a kernel frame (not root "
                                      "first?)" % (iid,))
                    if ips and ips not in stacks:
                        errors.append("callstack %s, reversed, is no stack of %s (not root first?)"
                                      % (iid, stack_json))
                    if user and tuple(user) not in user_stacks:
                        errors.append("callstack %s: its user frames %s are no user stack of %s"
                                      % (iid, user[:3], stack_json))
                    modes[iid] = 1 if ips else 2
                    shown = []
                    for f in ids:
                        k, v = frames.get(f, (True, 0))
                        fn = get(frame_msgs.get(f, []), 2)
                        name = "K" if k else names.get((seq, fn), "?") if fn else "?"
                        if name != "K" or not shown or shown[-1] != "K":
                            shown.append(name)
                    callstack_names.append(" ".join(shown))
                    stacks_checked += 1
        tree = get(p, 2)
        if tree is not None:
            tree_sequences.add(seq)
            for n, _, v in fields(tree):
                if n == 2:
                    t = fields(v)
                    if get(t, 5) is not None:
                        errors.append("packet %d: Thread field 5 (Perfetto's Thread has no 5; "
                                      "tgid is 3)" % i)
                    threads[get(t, 1)] = get(t, 3)
        sample = get(p, 66)
        if sample is not None:
            s = fields(sample)
            samples += 1
            session = sessions.get(seq)
            if session is None:
                errors.append("packet %d: a sample on sequence %s, which has no defaults" % (i, seq))
                session = sessions.setdefault(seq, {"source": None, "timebase": "none",
                                                    "samples": 0, "step": None})
            session["samples"] += 1
            cs = (seq, get(s, 4))
            if cs not in callstacks:
                errors.append("packet %d: callstack %s used before it is interned" % (i, cs))
            elif session["source"] in stacks_of and callstack_ips[cs] and \
                    callstack_ips[cs] not in stacks_of[session["source"]]:
                errors.append("packet %d: a sample of %s whose stack the JSON counts for other "
                              "sources only" % (i, session["source"]))
            tid, pid = get(s, 3), get(s, 2)
            if tid not in threads:
                errors.append("packet %d: thread %s not named before its sample" % (i, tid))
            elif threads[tid] != pid:
                errors.append("packet %d: thread %s is named in process %s (Thread.tgid), its "
                              "sample's pid is %s" % (i, tid, threads[tid], pid))
            if get(s, 5) != modes.get(cs, 1):
                errors.append("packet %d: cpu_mode %s, not %d" % (i, get(s, 5), modes.get(cs, 1)))
            count = get(s, 6)
            last = counts.get((seq, get(s, 1)), 0)
            if count is None:
                errors.append("packet %d: no timebase_count" % i)
            elif count < last or (session["step"] and count != last + session["step"]):
                errors.append("packet %d: timebase_count %d after %d on CPU %s (step %s)"
                              % (i, count, last, get(s, 1), session["step"]))
            counts[(seq, get(s, 1))] = count or last
            follower = [v for n, _, v in s if n == 7]
            if len(follower) != session.get("followers", 0):
                errors.append("packet %d: %d follower counts, the defaults name %d"
                              % (i, len(follower), session.get("followers", 0)))
            elif follower:
                if follower[0] < sums.get((seq, get(s, 1)), 0):
                    errors.append("packet %d: follower count %d went down" % (i, follower[0]))
                sums[(seq, get(s, 1))] = follower[0]
            if get(p, 58) != 6:
                errors.append("packet %d: clock %s, not BOOTTIME (6)" % (i, get(p, 58)))
            ts = get(p, 8, 0)
            if not boot_start <= ts <= boot_end:
                errors.append("packet %d: timestamp %d outside the session's BOOTTIME [%d, %d]"
                              % (i, ts, boot_start, boot_end))
            if get(p, 13) != 2:
                errors.append("packet %d: sample without SEQ_NEEDS_INCREMENTAL_STATE" % i)
    for seq in tree_sequences & set(sessions):
        errors.append("sequence %s holds both ProcessTree packets and samples" % seq)
    for seq in sessions:
        if len(kernel_mappings.get(seq, [])) != 1:
            errors.append("sequence %s: %d kernel mappings, not one" % (seq, len(kernel_mappings.get(seq, []))))
    # A CPU profile of user-mode code alone has only empty kernel stacks.
    if any(stacks) and not kernel_named:
        errors.append("no kernel frame carries a function name")
    for seq, session in sorted(sessions.items()):
        src = session["source"]
        if src in by_source and by_source[src] != session["samples"]:
            errors.append("sequence %s: %d samples, the JSON counts %d events of %s"
                          % (seq, session["samples"], by_source[src], src))
        total = sum(v for (q, _), v in sums.items() if q == seq)
        if src in sum_of and session.get("followers") and sum_of[src] != total:
            errors.append("sequence %s: the follower counts add up to %d, the JSON's sum of %s "
                          "is %d" % (seq, total, src, sum_of[src]))
    for e in errors[:20]:
        print("error: " + e)
    print("samples %d" % samples)
    for seq, session in sorted(sessions.items()):
        print("session %s %s %s samples %d" % (seq, session["source"], session["timebase"].replace(" ", "_"),
                                               session["samples"]))
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

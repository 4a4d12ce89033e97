# SPDX-License-Identifier: GPL-2.0
"""What tests/otlp_test.sh checks in a request as `protoc --decode` prints it.

Reads protoc's text format (any message nesting: `name {` ... `}` and
`name: value` lines) and prints one JSON object: totals per sample type,
the tables' sizes, distinct locations, the attribute and resource keys,
each profile's type as Pyroscope spells it, and whether every index is
within its table and every sample on its process's resource.
Usage: summary.py DECODED_TEXT
"""
import json
import sys


def parse(lines):
    """The message as {field: [values]}, nested messages as dicts."""
    root, stack = {}, []
    node = root
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            node = stack.pop()
        elif line.endswith("{"):
            child = {}
            node.setdefault(line[:-1].strip(), []).append(child)
            stack.append(node)
            node = child
        else:
            key, _, value = line.partition(": ")
            value = value.strip()
            if value.startswith('"'):
                value = bytes(value[1:-1], "utf-8").decode("unicode_escape")
            else:
                value = int(value) if value.lstrip("-").isdigit() else value
            node.setdefault(key, []).append(value)
    return root


def one(m, field, default=0):
    return m.get(field, [default])[0]


def main():
    req = parse(open(sys.argv[1]))
    d = one(req, "dictionary", {})
    strings = d.get("string_table", [])
    locations = d.get("location_table", [])
    stacks = d.get("stack_table", [])
    attributes = d.get("attribute_table", [])
    totals, samples, ok = {}, 0, True
    resources, profile_types, pid_mismatches = [], set(), 0

    def value(kv):
        v = one(kv, "value", {})
        return v["int_value"][0] if "int_value" in v else one(v, "string_value", "")

    def sample_pid(s):
        for a in s.get("attribute_indices", []):
            if 0 < a < len(attributes) and strings[one(attributes[a], "key_strindex")] == "process.pid":
                return value(attributes[a])
        return None

    for rp in req.get("resource_profiles", []):
        res = one(rp, "resource", {})
        attrs = {one(kv, "key", ""): value(kv) for kv in res.get("attributes", [])}
        resources.append(attrs)
        for sp in rp.get("scope_profiles", []):
            for p in sp.get("profiles", []):
                vt = one(p, "sample_type", {})
                name = strings[one(vt, "type_strindex")] + "/" + strings[one(vt, "unit_strindex")]
                # Pyroscope's profileType (pkg/ingester/otlp/convert.go): the
                # period's fields only with a period.
                pt = one(p, "period_type", {}) if one(p, "period") else {}
                profile_types.add(name.replace("/", ":") + ":" +
                                  (strings[one(pt, "type_strindex")] + ":" +
                                   strings[one(pt, "unit_strindex")] if pt else ":"))
                for s in p.get("samples", []):
                    samples += 1
                    totals[name] = totals.get(name, 0) + sum(s.get("values", []))
                    ok &= 0 < one(s, "stack_index") < len(stacks)
                    ok &= all(0 < a < len(attributes) for a in s.get("attribute_indices", []))
                    # A process's samples on its own resource.
                    if "process.pid" in attrs and sample_pid(s) != attrs["process.pid"]:
                        pid_mismatches += 1
    for st in stacks[1:]:
        ok &= all(0 < i < len(locations) for i in st.get("location_indices", []))
    keys = sorted({strings[one(a, "key_strindex")] for a in attributes[1:]})
    # Each location's profile.frame.type: "kernel" exactly where its mapping
    # is the kernel's, "native" elsewhere.
    mappings = d.get("mapping_table", [])
    frame_types = {}
    for loc in locations[1:]:
        types = [one(one(attributes[i], "value", {}), "string_value", "")
                 for i in loc.get("attribute_indices", [])
                 if 0 < i < len(attributes)
                 and strings[one(attributes[i], "key_strindex")] == "profile.frame.type"]
        t = types[0] if len(types) == 1 else "untyped"
        m = one(loc, "mapping_index")
        in_kernel = 0 < m < len(mappings) and \
            strings[one(mappings[m], "filename_strindex")] == "[kernel.kallsyms]"
        if (t == "kernel") != in_kernel or t not in ("kernel", "native"):
            t = "wrong"
        frame_types[t] = frame_types.get(t, 0) + 1
    scopes = [{"name": one(one(sp, "scope", {}), "name", ""),
               "version": one(one(sp, "scope", {}), "version", ""),
               "schema_url": one(sp, "schema_url", "")}
              for rp in req.get("resource_profiles", []) for sp in rp.get("scope_profiles", [])]
    resource_schemas = sorted({one(rp, "schema_url", "") for rp in req.get("resource_profiles", [])})
    distinct = {(one(l, "mapping_index"), one(l, "address")) for l in locations[1:]}
    print(json.dumps({
        "first_string": strings[0] if strings else None,
        "strings_unique": len(set(strings)) == len(strings),
        "totals": totals, "samples": samples, "indices_ok": bool(ok),
        "locations": len(locations) - 1, "distinct_locations": len(distinct),
        "stacks": len(stacks) - 1, "attribute_keys": keys, "resources": resources,
        "kernel_mapping": "[kernel.kallsyms]" in strings,
        "frame_types": frame_types, "scopes": scopes, "resource_schemas": resource_schemas,
        "profile_types": sorted(profile_types), "pid_mismatches": pid_mismatches,
    }))


main()

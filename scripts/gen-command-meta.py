#!/usr/bin/env python3
"""Generate src/commands/meta/redis70.rs from Redis 7.0's command JSON.

    scripts/gen-command-meta.py /path/to/redis-7.0.15

Redis describes every command in src/commands/*.json (arity, flags, ACL
categories, key specs, arguments, history, tips) and builds its command
table from them with utils/generate-command-code.py. This script reads the
same files and writes one `CommandMeta` static per command and subcommand,
so that COMMAND INFO / DOCS / GETKEYS and the dispatcher's arity and flags
are Redis's own, not a hand-copied approximation. It computes what Redis
computes at startup from the JSON: the implicit ACL categories
(setImplicitACLCategories), the legacy first/last/step range and the
movablekeys flag (populateCommandLegacyRangeSpec). Sentinel-only commands
are left out, as a Redis server leaves them out.
"""

import glob
import json
import os
import sys

# Redis's ACLCommandCategories order: COMMAND INFO lists categories in it.
ACL_ORDER = [
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
    "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
    "blocking", "dangerous", "connection", "transaction", "scripting",
]

GROUPS = {"sorted_set": "sorted-set"}

# Our flag constants (src/commands/mod.rs) for the JSON's command_flags.
FLAGS = {
    "WRITE", "READONLY", "DENYOOM", "MODULE", "ADMIN", "PUBSUB", "NOSCRIPT",
    "BLOCKING", "LOADING", "STALE", "SKIP_MONITOR", "SKIP_SLOWLOG", "ASKING",
    "FAST", "NO_AUTH", "MAY_REPLICATE", "SENTINEL", "ONLY_SENTINEL",
    "NO_MANDATORY_KEYS", "PROTECTED", "NO_ASYNC_LOADING", "NO_MULTI",
    "ALLOW_BUSY", "TOUCHES_ARBITRARY_KEYS",
}

KEY_FLAGS = ["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE",
             "NOT_KEY", "INCOMPLETE", "VARIABLE_FLAGS"]


def rs(s):
    """A Rust string literal."""
    return json.dumps(s, ensure_ascii=False)


def opt(s):
    return "None" if s is None else "Some(%s)" % rs(s)


def ident(fullname):
    return fullname.upper().replace("|", "_").replace("-", "_").replace(":", "")


def acl_categories(desc):
    cats = {c.lower() for c in desc.get("acl_categories", [])}
    flags = set(desc.get("command_flags", []))
    if "WRITE" in flags:
        cats.add("write")
    if "READONLY" in flags and "scripting" not in cats:
        cats.add("read")
    if "ADMIN" in flags:
        cats |= {"admin", "dangerous"}
    if "PUBSUB" in flags:
        cats.add("pubsub")
    if "FAST" in flags:
        cats.add("fast")
    if "BLOCKING" in flags:
        cats.add("blocking")
    if "fast" not in cats:
        cats.add("slow")
    return [c for c in ACL_ORDER if c in cats]


def legacy_range(specs):
    """(first, last, step, movablekeys) as populateCommandLegacyRangeSpec."""
    if not specs:
        return (0, 0, 0, False)

    def is_index_range(s):
        return "index" in s["begin_search"] and "range" in s["find_keys"]

    if len(specs) == 1 and is_index_range(specs[0]):
        s = specs[0]
        pos = s["begin_search"]["index"]["pos"]
        r = s["find_keys"]["range"]
        last = r["lastkey"] + pos if r["lastkey"] >= 0 else r["lastkey"]
        return (pos, last, r["step"], "INCOMPLETE" in s["flags"])
    movable = False
    first, last, prev_last = None, 0, 0
    for s in specs:
        if not is_index_range(s):
            movable = True
            continue
        pos = s["begin_search"]["index"]["pos"]
        r = s["find_keys"]["range"]
        if r["step"] != 1 or (prev_last and prev_last != pos - 1):
            movable = True
            continue
        if "INCOMPLETE" in s["flags"]:
            movable = True
        first = pos if first is None else min(first, pos)
        abs_last = r["lastkey"] + pos if r["lastkey"] >= 0 else r["lastkey"]
        # Redis compares as unsigned: a negative (count from the end) wins.
        last = max(last & 0xFFFFFFFF, abs_last & 0xFFFFFFFF)
        last = last - (1 << 32) if last >= (1 << 31) else last
        prev_last = last
    if first is None:
        return (0, 0, 0, True)
    return (first, last, 1, movable)


def key_spec(s):
    flags = " | ".join("KEY_" + f for f in s["flags"] if f in KEY_FLAGS) or "0"
    bs = s["begin_search"]
    if "index" in bs:
        begin = "BeginSearch::Index(%d)" % bs["index"]["pos"]
    elif "keyword" in bs:
        begin = "BeginSearch::Keyword { keyword: %s, startfrom: %d }" % (
            rs(bs["keyword"]["keyword"]), bs["keyword"]["startfrom"])
    else:
        begin = "BeginSearch::Unknown"
    fk = s["find_keys"]
    if "range" in fk:
        r = fk["range"]
        find = "FindKeys::Range { lastkey: %d, step: %d, limit: %d }" % (
            r["lastkey"], r["step"], r["limit"])
    elif "keynum" in fk:
        k = fk["keynum"]
        find = "FindKeys::Keynum { keynumidx: %d, firstkey: %d, step: %d }" % (
            k["keynumidx"], k["firstkey"], k["step"])
    else:
        find = "FindKeys::Unknown"
    return "KeySpec { notes: %s, flags: %s, begin_search: %s, find_keys: %s }" % (
        opt(s.get("notes")), flags, begin, find)


def arg(a, indent):
    pad = " " * indent
    flags = [f for f in ("optional", "multiple", "multiple_token") if a.get(f)]
    token = a.get("token")
    if token == '""':
        # Redis's commands.c writes this token as `""""`: C joins the two
        # literals into an empty string, which is what COMMAND DOCS shows.
        token = ""
    sub = ""
    if a["type"] in ("oneof", "block"):
        sub = "&[\n%s\n%s]" % (",\n".join(arg(x, indent + 4) for x in a["arguments"]), pad)
    else:
        sub = "&[]"
    return (
        "%sArg { name: %s, kind: %s, key_spec_index: %d, token: %s, since: %s, "
        "deprecated_since: %s, flags: &[%s], arguments: %s }"
        % (pad, rs(a["name"].lower()), rs(a["type"]), a.get("key_spec_index", -1),
           opt(token.upper() if token is not None else None), opt(a.get("since")),
           opt(a.get("deprecated_since")), ", ".join(rs(f) for f in flags), sub))


def command(fullname, desc, group, subs):
    specs = desc.get("key_specs", [])
    first, last, step, movable = legacy_range(specs)
    flags = [f for f in desc.get("command_flags", []) if f in FLAGS]
    unknown = set(desc.get("command_flags", [])) - FLAGS
    assert not unknown, (fullname, unknown)
    if movable:
        flags.append("MOVABLE_KEYS")
    history = desc.get("history")
    args = desc.get("arguments")
    out = []
    out.append("pub static %s: CommandMeta = CommandMeta {" % ident(fullname))
    out.append("    name: %s," % rs(fullname))
    out.append("    summary: %s," % rs(desc["summary"]))
    out.append("    since: %s," % rs(desc["since"]))
    out.append("    group: %s," % rs(group))
    out.append("    complexity: %s," % opt(desc.get("complexity")))
    out.append("    doc_flags: &[%s]," % ", ".join(rs(f.lower()) for f in desc.get("doc_flags", [])))
    out.append("    deprecated_since: %s," % opt(desc.get("deprecated_since")))
    out.append("    replaced_by: %s," % opt(desc.get("replaced_by")))
    if history:
        out.append("    history: Some(&[%s])," % ", ".join(
            "(%s, %s)" % (rs(v), rs(t)) for v, t in history))
    else:
        out.append("    history: None,")
    out.append("    tips: &[%s]," % ", ".join(rs(t.lower()) for t in desc.get("command_tips", [])))
    out.append("    arity: %d," % desc["arity"])
    # Qualified: some commands share a flag's name (READONLY, ASKING).
    out.append("    flags: %s," % (" | ".join("cmd::" + f for f in flags) or "0"))
    out.append("    acl_categories: &[%s]," % ", ".join(rs(c) for c in acl_categories(desc)))
    out.append("    key_specs: &[%s]," % ", ".join(key_spec(s) for s in specs))
    out.append("    legacy_range: (%d, %d, %d)," % (first, last, step))
    out.append("    getkeys_function: %s," % ("true" if desc.get("get_keys_function") else "false"))
    if args:
        out.append("    arguments: Some(&[\n%s\n    ])," % ",\n".join(arg(a, 8) for a in args))
    else:
        out.append("    arguments: None,")
    out.append("    subcommands: &[%s]," % ", ".join("&" + ident(s) for s in subs))
    out.append("};")
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    commands, subcommands = {}, {}
    for path in sorted(glob.glob(os.path.join(src, "src", "commands", "*.json"))):
        with open(path) as f:
            for name, desc in json.load(f).items():
                if "ONLY_SENTINEL" in desc.get("command_flags", []):
                    continue
                if desc.get("container"):
                    subcommands.setdefault(desc["container"].lower(), {})[name.lower()] = desc
                else:
                    commands[name.lower()] = desc
    out = [
        "// Generated by scripts/gen-command-meta.py from Redis 7.0's",
        "// src/commands/*.json. Do not edit: change the script and rerun it.",
        "",
        "use super::*;",
        "use crate::commands as cmd;",
        "",
    ]
    for name in sorted(commands):
        desc = commands[name]
        group = GROUPS.get(desc["group"], desc["group"])
        subs = subcommands.get(name, {})
        for sub in sorted(subs):
            out.append(command("%s|%s" % (name, sub), subs[sub], group, []))
            out.append("")
        out.append(command(name, desc, group, ["%s|%s" % (name, s) for s in sorted(subs)]))
        out.append("")
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "src", "commands", "meta", "redis70.rs")
    with open(target, "w") as f:
        f.write("\n".join(out))
    print("wrote %d commands, %d subcommands to %s" % (
        len(commands), sum(len(s) for s in subcommands.values()), os.path.normpath(target)))


if __name__ == "__main__":
    main()

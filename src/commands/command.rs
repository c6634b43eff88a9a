//! COMMAND: the command table as clients introspect it (COUNT, LIST, INFO,
//! DOCS, GETKEYS).

use super::meta::{get_keys, Arg, BeginSearch, CommandMeta, FindKeys, KEY_FLAG_NAMES};
use super::*;

// ---- COMMAND ----

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

/// Flags as Redis's addReplyCommandFlags prints them: a set of statuses.
fn reply_flags(out: &mut crate::protocol::Reply, bits: u32, names: &[(u32, &str)]) {
    let shown: Vec<&str> = names
        .iter()
        .filter(|(f, _)| bits & f != 0)
        .map(|(_, n)| *n)
        .collect();
    out.set(shown.len());
    for n in shown {
        out.simple(n);
    }
}

/// One command's COMMAND INFO entry (Redis's addReplyCommandInfo).
fn reply_command_info(out: &mut crate::protocol::Reply, spec: &CommandSpec) {
    let meta = spec.meta;
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.int(spec.arity as i64);
    reply_flags(out, spec.flags, FLAG_NAMES);
    let (first, last, step) = meta.legacy_range;
    out.int(first as i64);
    out.int(last as i64);
    out.int(step as i64);
    out.set(meta.acl_categories.len());
    for cat in meta.acl_categories {
        out.simple(&format!("@{cat}"));
    }
    out.set(meta.tips.len());
    for tip in meta.tips {
        out.bulk(tip.as_bytes());
    }
    reply_key_specs(out, meta);
    if spec.subcommands.is_empty() {
        out.set(0);
    } else {
        out.array(spec.subcommands.len());
        for sub in spec.subcommands {
            reply_command_info(out, sub);
        }
    }
}

/// Redis's addReplyCommandKeySpecs.
fn reply_key_specs(out: &mut crate::protocol::Reply, meta: &CommandMeta) {
    out.set(meta.key_specs.len());
    for ks in meta.key_specs {
        out.map(if ks.notes.is_some() { 4 } else { 3 });
        if let Some(notes) = ks.notes {
            out.bulk(b"notes");
            out.bulk(notes.as_bytes());
        }
        out.bulk(b"flags");
        reply_flags(out, ks.flags, KEY_FLAG_NAMES);
        out.bulk(b"begin_search");
        match ks.begin_search {
            BeginSearch::Index(pos) => reply_search_step(out, "index", &[("index", pos)], None),
            BeginSearch::Keyword { keyword, startfrom } => {
                reply_search_step(out, "keyword", &[("startfrom", startfrom)], Some(keyword))
            }
            BeginSearch::Unknown => reply_search_step(out, "unknown", &[], None),
        }
        out.bulk(b"find_keys");
        match ks.find_keys {
            FindKeys::Range {
                lastkey,
                step,
                limit,
            } => reply_search_step(
                out,
                "range",
                &[("lastkey", lastkey), ("keystep", step), ("limit", limit)],
                None,
            ),
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                step,
            } => reply_search_step(
                out,
                "keynum",
                &[
                    ("keynumidx", keynumidx),
                    ("firstkey", firstkey),
                    ("keystep", step),
                ],
                None,
            ),
            FindKeys::Unknown => reply_search_step(out, "unknown", &[], None),
        }
    }
}

/// One step of a key spec: `{type: <kind>, spec: {…}}`, the spec holding
/// the keyword first (when there is one), then the numbers.
fn reply_search_step(
    out: &mut crate::protocol::Reply,
    kind: &str,
    numbers: &[(&str, i32)],
    keyword: Option<&str>,
) {
    out.map(2);
    out.bulk(b"type");
    out.bulk(kind.as_bytes());
    out.bulk(b"spec");
    out.map(numbers.len() + usize::from(keyword.is_some()));
    if let Some(k) = keyword {
        out.bulk(b"keyword");
        out.bulk(k.as_bytes());
    }
    for (name, v) in numbers {
        out.bulk(name.as_bytes());
        out.int(*v as i64);
    }
}

/// The map entries of the optional fields that are set.
fn reply_present_fields(out: &mut crate::protocol::Reply, fields: &[(&str, Option<&str>)]) {
    for (field, value) in fields {
        if let Some(v) = value {
            out.bulk(field.as_bytes());
            out.bulk(v.as_bytes());
        }
    }
}

/// Names as a set of status replies (doc flags, argument flags).
fn reply_status_set(out: &mut crate::protocol::Reply, names: &[&str]) {
    out.set(names.len());
    for n in names {
        out.simple(n);
    }
}

/// Redis's addReplyCommandArgList.
fn reply_args(out: &mut crate::protocol::Reply, args: &[Arg]) {
    out.array(args.len());
    for a in args {
        let container = matches!(a.kind, "oneof" | "block");
        let fields = 2
            + usize::from(a.key_spec_index != -1)
            + usize::from(a.token.is_some())
            + usize::from(a.since.is_some())
            + usize::from(a.deprecated_since.is_some())
            + usize::from(!a.flags.is_empty())
            + usize::from(container);
        out.map(fields);
        out.bulk(b"name");
        out.bulk(a.name.as_bytes());
        out.bulk(b"type");
        out.bulk(a.kind.as_bytes());
        if a.key_spec_index != -1 {
            out.bulk(b"key_spec_index");
            out.int(a.key_spec_index as i64);
        }
        reply_present_fields(
            out,
            &[
                ("token", a.token),
                ("since", a.since),
                ("deprecated_since", a.deprecated_since),
            ],
        );
        if !a.flags.is_empty() {
            out.bulk(b"flags");
            reply_status_set(out, a.flags);
        }
        if container {
            out.bulk(b"arguments");
            reply_args(out, a.arguments);
        }
    }
}

/// One command's COMMAND DOCS entry (Redis's addReplyCommandDocs).
fn reply_command_docs(out: &mut crate::protocol::Reply, spec: &CommandSpec) {
    let meta = spec.meta;
    let fields = 3
        + usize::from(meta.complexity.is_some())
        + usize::from(!meta.doc_flags.is_empty())
        + usize::from(meta.deprecated_since.is_some())
        + usize::from(meta.replaced_by.is_some())
        + usize::from(meta.history.is_some())
        + usize::from(meta.arguments.is_some())
        + usize::from(!spec.subcommands.is_empty());
    out.map(fields);
    out.bulk(b"summary");
    out.bulk(meta.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(meta.since.as_bytes());
    out.bulk(b"group");
    out.bulk(meta.group.as_bytes());
    if let Some(cx) = meta.complexity {
        out.bulk(b"complexity");
        out.bulk(cx.as_bytes());
    }
    if !meta.doc_flags.is_empty() {
        out.bulk(b"doc_flags");
        reply_status_set(out, meta.doc_flags);
    }
    reply_present_fields(
        out,
        &[
            ("deprecated_since", meta.deprecated_since),
            ("replaced_by", meta.replaced_by),
        ],
    );
    if let Some(history) = meta.history {
        out.bulk(b"history");
        out.set(history.len());
        for (version, change) in history {
            out.array(2);
            out.bulk(version.as_bytes());
            out.bulk(change.as_bytes());
        }
    }
    if let Some(args) = meta.arguments {
        out.bulk(b"arguments");
        reply_args(out, args);
    }
    if !spec.subcommands.is_empty() {
        out.bulk(b"subcommands");
        out.map(spec.subcommands.len());
        for sub in spec.subcommands {
            out.bulk(sub.name.as_bytes());
            reply_command_docs(out, sub);
        }
    }
}

/// Every command and subcommand, as COMMAND LIST lists them.
fn all_commands() -> impl Iterator<Item = &'static CommandSpec> {
    COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
}

/// `COMMAND [COUNT | LIST | INFO name… | DOCS name… | GETKEYS cmd… | HELP]`
pub fn command(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() == 1 {
        c.cl.reply.array(COMMANDS.len());
        for spec in COMMANDS {
            reply_command_info(&mut c.cl.reply, spec);
        }
        return;
    }
    match subcommand(c) {
        "help" => reply_help(c, COMMAND_HELP),
        "count" => c.cl.reply.int(COMMANDS.len() as i64),
        "list" => command_list(c, argv),
        "info" => {
            if argv.len() == 2 {
                c.cl.reply.array(COMMANDS.len());
                for spec in COMMANDS {
                    reply_command_info(&mut c.cl.reply, spec);
                }
                return;
            }
            c.cl.reply.array(argv.len() - 2);
            for name in &argv[2..] {
                match lookup_command_by_full_name(name) {
                    Some(spec) => reply_command_info(&mut c.cl.reply, spec),
                    None => c.cl.reply.null(),
                }
            }
        }
        "docs" => {
            let specs: Vec<&CommandSpec> = if argv.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                argv[2..]
                    .iter()
                    .filter_map(|n| lookup_command_by_full_name(n))
                    .collect()
            };
            c.cl.reply.map(specs.len());
            for spec in specs {
                c.cl.reply.bulk(spec.name.as_bytes());
                reply_command_docs(&mut c.cl.reply, spec);
            }
        }
        sub => command_getkeys(c, &argv[2..], sub == "getkeysandflags"),
    }
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]`
fn command_list(c: &mut Ctx, argv: &[&[u8]]) {
    enum Filter<'a> {
        All,
        Module,
        AclCat(String),
        Pattern(&'a [u8]),
    }
    let mut filter = Filter::All;
    let mut i = 2;
    while i < argv.len() {
        if !eq_ic(argv[i], "filterby") || argv.len() - 1 - i != 2 {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        let v = argv[i + 2];
        filter = if eq_ic(argv[i + 1], "module") {
            Filter::Module
        } else if eq_ic(argv[i + 1], "aclcat") {
            Filter::AclCat(String::from_utf8_lossy(v).to_ascii_lowercase())
        } else if eq_ic(argv[i + 1], "pattern") {
            Filter::Pattern(v)
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        };
        i += 3;
    }
    let names: Vec<&str> = all_commands()
        .filter(|spec| match &filter {
            Filter::All => true,
            // No modules are ever loaded.
            Filter::Module => false,
            Filter::AclCat(cat) => spec.meta.acl_categories.contains(&cat.as_str()),
            Filter::Pattern(p) => glob_match(p, spec.name.as_bytes(), true),
        })
        .map(|spec| spec.name)
        .collect();
    c.cl.reply.array(names.len());
    for n in names {
        c.cl.reply.bulk(n.as_bytes());
    }
}

/// `COMMAND GETKEYS cmd arg…` / `COMMAND GETKEYSANDFLAGS cmd arg…` (Redis's
/// getKeysSubcommandImpl).
fn command_getkeys(c: &mut Ctx, args: &[&[u8]], with_flags: bool) {
    let Some(spec) = lookup_command(args[0]).and_then(|base| base.resolve(args).ok()) else {
        return c.cl.reply.error("ERR Invalid command specified");
    };
    if !spec.meta.has_keys() {
        return c.cl.reply.error("ERR The command has no key arguments");
    }
    let argc = args.len() as i32;
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        return c
            .cl
            .reply
            .error("ERR Invalid number of arguments specified for command");
    }
    let keys = get_keys(spec.meta, args);
    if keys.is_empty() {
        if spec.flags & NO_MANDATORY_KEYS != 0 {
            return c.cl.reply.array(0);
        }
        return c
            .cl
            .reply
            .error("ERR Invalid arguments specified for command");
    }
    c.cl.reply.array(keys.len());
    for (pos, flags) in keys {
        if with_flags {
            c.cl.reply.array(2);
            c.cl.reply.bulk(args[pos]);
            reply_flags(&mut c.cl.reply, flags, KEY_FLAG_NAMES);
        } else {
            c.cl.reply.bulk(args[pos]);
        }
    }
}

//! COMMAND: the command table as clients introspect it (COUNT, LIST, INFO,
//! DOCS, GETKEYS).

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

fn reply_command_info(c: &mut Ctx, spec: &CommandSpec) {
    let out = &mut c.cl.reply;
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.int(spec.arity as i64);
    let flags: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(f, _)| spec.flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    out.int(spec.first_key as i64);
    out.int(spec.last_key as i64);
    out.int(spec.step as i64);
    let cats = spec.acl_categories();
    out.set(cats.len());
    for cat in cats {
        out.simple(cat);
    }
    out.set(0);
    out.array(0);
    out.array(0);
}

fn reply_command_docs(c: &mut Ctx, spec: &CommandSpec) {
    let out = &mut c.cl.reply;
    out.bulk(spec.name.as_bytes());
    out.map(4);
    out.bulk(b"summary");
    out.bulk(spec.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(spec.since.as_bytes());
    out.bulk(b"group");
    out.bulk(spec.group.as_bytes());
    out.bulk(b"complexity");
    out.bulk(spec.complexity.as_bytes());
}

/// `COMMAND [COUNT | LIST | INFO name… | DOCS name… | GETKEYS cmd… | HELP]`
pub fn command(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() == 1 {
        c.cl.reply.array(COMMANDS.len());
        for spec in COMMANDS {
            reply_command_info(c, spec);
        }
        return;
    }
    let subs = [
        ("count", 2),
        ("list", -2),
        ("info", -2),
        ("docs", -2),
        ("getkeys", -4),
        ("getkeysandflags", -4),
        ("help", 2),
    ];
    let Some(sub) = subcommand(c, argv, &subs) else {
        return;
    };
    match sub {
        "help" => reply_help(c, COMMAND_HELP),
        "count" => c.cl.reply.int(COMMANDS.len() as i64),
        "list" => {
            let mut names: Vec<&str> = COMMANDS.iter().map(|s| s.name).collect();
            if argv.len() > 2 {
                if argv.len() != 5 || !eq_ic(argv[2], "filterby") {
                    return c.cl.reply.error(ERR_SYNTAX);
                }
                let v = argv[4];
                if eq_ic(argv[3], "pattern") {
                    names.retain(|n| glob_match(v, n.as_bytes(), true));
                } else if eq_ic(argv[3], "aclcat") {
                    let cat = String::from_utf8_lossy(v).to_ascii_lowercase();
                    names.retain(|n| {
                        lookup_command(n.as_bytes())
                            .is_some_and(|s| s.acl_categories().iter().any(|c| c[1..] == cat))
                    });
                } else if eq_ic(argv[3], "module") {
                    names.clear();
                } else {
                    return c.cl.reply.error(ERR_SYNTAX);
                }
            }
            c.cl.reply.array(names.len());
            for n in names {
                c.cl.reply.bulk(n.as_bytes());
            }
        }
        "info" => {
            if argv.len() == 2 {
                c.cl.reply.array(COMMANDS.len());
                for spec in COMMANDS {
                    reply_command_info(c, spec);
                }
                return;
            }
            c.cl.reply.array(argv.len() - 2);
            for name in &argv[2..] {
                match lookup_command(name) {
                    Some(spec) => reply_command_info(c, spec),
                    None => c.cl.reply.null_array(),
                }
            }
        }
        "docs" => {
            let specs: Vec<&CommandSpec> = if argv.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                argv[2..].iter().filter_map(|n| lookup_command(n)).collect()
            };
            c.cl.reply.map(specs.len());
            for spec in specs {
                reply_command_docs(c, spec);
            }
        }
        _ => {
            let Some(spec) = lookup_command(argv[2]) else {
                return c.cl.reply.error("ERR Invalid command specified");
            };
            let args = &argv[2..];
            let argc = args.len() as i32;
            if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
                return c
                    .cl
                    .reply
                    .error("ERR Invalid number of arguments specified for command");
            }
            let pos = spec.key_positions(args.len());
            if pos.is_empty() {
                return c.cl.reply.error("ERR The command has no key arguments");
            }
            let flags_too = sub == "getkeysandflags";
            c.cl.reply.array(pos.len());
            for p in pos {
                if flags_too {
                    c.cl.reply.array(2);
                    c.cl.reply.bulk(args[p]);
                    let f = if spec.flags & WRITE != 0 {
                        ["RW", "update"]
                    } else {
                        ["RO", "access"]
                    };
                    c.cl.reply.set(2);
                    c.cl.reply.simple(f[0]);
                    c.cl.reply.simple(f[1]);
                } else {
                    c.cl.reply.bulk(args[p]);
                }
            }
        }
    }
}

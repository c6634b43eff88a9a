//! Access control: the ACL command, rules, and the permission check the
//! dispatcher, EXEC and scripts run before a command (Redis's acl.c).
//!
//! Users and selectors are data in `state::acl`; this file gives command
//! ids their meaning. Every command and subcommand of the table has an id
//! (its place in [`universe`]), and a selector allows a command when that
//! id's bit is set. `+@category` sets the bits of the category's commands,
//! as Redis does, so a user's rules are a bitmap, and ACL GETUSER / LIST
//! describe the bitmap back with Redis's best-fit walk over the categories
//! (ACLDescribeSelectorCommandRules), which is why `+@all -@string` reads
//! back as it was written.
//!
//! A user who may run anything (every command, key and channel in one
//! selector, as `default`) is never checked: the dispatcher reads one flag.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::meta::{self, KEY_ACCESS, KEY_DELETE, KEY_INSERT, KEY_UPDATE};
use super::*;
use crate::state::acl::{
    channel_in_list, hash_password, is_password_hash, Denial, KeyPattern, LogContext, LogEntry,
    Sanitize, Selector, User, UserId, DEFAULT_USER, KEY_ALL, KEY_READ, KEY_WRITE, NO_USER,
};

/// Redis 7.0's ACL categories, in its order (ACL CAT, COMMAND INFO, and
/// the order the description tries them in).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Every command and subcommand, numbered.
struct Universe {
    /// The index is the command's ACL id: each command, then its
    /// subcommands.
    specs: Vec<&'static CommandSpec>,
    /// Spec address → id.
    ids: HashMap<usize, usize, foldhash::fast::RandomState>,
    /// Lower-case full name (`get`, `config|get`) → id.
    by_name: HashMap<&'static str, usize>,
    /// Category bits (1 << index in CATEGORIES) of each id.
    categories: Vec<u32>,
    /// Subcommand ids of each id.
    children: Vec<Vec<usize>>,
    /// Is the id a subcommand?
    is_sub: Vec<bool>,
    /// Top-level ids, in table order.
    top: Vec<usize>,
}

fn universe() -> &'static Universe {
    static U: OnceLock<Universe> = OnceLock::new();
    U.get_or_init(|| {
        let mut u = Universe {
            specs: Vec::new(),
            ids: HashMap::default(),
            by_name: HashMap::new(),
            categories: Vec::new(),
            children: Vec::new(),
            is_sub: Vec::new(),
            top: Vec::new(),
        };
        let add = |u: &mut Universe, spec: &'static CommandSpec, sub: bool| -> usize {
            let id = u.specs.len();
            u.specs.push(spec);
            u.ids.insert(spec as *const CommandSpec as usize, id);
            u.by_name.insert(spec.name, id);
            let cats = spec.meta.acl_categories.iter().fold(0u32, |m, c| {
                m | CATEGORIES
                    .iter()
                    .position(|k| k.eq_ignore_ascii_case(c))
                    .map_or(0, |i| 1 << i)
            });
            u.categories.push(cats);
            u.children.push(Vec::new());
            u.is_sub.push(sub);
            id
        };
        for spec in COMMANDS {
            let id = add(&mut u, spec, false);
            u.top.push(id);
            for sub in spec.subcommands {
                let sid = add(&mut u, sub, true);
                u.children[id].push(sid);
            }
        }
        assert!(
            u.specs.len() < crate::state::acl::FUTURE_COMMANDS_BIT,
            "more commands than ACL command bits"
        );
        u
    })
}

/// The ACL id of a command of the table.
pub fn command_id(cmd: &'static CommandSpec) -> Option<usize> {
    universe()
        .ids
        .get(&(cmd as *const CommandSpec as usize))
        .copied()
}

/// A command by its full name (`get`, `config|get`), as ACL rules name it.
fn lookup_by_name(name: &[u8]) -> Option<usize> {
    let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    universe().by_name.get(lower.as_str()).copied()
}

fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

// ---- rules ----

/// Why a rule was refused (Redis's errno values in ACLSetUser).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RuleError {
    Syntax,
    UnknownName,
    KeyAfterAllKeys,
    ChannelAfterAllChannels,
    NoSuchPassword,
    BadHash,
    DuplicateUser,
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis's ACLSetUserStringError.
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownName => "Unknown command or category name in ACL",
            RuleError::KeyAfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::DuplicateUser => {
                "Duplicate user found. A user can only be defined once in config files"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
        }
    }
}

/// Allow or deny command `id`, and its subcommands with it (Redis's
/// ACLChangeSelectorPerm).
fn change_perm(sel: &mut Selector, id: usize, allow: bool) {
    sel.set_command_bit(id, allow);
    sel.first_args.remove(&id);
    for &sub in &universe().children[id] {
        sel.set_command_bit(sub, allow);
    }
}

/// `+@category` / `-@category`: every command in it, and every
/// subcommand in it (Redis's ACLSetSelectorCommandBitsForCategory).
fn change_category(sel: &mut Selector, bit: u32, allow: bool) {
    let u = universe();
    for &id in &u.top {
        if u.categories[id] & bit != 0 {
            change_perm(sel, id, allow);
        }
        for &sub in &u.children[id] {
            if u.categories[sub] & bit != 0 {
                change_perm(sel, sub, allow);
            }
        }
    }
}

/// Does `s` hold a space or a NUL (not allowed in patterns and names)?
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b == 0 || b == b' ' || (b'\t'..=b'\r').contains(&b))
}

/// Apply one selector rule (Redis's ACLSetSelector).
pub fn apply_selector_rule(sel: &mut Selector, op: &[u8]) -> Result<(), RuleError> {
    if op.is_empty() {
        return Err(RuleError::Syntax);
    }
    let is = |kw: &str| op.eq_ignore_ascii_case(kw.as_bytes());
    if is("allkeys") || is("~*") {
        sel.all_keys = true;
        sel.patterns.clear();
    } else if is("resetkeys") {
        sel.all_keys = false;
        sel.patterns.clear();
    } else if is("allchannels") || is("&*") {
        sel.all_channels = true;
        sel.channels.clear();
    } else if is("resetchannels") {
        sel.all_channels = false;
        sel.channels.clear();
    } else if is("allcommands") || is("+@all") {
        sel.allow_all_commands();
    } else if is("nocommands") || is("-@all") {
        sel.deny_all_commands();
    } else if op[0] == b'~' || op[0] == b'%' {
        if sel.all_keys {
            return Err(RuleError::KeyAfterAllKeys);
        }
        let mut flags = 0;
        let mut offset = 1;
        if op[0] == b'%' {
            let mut ok = true;
            while offset < op.len() {
                let ch = op[offset].to_ascii_uppercase();
                if ch == b'R' && flags & KEY_READ == 0 {
                    flags |= KEY_READ;
                } else if ch == b'W' && flags & KEY_WRITE == 0 {
                    flags |= KEY_WRITE;
                } else if op[offset] == b'~' {
                    offset += 1;
                    break;
                } else {
                    ok = false;
                    break;
                }
                offset += 1;
            }
            if flags == 0 || !ok {
                return Err(RuleError::Syntax);
            }
        } else {
            flags = KEY_ALL;
        }
        let pattern = &op[offset.min(op.len())..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match sel.patterns.iter_mut().find(|p| p.pattern == pattern) {
            Some(p) => p.flags |= flags,
            None => sel.patterns.push(KeyPattern {
                pattern: pattern.to_vec(),
                flags,
            }),
        }
        sel.all_keys = false;
    } else if op[0] == b'&' {
        if sel.all_channels {
            return Err(RuleError::ChannelAfterAllChannels);
        }
        let pattern = &op[1..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        if !sel.channels.iter().any(|c| c == pattern) {
            sel.channels.push(pattern.to_vec());
        }
        sel.all_channels = false;
    } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
        let name = &op[1..];
        match name.iter().rposition(|&b| b == b'|') {
            None => {
                let id = lookup_by_name(name).ok_or(RuleError::UnknownName)?;
                change_perm(sel, id, true);
            }
            Some(bar) => {
                let (base, first_arg) = (&name[..bar], &name[bar + 1..]);
                let id = lookup_by_name(base).ok_or(RuleError::UnknownName)?;
                let u = universe();
                if u.is_sub[id] {
                    return Err(RuleError::FirstArgOfSubcommand);
                }
                if first_arg.is_empty() {
                    return Err(RuleError::Syntax);
                }
                if !u.children[id].is_empty() {
                    let sub = lookup_by_name(name).ok_or(RuleError::UnknownName)?;
                    change_perm(sel, sub, true);
                } else {
                    // SELECT except SELECT 0: a first argument of an
                    // otherwise denied command.
                    tracing::warn!(
                        "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
                        String::from_utf8_lossy(name)
                    );
                    let allowed = sel.first_args.entry(id).or_default();
                    if !allowed.iter().any(|a| a.eq_ignore_ascii_case(first_arg)) {
                        allowed.push(first_arg.to_vec());
                    }
                }
            }
        }
    } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
        let id = lookup_by_name(&op[1..]).ok_or(RuleError::UnknownName)?;
        change_perm(sel, id, false);
    } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
        let bit = category_bit(&op[2..]).ok_or(RuleError::UnknownName)?;
        change_category(sel, bit, op[0] == b'+');
    } else {
        return Err(RuleError::Syntax);
    }
    Ok(())
}

/// Apply one user rule (Redis's ACLSetUser); `pubsub_all` is
/// `acl-pubsub-default allchannels`.
pub fn apply_user_rule(user: &mut User, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
    let result = apply_user_rule_inner(user, op, pubsub_all);
    user.refresh();
    result
}

fn apply_user_rule_inner(user: &mut User, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
    if op.is_empty() {
        return Ok(());
    }
    let is = |kw: &str| op.eq_ignore_ascii_case(kw.as_bytes());
    if is("on") {
        user.enabled = true;
    } else if is("off") {
        user.enabled = false;
    } else if is("skip-sanitize-payload") {
        user.sanitize = Sanitize::Skip;
    } else if is("sanitize-payload") {
        user.sanitize = Sanitize::Sanitize;
    } else if is("nopass") {
        user.nopass = true;
        user.passwords.clear();
    } else if is("resetpass") {
        user.nopass = false;
        user.passwords.clear();
    } else if op[0] == b'>' || op[0] == b'#' {
        let hash = if op[0] == b'>' {
            hash_password(&op[1..])
        } else if is_password_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        if !user.passwords.contains(&hash) {
            user.passwords.push(hash);
        }
        user.nopass = false;
    } else if op[0] == b'<' || op[0] == b'!' {
        let hash = if op[0] == b'<' {
            hash_password(&op[1..])
        } else if is_password_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        let at = user
            .passwords
            .iter()
            .position(|p| *p == hash)
            .ok_or(RuleError::NoSuchPassword)?;
        user.passwords.remove(at);
    } else if op[0] == b'(' && op[op.len() - 1] == b')' {
        let mut sel = Selector::new(false, pubsub_all);
        let inner = &op[1..op.len() - 1];
        let ops = crate::protocol::parser::split_args(inner).ok_or(RuleError::Syntax)?;
        for o in &ops {
            apply_selector_rule(&mut sel, o)?;
        }
        user.selectors.push(sel);
    } else if is("clearselectors") {
        user.selectors.truncate(1);
    } else if is("reset") {
        user.nopass = false;
        user.passwords.clear();
        let root = user.root_mut();
        root.all_keys = false;
        root.patterns.clear();
        root.all_channels = pubsub_all;
        root.channels.clear();
        user.enabled = false;
        user.sanitize = Sanitize::Sanitize;
        user.selectors.truncate(1);
        user.root_mut().deny_all_commands();
    } else {
        apply_selector_rule(user.root_mut(), op)?;
    }
    Ok(())
}

/// Join selectors given over several arguments (`(~a` `+get)`) into one,
/// as Redis's ACLMergeSelectorArguments; `Err(i)` names the argument that
/// opens a selector never closed. An argument that opens one inside another
/// starts it again (`(` `(~a` `+get)` is `(~a +get)`), as there.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut merged = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, &op) in args.iter().enumerate() {
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
            continue;
        }
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                merged.push(open.take().map(|(_, s)| s).unwrap_or_default());
            }
            continue;
        }
        merged.push(op.to_vec());
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(merged),
    }
}

/// A user with `rules` applied on top of `base` (a copy of an existing
/// user, or a new one): all of them or none, with Redis's error text.
fn user_with_rules(base: User, rules: &[&[u8]], pubsub_all: bool) -> Result<User, String> {
    let merged = merge_selector_args(rules).map_err(|i| {
        format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(rules[i])
        )
    })?;
    let mut user = base;
    for op in &merged {
        apply_user_rule(&mut user, op, pubsub_all).map_err(|e| {
            format!(
                "Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(op),
                e.message()
            )
        })?;
    }
    Ok(user)
}

// ---- descriptions ----

/// Commands whose bit is on and off among those of category `bit`.
fn count_category(sel: &Selector, bit: u32) -> (usize, usize) {
    let u = universe();
    let (mut on, mut off) = (0, 0);
    for id in 0..u.specs.len() {
        if u.categories[id] & bit != 0 {
            if sel.command_bit(id) {
                on += 1;
            } else {
                off += 1;
            }
        }
    }
    (on, off)
}

/// The command rules that rebuild `sel`'s bitmap, starting with `+@all`
/// or `-@all` (Redis's ACLDescribeSelectorCommandRules).
pub fn describe_command_rules(sel: &Selector) -> Vec<u8> {
    let u = universe();
    let additive = !sel.can_run_future_commands();
    let mut rules = Vec::new();
    // Rules are applied to `fake` as they are emitted, so the remaining
    // differences are always known; `temp` tracks categories used up.
    let mut fake = Selector::new(false, false);
    if additive {
        rules.extend_from_slice(b"-@all ");
        fake.deny_all_commands();
    } else {
        rules.extend_from_slice(b"+@all ");
        fake.allow_all_commands();
    }
    let mut temp = Selector::new(false, false);
    temp.commands = sel.commands;
    let mut applied = [false; 32];
    loop {
        let mut best: Option<usize> = None;
        let (mut min_diff, mut max_same) = (usize::MAX, 0);
        for (j, _) in CATEGORIES.iter().enumerate() {
            if applied[j] {
                continue;
            }
            let (on, off) = count_category(&temp, 1 << j);
            let (diff, same) = if additive { (off, on) } else { (on, off) };
            if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                best = Some(j);
                min_diff = diff;
                max_same = same;
            }
        }
        let Some(j) = best else {
            break;
        };
        change_category(&mut fake, 1 << j, additive);
        change_category(&mut temp, 1 << j, !additive);
        rules.push(if additive { b'+' } else { b'-' });
        rules.push(b'@');
        rules.extend_from_slice(CATEGORIES[j].as_bytes());
        rules.push(b' ');
        applied[j] = true;
    }
    // Single commands where the categories still differ.
    for &id in &u.top {
        for id in std::iter::once(id).chain(u.children[id].iter().copied()) {
            let mine = sel.command_bit(id);
            if mine != fake.command_bit(id) {
                rules.push(if mine { b'+' } else { b'-' });
                rules.extend_from_slice(u.specs[id].name.as_bytes());
                rules.push(b' ');
                change_perm(&mut fake, id, mine);
            }
            if !mine {
                if let Some(args) = sel.first_args.get(&id) {
                    for a in args {
                        rules.push(b'+');
                        rules.extend_from_slice(u.specs[id].name.as_bytes());
                        rules.push(b'|');
                        rules.extend_from_slice(a);
                        rules.push(b' ');
                    }
                }
            }
        }
    }
    rules.pop();
    rules
}

/// A selector's keys, channels and commands as ACL LIST writes them.
fn describe_selector(sel: &Selector) -> Vec<u8> {
    let mut out = Vec::new();
    sel.describe_keys_and_channels(&mut out);
    out.extend_from_slice(&describe_command_rules(sel));
    out
}

/// The user as ACL LIST and ACL SAVE write it, after `user <name> `
/// (Redis's ACLDescribeUser).
pub fn describe_user(user: &User) -> Vec<u8> {
    let mut out = Vec::new();
    for f in user.flag_names() {
        out.extend_from_slice(f.as_bytes());
        out.push(b' ');
    }
    for p in &user.passwords {
        out.push(b'#');
        out.extend_from_slice(p.as_bytes());
        out.push(b' ');
    }
    for sel in &user.selectors {
        let d = describe_selector(sel);
        if sel.root {
            out.extend_from_slice(&d);
        } else {
            out.extend_from_slice(b" (");
            out.extend_from_slice(&d);
            out.push(b')');
        }
    }
    out
}

/// `user <name> <description>`.
fn user_line(user: &User) -> Vec<u8> {
    let mut line = b"user ".to_vec();
    line.extend_from_slice(&user.name);
    line.push(b' ');
    line.extend_from_slice(&describe_user(user));
    line
}

// ---- checks ----

/// The access a key spec's flags need (Redis's ACLSelectorCheckKey).
fn access_needed(flags: u32) -> u8 {
    let mut need = 0;
    if flags & KEY_ACCESS != 0 {
        need |= KEY_READ;
    }
    if flags & (KEY_INSERT | KEY_DELETE | KEY_UPDATE) != 0 {
        need |= KEY_WRITE;
    }
    need
}

/// The channel arguments of a pub/sub command that ACLs check: their
/// first position, whether all remaining arguments are channels, and
/// whether they are patterns (Redis's commands_with_channels, without
/// the unsubscribe commands, which are never refused).
fn channel_args(cmd: &CommandSpec) -> Option<(usize, bool, bool)> {
    match cmd.name {
        "publish" | "spublish" => Some((1, false, false)),
        "subscribe" | "ssubscribe" => Some((1, true, false)),
        "psubscribe" => Some((1, true, true)),
        _ => None,
    }
}

/// May `sel` run `cmd` with `argv`? `keys` caches the command's keys
/// between selectors.
fn check_selector(
    sel: &Selector,
    cmd: &'static CommandSpec,
    id: Option<usize>,
    argv: &[&[u8]],
    keys: &mut Option<Vec<meta::KeyRef>>,
) -> Result<(), (Denial, usize)> {
    if !sel.all_commands && cmd.flags & NO_AUTH == 0 {
        let allowed = id.is_some_and(|id| sel.command_bit(id));
        if !allowed {
            // Allowed with this first argument only?
            let pos = if cmd.name.contains('|') { 2 } else { 1 };
            let first = id.and_then(|id| sel.first_args.get(&id));
            let ok = match (first, argv.get(pos)) {
                (Some(list), Some(arg)) => list.iter().any(|a| a.eq_ignore_ascii_case(arg)),
                _ => false,
            };
            if !ok {
                return Err((Denial::Command, 0));
            }
        }
    }
    if !sel.all_keys && cmd.meta.has_keys() {
        let keys = keys.get_or_insert_with(|| meta::get_keys(cmd.meta, argv));
        // (Positions past the arguments: a short command from
        // redis.acl_check_cmd, which checks no arity.)
        for &(pos, flags) in keys.iter().filter(|&&(pos, _)| pos < argv.len()) {
            if !sel.check_key(argv[pos], access_needed(flags)) {
                return Err((Denial::Key, pos));
            }
        }
    }
    if !sel.all_channels {
        if let Some((first, all, is_pattern)) = channel_args(cmd) {
            let last = if all {
                argv.len()
            } else {
                (first + 1).min(argv.len())
            };
            for (pos, channel) in argv.iter().enumerate().take(last).skip(first) {
                if !channel_in_list(&sel.channels, channel, is_pattern) {
                    return Err((Denial::Channel, pos));
                }
            }
        }
    }
    Ok(())
}

/// May `user` run `cmd` with `argv`? On refusal, why, and the position of
/// the key or channel refused (Redis's ACLCheckAllUserCommandPerm: the
/// most relevant refusal among the selectors).
pub fn check_command(
    user: &User,
    cmd: &'static CommandSpec,
    argv: &[&[u8]],
) -> Result<(), (Denial, usize)> {
    if user.unrestricted {
        return Ok(());
    }
    let id = command_id(cmd);
    let mut keys = None;
    let mut relevant = (Denial::Command, 0);
    for sel in &user.selectors {
        match check_selector(sel, cmd, id, argv, &mut keys) {
            Ok(()) => return Ok(()),
            Err(e) => {
                if e.0 > relevant.0 || (e.0 == relevant.0 && e.1 > relevant.1) {
                    relevant = e;
                }
            }
        }
    }
    Err(relevant)
}

/// May `user` run `cmd` and, with the same selector, touch every key with
/// `need` (KEYS, SCAN: Redis's ACLUserCheckCmdWithUnrestrictedKeyAccess)?
pub fn may_touch_every_key(
    user: &User,
    cmd: &'static CommandSpec,
    argv: &[&[u8]],
    need: u8,
) -> bool {
    if user.unrestricted {
        return true;
    }
    let id = command_id(cmd);
    let mut keys = None;
    user.selectors.iter().any(|s| {
        check_selector(s, cmd, id, argv, &mut keys).is_ok() && s.has_unrestricted_key_access(need)
    })
}

/// The error a refused command gets (Redis's processCommand).
pub fn denial_error(denial: Denial, cmd: &CommandSpec) -> String {
    match denial {
        Denial::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            cmd.name
        ),
        Denial::Key => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denial::Channel => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
        Denial::Auth => "NOPERM no permission".into(),
    }
}

/// The reason EXEC gives for a queued command the rules now refuse.
pub fn exec_denial_error(denial: Denial) -> String {
    let reason = match denial {
        Denial::Command => "no permission to execute the command or subcommand",
        Denial::Key => "no permission to touch the specified keys",
        Denial::Channel => "no permission to access one of the channels used as arguments",
        Denial::Auth => "no permission",
    };
    format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}")
}

/// The message a script gets (Redis's getAclErrorMessage).
pub fn script_denial_error(denial: Denial) -> String {
    let what = match denial {
        Denial::Command => "can't run this command or subcommand",
        Denial::Key => "can't access at least one of the keys mentioned in the command arguments",
        Denial::Channel => "can't publish to the channel mentioned in the command",
        Denial::Auth => "lacking the permissions for the command",
    };
    format!("The user executing the script {what}")
}

/// Record a refusal in the ACL log. `object` is the command's full name,
/// the key or channel refused, or for auth the command that tried.
pub fn log_denial(
    srv: &mut Server,
    client_info: String,
    username: &[u8],
    reason: Denial,
    context: LogContext,
    object: &[u8],
) {
    let entry = LogEntry {
        count: 1,
        reason,
        context,
        object: object.to_vec(),
        username: username.to_vec(),
        ctime_ms: crate::util::unix_time_ms().max(0) as u64,
        client_info,
    };
    let max = srv.config.acllog_max_len.max(0) as usize;
    srv.acl.add_log(entry, max);
}

/// Check `client`'s permission to run `cmd`; on refusal log it (with
/// `context`) and return the refusal. The object logged is the command,
/// or the key or channel argument refused.
pub fn check_client(
    srv: &mut Server,
    client: &ClientState,
    cmd: &'static CommandSpec,
    argv: &[&[u8]],
    context: LogContext,
) -> Result<(), Denial> {
    check_user(srv, client.user, cmd, argv, context, || {
        client.info_line_running(argv)
    })
}

/// Check user `id`'s permission to run `cmd`: on refusal it is counted in
/// INFO and logged with `client_info` (made only then), the object being
/// the command, or the key or channel refused.
pub fn check_user(
    srv: &mut Server,
    id: UserId,
    cmd: &'static CommandSpec,
    argv: &[&[u8]],
    context: LogContext,
    client_info: impl FnOnce() -> String,
) -> Result<(), Denial> {
    if id == NO_USER {
        return Ok(());
    }
    let user = srv.acl.user(id);
    if user.unrestricted {
        return Ok(());
    }
    let Err((denial, pos)) = check_command(user, cmd, argv) else {
        return Ok(());
    };
    match denial {
        Denial::Command => srv.stats.acl_access_denied_cmd += 1,
        Denial::Key => srv.stats.acl_access_denied_key += 1,
        Denial::Channel => srv.stats.acl_access_denied_channel += 1,
        Denial::Auth => srv.stats.acl_access_denied_auth += 1,
    }
    let object = match denial {
        Denial::Command => cmd.name.as_bytes(),
        _ => argv.get(pos).copied().unwrap_or_default(),
    };
    let name = user.name.clone();
    log_denial(srv, client_info(), &name, denial, context, object);
    Err(denial)
}

// ---- authentication ----

/// Log `client` in as `user` with `password` (Redis's ACLAuthenticateUser):
/// true when it may; a failure is counted and logged.
pub fn authenticate(
    srv: &mut Server,
    client: &mut ClientState,
    user: &[u8],
    password: &[u8],
    command: &[u8],
) -> bool {
    if let Some(id) = srv.acl.check_credentials(user, password) {
        client.authenticated = true;
        set_client_user(client, id, &srv.acl.user(id).name);
        return true;
    }
    srv.stats.acl_access_denied_auth += 1;
    let context = if client.multi.is_some() {
        LogContext::Multi
    } else {
        LogContext::Toplevel
    };
    let info = client.info_line();
    log_denial(srv, info, user, Denial::Auth, context, command);
    false
}

/// Make `client` run as user `id`.
pub fn set_client_user(client: &mut ClientState, id: UserId, name: &[u8]) {
    client.user = id;
    if *client.user_name != *name {
        client.user_name = name.into();
    }
}

/// Close every client logged in as `user` (deleted, or replaced by ACL
/// LOAD); they fall back to the default user, unauthenticated, until
/// closed. The running client is closed after its reply (Redis's
/// ACLFreeUserAndKillClients).
fn kill_clients_of(srv: &mut Server, running: Option<&mut ClientState>, user: UserId) {
    let reset = |c: &mut ClientState| {
        c.user = DEFAULT_USER;
        c.user_name = b"default".as_slice().into();
        c.authenticated = false;
    };
    if let Some(running) = running.filter(|r| r.user == user) {
        reset(running);
        running.close_after_reply = true;
    }
    let mut doomed = Vec::new();
    for (slot, c) in srv.clients.iter_mut().enumerate() {
        if let Some(c) = c.as_deref_mut().filter(|c| c.user == user) {
            reset(c);
            c.close_asap = true;
            doomed.push((slot, c.id));
        }
    }
    srv.to_close.extend(doomed);
}

/// The user's pub/sub clients are closed when the new rules no longer
/// allow every channel they use (Redis's ACLKillPubsubClientsIfNeeded).
fn kill_pubsub_clients_if_needed(
    srv: &mut Server,
    running: &mut ClientState,
    id: UserId,
    new: &User,
) {
    if new.selectors.iter().any(|s| s.all_channels) {
        return;
    }
    let upcoming: Vec<Vec<u8>> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    let original = srv.acl.user(id);
    let superset = original
        .selectors
        .iter()
        .all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(c)));
    if superset {
        return;
    }
    let violates = |c: &ClientState| {
        c.user == id
            && (c
                .patterns
                .iter()
                .any(|p| !channel_in_list(&upcoming, p, true))
                || c.channels
                    .iter()
                    .chain(c.shard_channels.iter())
                    .any(|ch| !channel_in_list(&upcoming, ch, false)))
    };
    if violates(running) {
        running.close_after_reply = true;
    }
    let mut doomed = Vec::new();
    for (slot, c) in srv.clients.iter_mut().enumerate() {
        if let Some(c) = c.as_deref_mut().filter(|c| violates(c)) {
            c.close_asap = true;
            doomed.push((slot, c.id));
        }
    }
    srv.to_close.extend(doomed);
}

// ---- loading and saving ----

/// Users from `user` lines of the config, then the ACL file: at startup,
/// once the command table exists (Redis's ACLLoadUsersAtStartup).
pub fn load_users_at_startup(srv: &mut Server) -> Result<(), String> {
    let pass = srv.config.requirepass.clone();
    if let Some(d) = srv.acl.user_mut(DEFAULT_USER) {
        d.set_only_password(pass.as_bytes());
        d.refresh();
    }
    if !srv.config.aclfile.is_empty() && !srv.config.users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let pubsub_all = srv.config.acl_pubsub_default_all;
    let lines = srv.config.users.clone();
    let mut seen: Vec<&[u8]> = Vec::new();
    for line in &lines {
        let name = &line[0];
        if seen.contains(&name.as_slice()) {
            return Err(format!(
                "Error in user declaration '{}': {}",
                String::from_utf8_lossy(name),
                RuleError::DuplicateUser.message()
            ));
        }
        seen.push(name);
        if has_spaces(name) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let base = match srv.acl.find(name) {
            // `user default …` starts from a reset default user.
            Some(_) => {
                let mut d = User::new(b"default", pubsub_all);
                apply_user_rule(&mut d, b"reset", pubsub_all).ok();
                d
            }
            None => User::new(name, pubsub_all),
        };
        let rules: Vec<&[u8]> = line[1..].iter().map(|r| r.as_slice()).collect();
        let user = user_with_rules(base, &rules, pubsub_all).map_err(|e| {
            format!(
                "Error loading ACL rule for the user named '{}': {e}",
                String::from_utf8_lossy(name)
            )
        })?;
        if !user.enabled {
            tracing::info!("The user '{}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.", String::from_utf8_lossy(name));
        }
        put_user(srv, user);
    }
    if !srv.config.aclfile.is_empty() {
        let path = srv.config.aclfile.clone();
        let users = read_acl_file(&path, pubsub_all)?;
        replace_users(srv, None, users);
    }
    Ok(())
}

/// Store `user`, replacing the one of the same name.
fn put_user(srv: &mut Server, user: User) {
    match srv.acl.find(&user.name) {
        Some(id) => {
            if let Some(slot) = srv.acl.user_mut(id) {
                *slot = user;
            }
        }
        None => {
            srv.acl.insert(user);
        }
    }
}

/// Parse an ACL file into users (Redis's ACLLoadFromFile): every line
/// `user <name> <rules>`, blank lines allowed; any error refuses the
/// whole file, with every problem found in one line.
fn read_acl_file(path: &str, pubsub_all: bool) -> Result<Vec<User>, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            crate::config::os_error_text(&e)
        )
    })?;
    let mut errors = String::new();
    let mut users: Vec<User> = Vec::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let lineno = i + 1;
        let line = trim(raw, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let args: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|a| !a.is_empty())
            .collect();
        if args.is_empty() {
            continue;
        }
        if args[0] != b"user" || args.len() < 2 {
            errors.push_str(&format!(
                "{path}:{lineno} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = args[1];
        if has_spaces(name) {
            errors.push_str(&format!(
                "'{path}:{lineno}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if users.iter().any(|u| u.name == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {lineno}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let mut user = User::new(name, pubsub_all);
        let Ok(merged) = merge_selector_args(&args[2..]) else {
            errors.push_str(&format!(
                "{path}:{lineno}: Unmatched parenthesis in selector definition."
            ));
            continue;
        };
        let mut syntax_error = false;
        for op in &merged {
            let op = trim(op, b"\t\r\n");
            if let Err(e) = apply_user_rule(&mut user, op, pubsub_all) {
                if e == RuleError::UnknownName {
                    errors.push_str(&format!(
                        "{path}:{lineno}: Error in applying operation '{}': {}. ",
                        String::from_utf8_lossy(op),
                        e.message()
                    ));
                } else if !syntax_error {
                    errors.push_str(&format!("{path}:{lineno}: {}. ", e.message()));
                    syntax_error = true;
                }
            }
        }
        users.push(user);
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

fn trim<'a>(mut s: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let [first, rest @ ..] = s {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s
}

/// Replace every user with `users` (ACL LOAD): the clients of the old
/// users are closed; `default` is kept (or made as Redis makes it) and
/// its clients stay.
fn replace_users(srv: &mut Server, mut running: Option<&mut ClientState>, users: Vec<User>) {
    let old: Vec<UserId> = srv
        .acl
        .users()
        .map(|(id, _)| id)
        .filter(|&id| id != DEFAULT_USER)
        .collect();
    for id in old {
        kill_clients_of(srv, running.as_deref_mut(), id);
        let name = srv.acl.user(id).name.clone();
        srv.acl.remove(&name);
    }
    let mut default = User::new_default();
    for user in users {
        if user.name == b"default" {
            default = user;
        } else {
            srv.acl.insert(user);
        }
    }
    if let Some(d) = srv.acl.user_mut(DEFAULT_USER) {
        *d = default;
        d.refresh();
    }
}

/// Write every user to the ACL file, through a temporary file renamed
/// over it (Redis's ACLSaveToFile).
fn save_acl_file(srv: &Server, path: &str) -> std::io::Result<()> {
    let mut text = Vec::new();
    for (_, user) in srv.acl.users() {
        text.extend_from_slice(&user_line(user));
        text.push(b'\n');
    }
    let tmp = format!(
        "{path}.tmp-{}-{}",
        std::process::id(),
        crate::util::unix_time_ms()
    );
    let result = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The `user` lines CONFIG REWRITE writes when there is no ACL file.
pub fn config_user_lines(srv: &Server) -> Vec<Vec<u8>> {
    srv.acl.users().map(|(_, u)| user_line(u)).collect()
}

// ---- the ACL command ----

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

const GENPASS_MAX_BITS: i64 = 4096;

/// `ACL <subcommand> …`
pub fn acl(c: &mut Ctx, argv: &[&[u8]]) {
    match subcommand(c) {
        "setuser" => acl_setuser(c, argv),
        "deluser" => acl_deluser(c, argv),
        "getuser" => acl_getuser(c, argv),
        "list" | "users" => {
            let just_names = subcommand(c) == "users";
            let lines: Vec<Vec<u8>> = c
                .srv
                .acl
                .users()
                .map(|(_, u)| {
                    if just_names {
                        u.name.clone()
                    } else {
                        user_line(u)
                    }
                })
                .collect();
            c.cl.reply.array(lines.len());
            for l in &lines {
                c.cl.reply.bulk(l);
            }
        }
        "whoami" => {
            let name = c.cl.user_name.clone();
            c.cl.reply.bulk(&name);
        }
        "load" | "save" if c.srv.config.aclfile.is_empty() => c.cl.reply.error("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."),
        "load" => {
            let path = c.srv.config.aclfile.clone();
            match read_acl_file(&path, c.srv.config.acl_pubsub_default_all) {
                Ok(users) => {
                    replace_users(c.srv, Some(c.cl), users);
                    let id = c.cl.user;
                    let name = c.srv.acl.user(id).name.clone();
                    set_client_user(c.cl, id, &name);
                    c.cl.reply.ok();
                }
                Err(e) => c.cl.reply.error(&format!("ERR {e}")),
            }
        }
        "save" => {
            let path = c.srv.config.aclfile.clone();
            match save_acl_file(c.srv, &path) {
                Ok(()) => c.cl.reply.ok(),
                Err(e) => {
                    tracing::warn!("Saving the ACL file for ACL SAVE: {e}");
                    c.cl.reply.error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
                }
            }
        }
        "cat" => acl_cat(c, argv),
        "genpass" if argv.len() > 3 => subcommand_syntax_error(c, argv, "ACL"),
        "genpass" => {
            let bits = match argv.get(2) {
                None => 256,
                Some(a) => match parse_i64(a) {
                    Some(b) => b,
                    None => return c.cl.reply.error(ERR_NOT_INT),
                },
            };
            if bits <= 0 || bits > GENPASS_MAX_BITS {
                return c.cl.reply.error(&format!("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_MAX_BITS}"));
            }
            let chars = ((bits + 3) / 4) as usize;
            c.cl.reply.bulk(crate::util::random_hex(chars).as_bytes());
        }
        "log" => acl_log(c, argv),
        "dryrun" => acl_dryrun(c, argv),
        "help" => reply_help(c, ACL_HELP),
        _ => subcommand_syntax_error(c, argv, "ACL"),
    }
}

/// `ACL SETUSER username [rule …]`
fn acl_setuser(c: &mut Ctx, argv: &[&[u8]]) {
    let name = argv[2];
    if has_spaces(name) {
        return c
            .cl
            .reply
            .error("ERR Usernames can't contain spaces or null characters");
    }
    let pubsub_all = c.srv.config.acl_pubsub_default_all;
    let existing = c.srv.acl.find(name);
    let base = match existing {
        Some(id) => c.srv.acl.user(id).clone(),
        None => User::new(name, pubsub_all),
    };
    let user = match user_with_rules(base, &argv[3..], pubsub_all) {
        Ok(u) => u,
        Err(e) => return c.cl.reply.error(&format!("ERR {e}")),
    };
    if let Some(id) = existing {
        kill_pubsub_clients_if_needed(c.srv, c.cl, id, &user);
    }
    put_user(c.srv, user);
    c.cl.reply.ok();
}

/// `ACL DELUSER username [username …]`
fn acl_deluser(c: &mut Ctx, argv: &[&[u8]]) {
    if argv[2..].iter().any(|n| *n == b"default") {
        return c.cl.reply.error("ERR The 'default' user cannot be removed");
    }
    let mut deleted = 0;
    for name in &argv[2..] {
        if let Some(id) = c.srv.acl.find(name) {
            kill_clients_of(c.srv, Some(c.cl), id);
            c.srv.acl.remove(name);
            deleted += 1;
        }
    }
    c.cl.reply.int(deleted);
}

/// One selector's `commands`, `keys`, `channels` fields of ACL GETUSER.
fn reply_selector(c: &mut Ctx, sel: &Selector) {
    let out = &mut c.cl.reply;
    out.bulk(b"commands");
    out.bulk(&describe_command_rules(sel));
    out.bulk(b"keys");
    out.bulk(&sel.keys_text());
    out.bulk(b"channels");
    out.bulk(&sel.channels_text());
}

/// `ACL GETUSER username`
fn acl_getuser(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(id) = c.srv.acl.find(argv[2]) else {
        return c.cl.reply.null();
    };
    let user = c.srv.acl.user(id).clone();
    c.cl.reply.map(6);
    c.cl.reply.bulk(b"flags");
    let flags = user.flag_names();
    c.cl.reply.set(flags.len());
    for f in flags {
        c.cl.reply.bulk(f.as_bytes());
    }
    c.cl.reply.bulk(b"passwords");
    c.cl.reply.array(user.passwords.len());
    for p in &user.passwords {
        c.cl.reply.bulk(p.as_bytes());
    }
    reply_selector(c, user.root());
    c.cl.reply.bulk(b"selectors");
    c.cl.reply.array(user.selectors.len() - 1);
    for sel in &user.selectors[1..] {
        c.cl.reply.map(3);
        reply_selector(c, sel);
    }
}

/// `ACL CAT [category]`
fn acl_cat(c: &mut Ctx, argv: &[&[u8]]) {
    match argv.len() {
        2 => {
            c.cl.reply.array(CATEGORIES.len());
            for cat in CATEGORIES {
                c.cl.reply.bulk(cat.as_bytes());
            }
        }
        3 => {
            let Some(bit) = category_bit(argv[2]) else {
                let name = &argv[2][..argv[2].len().min(128)];
                return c.cl.reply.error(&format!(
                    "ERR Unknown category '{}'",
                    String::from_utf8_lossy(name)
                ));
            };
            let u = universe();
            let names: Vec<&str> = (0..u.specs.len())
                .filter(|&id| u.categories[id] & bit != 0)
                .map(|id| u.specs[id].name)
                .collect();
            c.cl.reply.array(names.len());
            for n in names {
                c.cl.reply.bulk(n.as_bytes());
            }
        }
        _ => subcommand_syntax_error(c, argv, "ACL"),
    }
}

/// `ACL LOG [count | RESET]`
fn acl_log(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 3 {
        return subcommand_syntax_error(c, argv, "ACL");
    }
    let mut count = 10i64;
    if let Some(a) = argv.get(2) {
        if eq_ic(a, "reset") {
            c.srv.acl.log.clear();
            return c.cl.reply.ok();
        }
        match parse_i64(a) {
            Some(n) => count = n.max(0),
            None => return c.cl.reply.error(ERR_NOT_INT),
        }
    }
    let now = crate::util::unix_time_ms().max(0) as u64;
    let n = (count as usize).min(c.srv.acl.log.len());
    let out = &mut c.cl.reply;
    out.array(n);
    for e in c.srv.acl.log.iter().take(n) {
        out.map(7);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.name().as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.name().as_bytes());
        out.bulk(b"object");
        out.bulk(&e.object);
        out.bulk(b"username");
        out.bulk(&e.username);
        out.bulk(b"age-seconds");
        out.double(now.saturating_sub(e.ctime_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
    }
}

/// `ACL DRYRUN username command [arg …]`
fn acl_dryrun(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(id) = c.srv.acl.find(argv[2]) else {
        return c.cl.reply.error(&format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(argv[2])
        ));
    };
    let args = &argv[3..];
    let Some(cmd) = lookup_command(args[0]).and_then(|b| b.resolve(args).ok()) else {
        return c.cl.reply.error(&format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(args[0])
        ));
    };
    let argc = args.len() as i32;
    if (cmd.arity > 0 && cmd.arity != argc) || argc < -cmd.arity {
        return c.cl.reply.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            cmd.name
        ));
    }
    match check_command(c.srv.acl.user(id), cmd, args) {
        Ok(()) => c.cl.reply.ok(),
        Err((denial, pos)) => {
            let what = String::from_utf8_lossy(args.get(pos).copied().unwrap_or_default());
            let text = match denial {
                Denial::Key => format!("This user has no permissions to access the '{what}' key"),
                Denial::Channel => {
                    format!("This user has no permissions to access the '{what}' channel")
                }
                _ => format!(
                    "This user has no permissions to run the '{}' command",
                    cmd.name
                ),
            };
            c.cl.reply.bulk(text.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_from(rules: &[&str]) -> User {
        let rules: Vec<&[u8]> = rules.iter().map(|r| r.as_bytes()).collect();
        user_with_rules(User::new(b"u", false), &rules, false).expect("valid rules")
    }

    fn commands_of(rules: &[&str]) -> String {
        String::from_utf8(describe_command_rules(user_from(rules).root())).unwrap()
    }

    #[test]
    fn every_category_reads_back_as_written() {
        for cat in CATEGORIES {
            assert_eq!(
                commands_of(&["reset", "+@all", &format!("-@{cat}")]),
                format!("+@all -@{cat}")
            );
            assert_eq!(
                commands_of(&["reset", "-@all", &format!("+@{cat}")]),
                format!("-@all +@{cat}")
            );
        }
    }

    #[test]
    fn subcommand_rules_read_back() {
        assert_eq!(commands_of(&["+memory|doctor"]), "-@all +memory|doctor");
        assert_eq!(commands_of(&["+memory|doctor", "+memory"]), "-@all +memory");
        assert_eq!(commands_of(&["+@all", "+client|id"]), "+@all");
        assert_eq!(
            commands_of(&["+@all", "-memory|doctor"]),
            "+@all -memory|doctor"
        );
        assert_eq!(commands_of(&["-@all", "+select|0"]), "-@all +select|0");
    }

    #[test]
    fn rule_errors_are_redis_s() {
        let mut u = User::new(b"u", false);
        let mut apply = |op: &str| apply_user_rule(&mut u, op.as_bytes(), false);
        assert_eq!(apply("+nosuchcommand"), Err(RuleError::UnknownName));
        assert_eq!(apply("+@nosuchcat"), Err(RuleError::UnknownName));
        assert_eq!(
            apply("+config|get|appendonly"),
            Err(RuleError::FirstArgOfSubcommand)
        );
        assert_eq!(apply("+config|asdf"), Err(RuleError::UnknownName));
        assert_eq!(apply("+get|key1|key2"), Err(RuleError::UnknownName));
        assert_eq!(apply("-select|0"), Err(RuleError::UnknownName));
        assert_eq!(apply("%"), Err(RuleError::Syntax));
        assert_eq!(apply("%~"), Err(RuleError::Syntax));
        assert_eq!(apply("%X~a"), Err(RuleError::Syntax));
        assert_eq!(apply("#abc"), Err(RuleError::BadHash));
        assert_eq!(apply("<nope"), Err(RuleError::NoSuchPassword));
        assert_eq!(apply("bogus"), Err(RuleError::Syntax));
        assert_eq!(apply("allkeys"), Ok(()));
        assert_eq!(apply("~foo"), Err(RuleError::KeyAfterAllKeys));
        assert_eq!(apply("allchannels"), Ok(()));
        assert_eq!(apply("&foo"), Err(RuleError::ChannelAfterAllChannels));
    }

    #[test]
    fn malformed_input_is_refused_not_a_panic() {
        let mut u = User::new(b"u", false);
        for op in [
            "(\"\")", "( )", "(", ")", "+", "-", "%", "~", "&", "+|", "+get|", "+@", "-@",
        ] {
            let _ = apply_user_rule(&mut u, op.as_bytes(), false);
        }
        assert_eq!(
            apply_user_rule(&mut u, b"(\"\")", false),
            Err(RuleError::Syntax)
        );
        let restricted = user_from(&["+@all", "~foo*"]);
        for name in ["set", "sort", "sort_ro", "bitfield", "get", "migrate"] {
            let cmd = lookup_command(name.as_bytes()).unwrap();
            let _ = check_command(&restricted, cmd, &[name.as_bytes()]);
        }
    }

    #[test]
    fn selectors_may_span_arguments() {
        let args: Vec<&[u8]> = vec![b"on", b"(~a", b"+get", b")", b"(~b +set)"];
        assert_eq!(
            merge_selector_args(&args).unwrap(),
            vec![
                b"on".to_vec(),
                b"(~a +get )".to_vec(),
                b"(~b +set)".to_vec()
            ]
        );
        assert_eq!(merge_selector_args(&[b"(" as &[u8]]), Err(0));
        // A selector opened inside another starts it again.
        let args: Vec<&[u8]> = vec![b"(", b"(~a", b"+get)", b"(~b"];
        assert_eq!(merge_selector_args(&args), Err(3));
        assert_eq!(
            merge_selector_args(&args[..3]).unwrap(),
            vec![b"(~a +get)".to_vec()]
        );
    }

    #[test]
    fn a_user_is_described_as_acl_list_writes_it() {
        let u = user_from(&["on", ">p", "~k*", "%R~r*", "&ch", "+get", "(+set ~s*)"]);
        assert_eq!(
            String::from_utf8(describe_user(&u)).unwrap(),
            format!(
                "on #{} ~k* %R~r* resetchannels &ch -@all +get (~s* resetchannels -@all +set)",
                hash_password(b"p")
            )
        );
        let d = User::new_default();
        assert_eq!(
            String::from_utf8(describe_user(&d)).unwrap(),
            "on nopass ~* &* +@all"
        );
    }

    #[test]
    fn keys_are_checked_with_the_access_the_command_needs() {
        let get = lookup_command(b"get").unwrap();
        let set = lookup_command(b"set").unwrap();
        let u = user_from(&["+@all", "%R~r*", "%W~w*"]);
        assert_eq!(check_command(&u, get, &[b"get", b"r1"]), Ok(()));
        assert_eq!(
            check_command(&u, get, &[b"get", b"w1"]),
            Err((Denial::Key, 1))
        );
        assert_eq!(check_command(&u, set, &[b"set", b"w1", b"v"]), Ok(()));
        assert_eq!(
            check_command(&u, set, &[b"set", b"r1", b"v"]),
            Err((Denial::Key, 1))
        );
        let ping = lookup_command(b"ping").unwrap();
        let none = user_from(&[]);
        assert_eq!(
            check_command(&none, ping, &[b"ping"]),
            Err((Denial::Command, 0))
        );
    }
}

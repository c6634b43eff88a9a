//! What Redis 7.0 says about each command: arity, flags, ACL categories, key
//! specs, arguments, history and tips, generated from Redis's own
//! `src/commands/*.json` (`scripts/gen-command-meta.py`, into `redis70.rs`).
//!
//! The command table (`table.rs`) pairs a handler with one of these, so the
//! dispatcher's arity and flag checks, COMMAND INFO / DOCS and COMMAND
//! GETKEYS all read the same description Redis reads, and a command that is
//! added later gets Redis's metadata by naming it. Key extraction follows
//! Redis's getKeysFromCommandWithSpecs: the key specs first, and for the
//! few commands whose specs are incomplete or whose flags depend on the
//! arguments, the same special cases Redis has (its `*GetKeys` functions).

#[rustfmt::skip]
mod redis70;
pub use redis70::*;

/// A command or subcommand as Redis's JSON describes it.
pub struct CommandMeta {
    /// Lower-case full name: `get`, or `config|get` for a subcommand.
    pub name: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    /// COMMAND DOCS's group (`sorted-set`, `generic`, …).
    pub group: &'static str,
    pub complexity: Option<&'static str>,
    /// `deprecated`, `syscmd`.
    pub doc_flags: &'static [&'static str],
    pub deprecated_since: Option<&'static str>,
    pub replaced_by: Option<&'static str>,
    /// (version, change) pairs; `None` where Redis has no history table.
    pub history: Option<&'static [(&'static str, &'static str)]>,
    pub tips: &'static [&'static str],
    /// Argument count including the name; negative means "at least".
    pub arity: i32,
    /// Command flags (the constants in `commands`), movablekeys included.
    pub flags: u32,
    /// ACL categories without the `@`, implicit ones included, in Redis's
    /// order.
    pub acl_categories: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
    /// COMMAND INFO's first key, last key and step.
    pub legacy_range: (i32, i32, i32),
    /// Redis has a `*GetKeys` function for it (see [`get_keys`]).
    pub getkeys_function: bool,
    pub arguments: Option<&'static [Arg]>,
    pub subcommands: &'static [&'static CommandMeta],
}

/// Where a command's keys are, and what it does to them.
pub struct KeySpec {
    pub notes: Option<&'static str>,
    /// `KEY_*` bits.
    pub flags: u32,
    pub begin_search: BeginSearch,
    pub find_keys: FindKeys,
}

pub enum BeginSearch {
    /// The first key is at this argument index.
    Index(i32),
    /// The first key follows `keyword`, searched from `startfrom` (from
    /// the end when negative).
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
    Unknown,
}

pub enum FindKeys {
    /// Keys from the first to `lastkey` (relative to the first; negative
    /// counts from the end), every `step`; `limit` divides what is left.
    Range {
        lastkey: i32,
        step: i32,
        limit: i32,
    },
    /// The argument at `keynumidx` (relative to the first) counts the keys,
    /// which start at `firstkey` (relative to the first).
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        step: i32,
    },
    Unknown,
}

/// One argument of COMMAND DOCS.
pub struct Arg {
    pub name: &'static str,
    /// `string`, `integer`, `double`, `key`, `pattern`, `unix-time`,
    /// `pure-token`, `oneof`, `block`.
    pub kind: &'static str,
    /// -1 when the argument is not a key.
    pub key_spec_index: i32,
    pub token: Option<&'static str>,
    pub since: Option<&'static str>,
    pub deprecated_since: Option<&'static str>,
    /// `optional`, `multiple`, `multiple_token`.
    pub flags: &'static [&'static str],
    /// The parts of a `oneof` or `block`.
    pub arguments: &'static [Arg],
}

// Key spec flags (Redis's CMD_KEY_*), in the order COMMAND prints them.
pub const KEY_RO: u32 = 1 << 0;
pub const KEY_RW: u32 = 1 << 1;
pub const KEY_OW: u32 = 1 << 2;
pub const KEY_RM: u32 = 1 << 3;
pub const KEY_ACCESS: u32 = 1 << 4;
pub const KEY_UPDATE: u32 = 1 << 5;
pub const KEY_INSERT: u32 = 1 << 6;
pub const KEY_DELETE: u32 = 1 << 7;
pub const KEY_NOT_KEY: u32 = 1 << 8;
pub const KEY_INCOMPLETE: u32 = 1 << 9;
pub const KEY_VARIABLE_FLAGS: u32 = 1 << 10;

pub const KEY_FLAG_NAMES: &[(u32, &str)] = &[
    (KEY_RO, "RO"),
    (KEY_RW, "RW"),
    (KEY_OW, "OW"),
    (KEY_RM, "RM"),
    (KEY_ACCESS, "access"),
    (KEY_UPDATE, "update"),
    (KEY_INSERT, "insert"),
    (KEY_DELETE, "delete"),
    (KEY_NOT_KEY, "not_key"),
    (KEY_INCOMPLETE, "incomplete"),
    (KEY_VARIABLE_FLAGS, "variable_flags"),
];

impl CommandMeta {
    /// The subcommand called `name` (case-insensitive), if Redis has one.
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static CommandMeta> {
        let base = self.name.len() + 1;
        self.subcommands
            .iter()
            .copied()
            .find(|s| s.name.as_bytes()[base..].eq_ignore_ascii_case(name))
    }

    /// Does the command take keys at all (Redis's doesCommandHaveKeys)?
    pub fn has_keys(&self) -> bool {
        self.getkeys_function || self.key_specs.iter().any(|s| s.flags & KEY_NOT_KEY == 0)
    }
}

/// A key argument: its position in argv and its `KEY_*` flags.
pub type KeyRef = (usize, u32);

/// The keys of `argv` (argv[0] is the command name), as Redis's
/// getKeysFromCommandWithSpecs finds them; none when the arguments do not
/// hold together (a bad numkeys, a key past the end).
pub fn get_keys(meta: &CommandMeta, argv: &[&[u8]]) -> Vec<KeyRef> {
    let variable = meta
        .key_specs
        .iter()
        .any(|s| s.flags & KEY_VARIABLE_FLAGS != 0);
    if meta.key_specs.iter().any(|s| s.flags & KEY_NOT_KEY == 0) && !variable {
        if let Some(keys) = keys_from_specs(meta, argv) {
            return keys;
        }
    }
    match meta.name {
        "set" => set_keys(argv),
        "sort" => sort_keys(argv),
        "sort_ro" => vec![(1, KEY_RO | KEY_ACCESS)],
        "bitfield" => bitfield_keys(argv),
        "migrate" => migrate_keys(argv),
        // Where the specs failed on a numkeys string2ll refuses, Redis's
        // other getkeys functions read it again with atoi (so "1.5" is 1).
        _ if meta.getkeys_function => counted_keys(meta, argv),
        _ => Vec::new(),
    }
}

/// Redis's genericGetKeys, at the positions the key specs name: the
/// count (read with atoi) at the keynum spec's `keynumidx`, that many keys
/// from its `firstkey` on, then a destination key (an index spec of one
/// key), all without flags; none when the count is below 1 or past the
/// arguments, or the command counts no keys.
fn counted_keys(meta: &CommandMeta, argv: &[&[u8]]) -> Vec<KeyRef> {
    let (mut counted, mut store) = (None, None);
    for spec in meta.key_specs {
        match (&spec.begin_search, &spec.find_keys) {
            (
                BeginSearch::Index(pos),
                FindKeys::Keynum {
                    keynumidx,
                    firstkey,
                    ..
                },
            ) => {
                counted = Some(((pos + keynumidx) as usize, (pos + firstkey) as usize));
            }
            (BeginSearch::Index(pos), FindKeys::Range { lastkey: 0, .. }) => {
                store = Some(*pos as usize);
            }
            _ => {}
        }
    }
    let Some((count_at, first)) = counted else {
        return Vec::new();
    };
    let Some(&count) = argv.get(count_at) else {
        return Vec::new();
    };
    let num = crate::util::c_atoi(count) as i64;
    if num < 1 || num > argv.len() as i64 - first as i64 {
        return Vec::new();
    }
    let mut keys: Vec<KeyRef> = (first..first + num as usize).map(|i| (i, 0)).collect();
    keys.extend(store.map(|i| (i, 0)));
    keys
}

/// Redis's getKeysUsingKeySpecs without GET_KEYSPEC_RETURN_PARTIAL.
fn keys_from_specs(meta: &CommandMeta, argv: &[&[u8]]) -> Option<Vec<KeyRef>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in meta.key_specs {
        if spec.flags & KEY_NOT_KEY != 0 {
            continue;
        }
        let mut first = match spec.begin_search {
            BeginSearch::Index(pos) => pos as i64,
            BeginSearch::Keyword { keyword, startfrom } => {
                let from = startfrom as i64;
                // As Redis: the last argument (searching forward) or the
                // first (backward) is never the keyword.
                let is_keyword =
                    |&i: &i64| argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes());
                let found = if from > 0 {
                    (from..argc - 1).find(is_keyword)
                } else {
                    (2..=argc + from).rev().find(is_keyword)
                };
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            BeginSearch::Unknown => return None,
        };
        let (last, step) = match spec.find_keys {
            FindKeys::Range {
                lastkey,
                step,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit == 0 {
                    argc + lastkey as i64
                } else {
                    first + ((argc - first) / limit as i64 + lastkey as i64)
                };
                (last, step as i64)
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                step,
            } => {
                let at = first + keynumidx as i64;
                let numkeys = argv
                    .get(at as usize)
                    .and_then(|a| crate::util::parse_i64(a))
                    .filter(|&n| n >= 0)?;
                // Redis counts in an int: 2^32 + 1 is one key, 2^31 none.
                let numkeys = numkeys as i32 as i64;
                first += firstkey as i64;
                (first + numkeys - 1, step as i64)
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            keys.push((i as usize, spec.flags));
            i += step.max(1);
        }
        if spec.flags & KEY_INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// BITFIELD only reads its key when every operation is a GET (Redis's
/// bitfieldGetKeys).
fn bitfield_keys(argv: &[&[u8]]) -> Vec<KeyRef> {
    let mut readonly = true;
    let mut i = 2;
    while i < argv.len() {
        let rest = argv.len() - i - 1;
        let a = argv[i];
        if a.eq_ignore_ascii_case(b"get") && rest >= 2 {
            i += 3;
        } else if (a.eq_ignore_ascii_case(b"set") || a.eq_ignore_ascii_case(b"incrby")) && rest >= 3
        {
            readonly = false;
            break;
        } else if a.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
            i += 2;
        } else {
            // A syntax error: assume it writes.
            readonly = false;
            break;
        }
    }
    let flags = if readonly {
        KEY_RO | KEY_ACCESS
    } else {
        KEY_RW | KEY_ACCESS | KEY_UPDATE
    };
    vec![(1, flags)]
}

/// MIGRATE's key, or with an empty key the keys after KEYS (Redis's
/// migrateGetKeys).
fn migrate_keys(argv: &[&[u8]]) -> Vec<KeyRef> {
    if argv.len() < 4 {
        return Vec::new();
    }
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < argv.len() {
        let a = argv[i];
        if a.eq_ignore_ascii_case(b"keys") {
            if argv[3].is_empty() {
                first = i + 1;
                num = argv.len() - first;
            } else {
                // A syntax error MIGRATE reports itself.
                num = 0;
            }
            break;
        }
        if a.eq_ignore_ascii_case(b"auth") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") {
            i += 2;
        }
        i += 1;
    }
    (first..first + num)
        .map(|p| (p, KEY_RW | KEY_ACCESS | KEY_DELETE))
        .collect()
}

/// SET's key is read as well as written with GET (Redis's setGetKeys).
fn set_keys(argv: &[&[u8]]) -> Vec<KeyRef> {
    let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
    let flags = if get {
        KEY_RW | KEY_ACCESS | KEY_UPDATE
    } else {
        KEY_OW | KEY_UPDATE
    };
    vec![(1, flags)]
}

/// SORT's key, and the last STORE destination (Redis's sortGetKeys, which
/// skips the arguments of LIMIT, GET and BY).
fn sort_keys(argv: &[&[u8]]) -> Vec<KeyRef> {
    let mut keys = vec![(1, KEY_RO | KEY_ACCESS)];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let a = argv[i];
        if a.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    if let Some(pos) = store {
        keys.push((pos, KEY_OW | KEY_UPDATE));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(meta: &CommandMeta, args: &[&str]) -> Vec<usize> {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        get_keys(meta, &argv).into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn range_specs_give_every_key() {
        assert_eq!(keys(&MSET, &["mset", "a", "1", "b", "2"]), vec![1, 3]);
        assert_eq!(keys(&BLPOP, &["blpop", "a", "b", "0"]), vec![1, 2]);
        assert_eq!(
            keys(&LMOVE, &["lmove", "a", "b", "left", "right"]),
            vec![1, 2]
        );
    }

    #[test]
    fn keynum_specs_count_their_keys() {
        let z = &["zunionstore", "d", "2", "a", "b", "weights", "1", "2"];
        assert_eq!(keys(&ZUNIONSTORE, z), vec![1, 3, 4]);
        assert_eq!(keys(&LMPOP, &["lmpop", "2", "a", "b", "left"]), vec![2, 3]);
        assert!(keys(&ZUNIONSTORE, &["zunionstore", "d", "x", "a"]).is_empty());
        assert!(keys(&ZUNIONSTORE, &["zunionstore", "d", "5", "a"]).is_empty());
    }

    #[test]
    fn sort_and_set_have_their_own_rules() {
        let s = &["sort", "k", "limit", "0", "1", "by", "store", "store", "d"];
        assert_eq!(keys(&SORT, s), vec![1, 8]);
        let argv: Vec<&[u8]> = vec![b"set", b"k", b"v", b"GET"];
        assert_eq!(
            get_keys(&SET, &argv),
            vec![(1, KEY_RW | KEY_ACCESS | KEY_UPDATE)]
        );
    }

    #[test]
    fn legacy_ranges_are_redis_s() {
        assert_eq!(GET.legacy_range, (1, 1, 1));
        assert_eq!(MSET.legacy_range, (1, -1, 2));
        assert_eq!(BLPOP.legacy_range, (1, -2, 1));
        assert_eq!(ZUNIONSTORE.legacy_range, (1, 1, 1));
        assert_ne!(ZUNIONSTORE.flags & crate::commands::MOVABLE_KEYS, 0);
        assert_eq!(CONFIG_GET.name, "config|get");
        assert!(CONFIG
            .subcommand(b"GeT")
            .is_some_and(|s| s.name == "config|get"));
    }
}

//! Access control lists: users, their selectors, the ACL log.
//!
//! This is the data Redis 7.0 keeps in acl.c, and the checks that need no
//! command table. A user has flags, SHA-256 password hashes and one or more
//! selectors; the first (root) selector holds the rules given outside
//! parentheses, the others are the `(…)` selectors. A command is allowed
//! when any one selector allows the command itself, every key it names (with
//! the access the command's key specs say it needs) and every channel.
//!
//! Which command an id stands for, and what `+@category` means, belong to
//! the command table: `commands::acl` applies rules and describes them; this
//! module stores a selector's commands as a bitmap indexed by command id,
//! as Redis does, with the last bit meaning "commands added later" (set
//! only by `+@all` / `allcommands`).
//!
//! Users live in a slab so that a client names its user by index; the
//! dispatcher's fast path reads one flag of that user (`unrestricted`) and
//! skips every check for users such as `default` that may run anything.

use std::collections::{BTreeMap, HashMap, VecDeque};

use foldhash::fast::RandomState;

use crate::util::{glob_match, hex, sha256};

/// Bits in a selector's command bitmap (Redis's USER_COMMAND_BITS_COUNT).
pub const COMMAND_BITS: usize = 1024;
/// The reserved bit set by `+@all`: the selector allows commands that do
/// not exist yet, so its description starts with `+@all`.
pub const FUTURE_COMMANDS_BIT: usize = COMMAND_BITS - 1;
/// A user's place in the slab. The default user is always 0.
pub type UserId = usize;
pub const DEFAULT_USER: UserId = 0;
/// No user: the AOF loader and the master's link, which run anything
/// (Redis's NULL user, shown as `(superuser)`).
pub const NO_USER: UserId = usize::MAX;
/// Length of a password hash in hex.
pub const PASSWORD_HASH_LEN: usize = 64;

/// Key pattern permissions (`%R~`, `%W~`, `~` is both).
pub const KEY_READ: u8 = 1;
pub const KEY_WRITE: u8 = 2;
pub const KEY_ALL: u8 = KEY_READ | KEY_WRITE;

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    /// `KEY_READ` / `KEY_WRITE`.
    pub flags: u8,
}

impl KeyPattern {
    /// As ACL LIST and GETUSER write it: `~p`, `%R~p`, `%W~p`.
    pub fn describe(&self, out: &mut Vec<u8>) {
        match self.flags {
            KEY_ALL => out.push(b'~'),
            KEY_READ => out.extend_from_slice(b"%R~"),
            _ => out.extend_from_slice(b"%W~"),
        }
        out.extend_from_slice(&self.pattern);
    }
}

/// Patterns (or prefixes) → the access they give.
type PatternFlags = HashMap<Vec<u8>, u8, RandomState>;

/// A selector's key patterns arranged for lookup: a key is checked against
/// a hundred patterns in a few hash lookups, not a hundred glob matches.
/// Literal patterns are looked up whole, `literal*` patterns by the key's
/// prefix of each length they have; only the others are glob-matched.
#[derive(Clone, Default)]
pub struct KeyIndex {
    exact: PatternFlags,
    /// (prefix length, prefix → flags), shortest first.
    prefixes: Vec<(usize, PatternFlags)>,
    /// Positions in `patterns` of the patterns matched as globs.
    globs: Vec<usize>,
}

/// Does `s` hold a glob special character (or an escape)?
fn has_glob_specials(s: &[u8]) -> bool {
    s.iter().any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
}

impl KeyIndex {
    fn build(patterns: &[KeyPattern]) -> KeyIndex {
        let mut index = KeyIndex::default();
        for (i, p) in patterns.iter().enumerate() {
            let pat = p.pattern.as_slice();
            if !has_glob_specials(pat) {
                *index.exact.entry(pat.to_vec()).or_default() |= p.flags;
            } else if let Some(prefix) = pat.strip_suffix(b"*").filter(|s| !has_glob_specials(s)) {
                let at = match index
                    .prefixes
                    .iter()
                    .position(|(len, _)| *len == prefix.len())
                {
                    Some(at) => at,
                    None => {
                        index.prefixes.push((prefix.len(), HashMap::default()));
                        index.prefixes.len() - 1
                    }
                };
                *index.prefixes[at].1.entry(prefix.to_vec()).or_default() |= p.flags;
            } else {
                index.globs.push(i);
            }
        }
        index.prefixes.sort_by_key(|(len, _)| *len);
        index
    }
}

/// One set of permissions: commands, key patterns, channel patterns.
#[derive(Clone)]
pub struct Selector {
    /// The user's own rules (outside parentheses).
    pub root: bool,
    pub all_keys: bool,
    pub all_channels: bool,
    /// Every command, without consulting the bitmap (`+@all` until a
    /// command is removed).
    pub all_commands: bool,
    pub commands: [u64; COMMAND_BITS / 64],
    /// First arguments allowed for an otherwise denied command
    /// (`+select|0`), by command id, in the order given.
    pub first_args: BTreeMap<usize, Vec<Vec<u8>>>,
    pub patterns: Vec<KeyPattern>,
    /// `patterns` for lookup (rebuilt by `User::refresh`).
    pub key_index: KeyIndex,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// An empty selector; `all_channels` is `acl-pubsub-default`.
    pub fn new(root: bool, all_channels: bool) -> Selector {
        Selector {
            root,
            all_keys: false,
            all_channels,
            all_commands: false,
            commands: [0; COMMAND_BITS / 64],
            first_args: BTreeMap::new(),
            patterns: Vec::new(),
            key_index: KeyIndex::default(),
            channels: Vec::new(),
        }
    }

    /// Is the bit of command `id` set? (Not `all_commands`: the bitmap
    /// alone.)
    pub fn command_bit(&self, id: usize) -> bool {
        id < COMMAND_BITS && self.commands[id / 64] & (1 << (id % 64)) != 0
    }

    /// Set or clear the bit of command `id`; clearing one ends
    /// `all_commands`.
    pub fn set_command_bit(&mut self, id: usize, allow: bool) {
        if id >= COMMAND_BITS {
            return;
        }
        if allow {
            self.commands[id / 64] |= 1 << (id % 64);
        } else {
            self.commands[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// `+@all` / `allcommands`.
    pub fn allow_all_commands(&mut self) {
        self.commands = [u64::MAX; COMMAND_BITS / 64];
        self.all_commands = true;
        self.first_args.clear();
    }

    /// `-@all` / `nocommands`.
    pub fn deny_all_commands(&mut self) {
        self.commands = [0; COMMAND_BITS / 64];
        self.all_commands = false;
        self.first_args.clear();
    }

    pub fn can_run_future_commands(&self) -> bool {
        self.command_bit(FUTURE_COMMANDS_BIT)
    }

    /// May this selector touch `key` with the access `need` (`KEY_READ`,
    /// `KEY_WRITE`, both, or neither for a key only checked for
    /// existence)? Redis's ACLSelectorCheckKey.
    pub fn check_key(&self, key: &[u8], need: u8) -> bool {
        if self.all_keys {
            return true;
        }
        let ix = &self.key_index;
        let allows = |flags: Option<&u8>| flags.is_some_and(|f| f & need == need);
        allows(ix.exact.get(key))
            || ix
                .prefixes
                .iter()
                .take_while(|(len, _)| *len <= key.len())
                // (`*` does not match an empty key, as in Redis's
                // stringmatchlen.)
                .any(|(len, map)| (*len > 0 || !key.is_empty()) && allows(map.get(&key[..*len])))
            || ix.globs.iter().any(|&i| {
                let p = &self.patterns[i];
                p.flags & need == need && glob_match(&p.pattern, key, false)
            })
    }

    /// Rebuild the lookup of the key patterns after they changed.
    pub fn reindex(&mut self) {
        self.key_index = KeyIndex::build(&self.patterns);
    }

    /// Does a `*` pattern give this selector `need` on every key? (SCAN,
    /// KEYS, RANDOMKEY: Redis's ACLSelectorHasUnrestrictedKeyAccess.)
    pub fn has_unrestricted_key_access(&self, need: u8) -> bool {
        self.all_keys
            || self
                .patterns
                .iter()
                .any(|p| p.flags & need == need && p.pattern == b"*")
    }

    /// May this selector use `channel`? A channel given to PUBLISH or
    /// SUBSCRIBE is matched against the patterns; a pattern given to
    /// PSUBSCRIBE must equal one of them literally.
    pub fn check_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels || channel_in_list(&self.channels, channel, is_pattern)
    }

    /// The key patterns as ACL GETUSER shows them: `~*`, or the patterns
    /// joined by spaces.
    pub fn keys_text(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            p.describe(&mut out);
        }
        out
    }

    /// The channel patterns as ACL GETUSER shows them: `&*`, or `&p`
    /// joined by spaces.
    pub fn channels_text(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// Keys and channels as ACL LIST writes them, each rule followed by a
    /// space (`resetchannels` first when not every channel is allowed).
    pub fn describe_keys_and_channels(&self, out: &mut Vec<u8>) {
        for (part, reset) in [
            (self.keys_text(), false),
            (self.channels_text(), !self.all_channels),
        ] {
            if reset {
                out.extend_from_slice(b"resetchannels ");
            }
            if !part.is_empty() {
                out.extend_from_slice(&part);
                out.push(b' ');
            }
        }
    }
}

/// Redis's ACLCheckChannelAgainstList.
pub fn channel_in_list(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p.as_slice() == channel
        } else {
            glob_match(p, channel, false)
        }
    })
}

/// `sanitize-payload` / `skip-sanitize-payload`, or neither given.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Sanitize {
    Unset,
    Sanitize,
    Skip,
}

#[derive(Clone)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    pub sanitize: Sanitize,
    /// SHA-256 hashes in lower-case hex, in the order added.
    pub passwords: Vec<String>,
    /// The root selector first, then the `(…)` selectors.
    pub selectors: Vec<Selector>,
    /// May run anything on any key and channel: the dispatcher checks
    /// nothing. Kept by `refresh` after every change.
    pub unrestricted: bool,
}

impl User {
    /// A new user: off, no passwords, no commands or keys, and every
    /// channel or none (`acl-pubsub-default`).
    pub fn new(name: &[u8], all_channels: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: Sanitize::Unset,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, all_channels)],
            unrestricted: false,
        }
    }

    /// The default user as Redis creates it: on, no password, every
    /// command, key and channel.
    pub fn new_default() -> User {
        let mut u = User::new(b"default", true);
        let root = u.root_mut();
        root.allow_all_commands();
        root.all_keys = true;
        root.all_channels = true;
        u.enabled = true;
        u.nopass = true;
        u.refresh();
        u
    }

    /// `requirepass`: the default user's only password, or none
    /// (`nopass`) when empty (Redis's ACLUpdateDefaultUserPassword).
    pub fn set_only_password(&mut self, password: &[u8]) {
        self.passwords.clear();
        self.nopass = password.is_empty();
        if !password.is_empty() {
            self.passwords.push(hash_password(password));
        }
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    pub fn root_mut(&mut self) -> &mut Selector {
        &mut self.selectors[0]
    }

    /// Recompute `unrestricted` and the key lookups after the rules changed.
    pub fn refresh(&mut self) {
        for s in &mut self.selectors {
            s.reindex();
        }
        self.unrestricted = self
            .selectors
            .iter()
            .any(|s| s.all_commands && s.all_keys && s.all_channels);
    }

    /// Does `password` match (any password, for a `nopass` user)? The
    /// comparison takes the same time wherever the hashes differ.
    pub fn password_matches(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        let mut found = false;
        for stored in &self.passwords {
            found |= constant_time_eq(stored.as_bytes(), hashed.as_bytes());
        }
        found
    }

    /// The flags GETUSER lists and ACL LIST starts with, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize {
            Sanitize::Skip => flags.push("skip-sanitize-payload"),
            Sanitize::Sanitize => flags.push("sanitize-payload"),
            Sanitize::Unset => {}
        }
        flags
    }

    /// Can a `PUBLISH`/`SUBSCRIBE` of `channel` pass any selector?
    pub fn check_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.check_channel(channel, is_pattern))
    }
}

/// The hex SHA-256 of a password, as ACL GETUSER shows it.
pub fn hash_password(password: &[u8]) -> String {
    hex(&sha256(password))
}

/// Is `hash` 64 lower-case hex digits (Redis's ACLCheckPasswordHash)?
pub fn is_password_hash(hash: &[u8]) -> bool {
    hash.len() == PASSWORD_HASH_LEN && hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Why a command was refused, in Redis's order of precedence (a later
/// variant is the more relevant when selectors disagree).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Denial {
    Command,
    Key,
    Auth,
    Channel,
}

impl Denial {
    pub fn name(self) -> &'static str {
        match self {
            Denial::Command => "command",
            Denial::Key => "key",
            Denial::Auth => "auth",
            Denial::Channel => "channel",
        }
    }
}

/// Where the refused command ran.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LogContext {
    Toplevel,
    Multi,
    Lua,
}

impl LogContext {
    pub fn name(self) -> &'static str {
        match self {
            LogContext::Toplevel => "toplevel",
            LogContext::Multi => "multi",
            LogContext::Lua => "lua",
        }
    }
}

/// One entry of ACL LOG.
pub struct LogEntry {
    pub count: u64,
    pub reason: Denial,
    pub context: LogContext,
    /// The command, key, channel or (for auth) the command name.
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Milliseconds since the epoch of the last event.
    pub ctime_ms: u64,
    /// CLIENT LIST's line for the client of the last event.
    pub client_info: String,
}

/// Events this close in time, with the same reason, context, object and
/// user, are counted in one entry.
const LOG_GROUPING_MAX_MS: u64 = 60_000;
/// Entries looked at for a match.
const LOG_GROUPING_SCAN: usize = 10;

/// Every user, and the security log.
pub struct Acl {
    users: Vec<Option<User>>,
    names: BTreeMap<Vec<u8>, UserId>,
    /// Newest first.
    pub log: VecDeque<LogEntry>,
}

impl Acl {
    /// The users table with only `default_user` (stored as user 0).
    pub fn new(default_user: User) -> Acl {
        let mut acl = Acl {
            users: Vec::new(),
            names: BTreeMap::new(),
            log: VecDeque::new(),
        };
        acl.insert(default_user);
        acl
    }

    pub fn user(&self, id: UserId) -> &User {
        self.users
            .get(id)
            .and_then(|u| u.as_ref())
            .unwrap_or_else(|| self.users[DEFAULT_USER].as_ref().expect("default user"))
    }

    pub fn user_mut(&mut self, id: UserId) -> Option<&mut User> {
        self.users.get_mut(id).and_then(|u| u.as_mut())
    }

    pub fn find(&self, name: &[u8]) -> Option<UserId> {
        self.names.get(name).copied()
    }

    /// Add a user (its name must be free); returns its id.
    pub fn insert(&mut self, user: User) -> UserId {
        let id = match self.users.iter().position(|u| u.is_none()) {
            Some(free) => free,
            None => {
                self.users.push(None);
                self.users.len() - 1
            }
        };
        self.names.insert(user.name.clone(), id);
        self.users[id] = Some(user);
        id
    }

    /// Remove the user called `name` (never `default`).
    pub fn remove(&mut self, name: &[u8]) -> Option<UserId> {
        let id = self.names.get(name).copied()?;
        if id == DEFAULT_USER {
            return None;
        }
        self.names.remove(name);
        self.users[id] = None;
        Some(id)
    }

    /// Every user, by name (ACL LIST and USERS order).
    pub fn users(&self) -> impl Iterator<Item = (UserId, &User)> {
        self.names.values().map(|&id| (id, self.user(id)))
    }

    /// The user `name` may log in as with `password`.
    pub fn check_credentials(&self, name: &[u8], password: &[u8]) -> Option<UserId> {
        let id = self.find(name)?;
        let user = self.user(id);
        (user.enabled && user.password_matches(password)).then_some(id)
    }

    /// Must a client that has not authenticated do so before running
    /// commands? Only while the default user has a password or is off
    /// (Redis's authRequired).
    pub fn auth_required(&self) -> bool {
        let default = self.user(DEFAULT_USER);
        !default.nopass || !default.enabled
    }

    /// Record an event: counted into a recent matching entry, or added as a
    /// new one, keeping at most `max_len` entries.
    pub fn add_log(&mut self, entry: LogEntry, max_len: usize) {
        let found = self.log.iter().take(LOG_GROUPING_SCAN).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.ctime_ms.abs_diff(entry.ctime_ms) <= LOG_GROUPING_MAX_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        match found.and_then(|i| self.log.remove(i)) {
            Some(mut e) => {
                e.count += 1;
                e.ctime_ms = entry.ctime_ms;
                e.client_info = entry.client_info;
                self.log.push_front(e);
            }
            None => {
                self.log.push_front(entry);
                self.log.truncate(max_len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_kept_hashed_and_compared() {
        let mut u = User::new(b"alice", false);
        u.passwords.push(hash_password(b"secret"));
        assert!(u.password_matches(b"secret"));
        assert!(!u.password_matches(b"secreT"));
        assert!(!u.password_matches(b""));
        u.nopass = true;
        assert!(u.password_matches(b"anything"));
        assert!(is_password_hash(hash_password(b"x").as_bytes()));
        assert!(!is_password_hash(b"ABCD"));
    }

    #[test]
    fn key_patterns_need_the_access_asked_for() {
        let mut s = Selector::new(true, false);
        s.patterns.push(KeyPattern {
            pattern: b"r:*".to_vec(),
            flags: KEY_READ,
        });
        s.patterns.push(KeyPattern {
            pattern: b"w:*".to_vec(),
            flags: KEY_WRITE,
        });
        s.reindex();
        assert!(s.check_key(b"r:1", KEY_READ));
        assert!(!s.check_key(b"r:1", KEY_WRITE));
        assert!(!s.check_key(b"r:1", KEY_ALL));
        assert!(s.check_key(b"w:1", KEY_WRITE));
        assert!(s.check_key(b"w:1", 0));
        assert!(!s.check_key(b"x", 0));
        assert!(!s.has_unrestricted_key_access(KEY_READ));
    }

    #[test]
    fn the_key_index_agrees_with_matching_every_pattern() {
        let pats: &[(&[u8], u8)] = &[
            (b"exact", KEY_ALL),
            (b"pre:*", KEY_READ),
            (b"pre:w*", KEY_WRITE),
            (b"*", KEY_WRITE),
            (b"g?b*", KEY_ALL),
            (b"esc\\*", KEY_ALL),
            (b"", KEY_READ),
        ];
        let mut s = Selector::new(true, false);
        for (p, f) in pats {
            s.patterns.push(KeyPattern {
                pattern: p.to_vec(),
                flags: *f,
            });
        }
        s.reindex();
        let keys: &[&[u8]] = &[
            b"exact", b"exac", b"pre:", b"pre:w1", b"prx", b"gob", b"esc*", b"escX", b"", b"zz",
        ];
        for key in keys {
            for need in [0, KEY_READ, KEY_WRITE, KEY_ALL] {
                let slow = s
                    .patterns
                    .iter()
                    .any(|p| p.flags & need == need && glob_match(&p.pattern, key, false));
                assert_eq!(s.check_key(key, need), slow, "{key:?} need {need}");
            }
        }
    }

    #[test]
    fn channel_patterns_match_channels_and_equal_patterns() {
        let list = vec![b"news.*".to_vec()];
        assert!(channel_in_list(&list, b"news.tech", false));
        assert!(!channel_in_list(&list, b"news.*x", true));
        assert!(channel_in_list(&list, b"news.*", true));
    }

    #[test]
    fn the_log_groups_similar_events_and_is_bounded() {
        let mut acl = Acl::new(User::new_default());
        let entry = |object: &[u8], t| LogEntry {
            count: 1,
            reason: Denial::Command,
            context: LogContext::Toplevel,
            object: object.to_vec(),
            username: b"u".to_vec(),
            ctime_ms: t,
            client_info: String::new(),
        };
        acl.add_log(entry(b"get", 1000), 3);
        acl.add_log(entry(b"get", 2000), 3);
        assert_eq!(acl.log.len(), 1);
        assert_eq!(acl.log[0].count, 2);
        acl.add_log(entry(b"get", 2000 + LOG_GROUPING_MAX_MS + 1), 3);
        assert_eq!(acl.log.len(), 2);
        for (i, o) in [b"a", b"b", b"c"].iter().enumerate() {
            acl.add_log(entry(*o, 10 + i as u64), 3);
        }
        assert_eq!(acl.log.len(), 3);
        assert_eq!(acl.log[0].object, b"c");
    }

    #[test]
    fn users_are_found_by_name_and_slots_are_reused() {
        let mut acl = Acl::new(User::new_default());
        let a = acl.insert(User::new(b"a", false));
        assert_eq!(acl.find(b"a"), Some(a));
        assert_eq!(acl.remove(b"default"), None);
        assert_eq!(acl.remove(b"a"), Some(a));
        assert_eq!(acl.find(b"a"), None);
        let b = acl.insert(User::new(b"b", false));
        assert_eq!(b, a);
        let names: Vec<_> = acl.users().map(|(_, u)| u.name.clone()).collect();
        assert_eq!(names, vec![b"b".to_vec(), b"default".to_vec()]);
    }
}

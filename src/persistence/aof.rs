//! Append-only file formats, as Redis 7.0 lays them out (multi-part AOF).
//!
//! An `appenddirname` directory holds a *manifest* that lists, in order, one
//! *base* file (an RDB image — the "RDB preamble" — or a plain command log)
//! and the *incremental* files written since the base was made, plus
//! *history* files left by the last rewrite until they are deleted:
//!
//! ```text
//! file appendonly.aof.2.base.rdb seq 2 type b
//! file appendonly.aof.1.incr.aof seq 1 type h
//! file appendonly.aof.2.incr.aof seq 2 type i
//! ```
//!
//! This module knows the names, the manifest syntax and the command log
//! syntax (RESP arrays of bulk strings, `#` annotation lines); it does not
//! know the server. Loading commands into the keyspace and writing are the
//! state layer's business.

use crate::protocol::{split_args, ARG_LEN_MAX};

/// Longest manifest line Redis accepts.
const MANIFEST_MAX_LINE: usize = 1024;

/// What a file in the manifest is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Base,
    Incr,
    History,
}

impl FileKind {
    fn letter(self) -> char {
        match self {
            FileKind::Base => 'b',
            FileKind::Incr => 'i',
            FileKind::History => 'h',
        }
    }
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofFile {
    pub name: String,
    pub seq: i64,
    pub kind: FileKind,
}

/// The manifest: what to load, in which order, and what to delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofFile>,
    pub incrs: Vec<AofFile>,
    pub history: Vec<AofFile>,
    /// Sequence numbers last used for a base and an incremental file.
    pub base_seq: i64,
    pub incr_seq: i64,
}

/// `<appendfilename>.manifest`
pub fn manifest_name(appendfilename: &str) -> String {
    format!("{appendfilename}.manifest")
}

/// `<appendfilename>.<seq>.base.rdb` (or `.aof` without an RDB preamble).
pub fn base_name(appendfilename: &str, seq: i64, rdb: bool) -> String {
    let ext = if rdb { "rdb" } else { "aof" };
    format!("{appendfilename}.{seq}.base.{ext}")
}

/// `<appendfilename>.<seq>.incr.aof`
/// The file that takes the writes while the AOF, turned on at run time,
/// waits for its first base (Redis's getTempIncrAofName): renamed into the
/// next incremental file when that rewrite succeeds, removed when it fails.
pub fn temp_incr_name(appendfilename: &str) -> String {
    format!("temp-{appendfilename}.incr")
}

/// The file `save_commands_to_file` writes `name` under in process `pid`
/// before renaming it.
pub fn commands_temp_name(pid: i32, name: &str) -> String {
    format!("temp-{pid}-{name}")
}

pub fn incr_name(appendfilename: &str, seq: i64) -> String {
    format!("{appendfilename}.{seq}.incr.aof")
}

/// Does a manifest file name need quoting (Redis's sdsneedsrepr)?
fn needs_repr(name: &str) -> bool {
    name.bytes().any(|b| {
        b == b'\\'
            || b == b'"'
            || b == b'\n'
            || b == b'\r'
            || b == b'\t'
            || b == 0x07
            || b == 0x08
            || !(0x20..=0x7e).contains(&b)
            || b == b' '
    })
}

impl Manifest {
    /// Parse a manifest as Redis's aofLoadManifestFromFile does; errors are
    /// its messages, with the line when there is one.
    pub fn parse(text: &[u8]) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        let mut max_seq = 0;
        let mut lines = 0;
        for raw in text.split_inclusive(|&b| b == b'\n') {
            lines += 1;
            if raw.first() == Some(&b'#') {
                continue;
            }
            let at = |e: &str| {
                format!(
                    "{e} (line {lines}: '{}')",
                    String::from_utf8_lossy(raw).trim_end()
                )
            };
            if raw.len() > MANIFEST_MAX_LINE || raw.last() != Some(&b'\n') {
                return Err(at("The AOF manifest file contains too long line"));
            }
            let line = String::from_utf8_lossy(raw);
            let line = line.trim_matches(|c| " \t\r\n".contains(c));
            if line.is_empty() {
                return Err(at("Invalid AOF manifest file format"));
            }
            let args = match split_args(line.as_bytes()) {
                Some(a) if a.len() >= 6 && a.len() % 2 == 0 => a,
                _ => return Err(at("Invalid AOF manifest file format")),
            };
            let (mut name, mut seq, mut kind) = (None, 0i64, None);
            for pair in args.chunks(2) {
                let key = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
                let val = &pair[1];
                match key.as_str() {
                    "file" => {
                        let n = String::from_utf8_lossy(val).into_owned();
                        if n.contains('/') {
                            return Err(at("File can't be a path, just a filename"));
                        }
                        name = Some(n);
                    }
                    // atoll: leading digits, anything else is 0.
                    "seq" => {
                        seq = String::from_utf8_lossy(val)
                            .trim_start()
                            .chars()
                            .take_while(|c| c.is_ascii_digit() || *c == '-')
                            .collect::<String>()
                            .parse()
                            .unwrap_or(0)
                    }
                    "type" => kind = val.first().copied(),
                    _ => {}
                }
            }
            let (Some(name), Some(kind)) = (name.filter(|n| !n.is_empty()), kind) else {
                return Err(at("Invalid AOF manifest file format"));
            };
            if seq == 0 {
                return Err(at("Invalid AOF manifest file format"));
            }
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err(at("Found duplicate base file information"));
                    }
                    m.base_seq = seq;
                    m.base = Some(AofFile {
                        name,
                        seq,
                        kind: FileKind::Base,
                    });
                }
                b'h' => m.history.push(AofFile {
                    name,
                    seq,
                    kind: FileKind::History,
                }),
                b'i' => {
                    if seq <= max_seq {
                        return Err(at("Found a non-monotonic sequence number"));
                    }
                    max_seq = seq;
                    m.incr_seq = seq;
                    m.incrs.push(AofFile {
                        name,
                        seq,
                        kind: FileKind::Incr,
                    });
                }
                _ => return Err(at("Unknown AOF file type")),
            }
        }
        if lines == 0 {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    /// The manifest's text (Redis's getAofManifestAsString): base, history,
    /// then incremental files.
    pub fn format(&self) -> String {
        let mut out = String::new();
        let files = self
            .base
            .iter()
            .chain(self.history.iter())
            .chain(self.incrs.iter());
        for f in files {
            let name = if needs_repr(&f.name) {
                crate::util::repr(&f.name)
            } else {
                f.name.clone()
            };
            out.push_str(&format!(
                "file {name} seq {} type {}\n",
                f.seq,
                f.kind.letter()
            ));
        }
        out
    }

    /// Files to load, in order: the base, then every incremental file.
    pub fn load_order(&self) -> impl Iterator<Item = &AofFile> {
        self.base.iter().chain(self.incrs.iter())
    }

    /// Start a new incremental file (the next sequence number) and return
    /// its name.
    pub fn add_incr(&mut self, appendfilename: &str) -> String {
        self.incr_seq += 1;
        let name = incr_name(appendfilename, self.incr_seq);
        self.incrs.push(AofFile {
            name: name.clone(),
            seq: self.incr_seq,
            kind: FileKind::Incr,
        });
        name
    }

    /// After a rewrite: the new base replaces the old one, and every
    /// incremental file but the newest (opened when the rewrite started)
    /// becomes history, as do the old base (Redis's
    /// backgroundRewriteDoneHandler). `keep_incrs` is how many of the newest
    /// incremental files hold writes made after the rewrite began. The
    /// newest history comes first, as Redis lists it: the old base, and
    /// before it the incremental files in their order.
    pub fn install_base(&mut self, new_base: AofFile, keep_incrs: usize) {
        if let Some(old) = self.base.take() {
            self.history.insert(
                0,
                AofFile {
                    kind: FileKind::History,
                    ..old
                },
            );
        }
        self.base_seq = new_base.seq;
        self.base = Some(new_base);
        let keep_from = self.incrs.len().saturating_sub(keep_incrs);
        let retired = self.incrs.drain(..keep_from).map(|old| AofFile {
            kind: FileKind::History,
            ..old
        });
        self.history.splice(0..0, retired);
    }
}

/// Why a command log could not be read to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogError {
    /// The file ends in the middle of a command (a crash mid-write): the
    /// commands before `valid_up_to` are whole.
    Truncated { valid_up_to: usize },
    /// Something that is not a command where one should start.
    Format { offset: usize },
}

/// Reads commands from a command log (an AOF incremental file, or the tail
/// of a base file after its RDB preamble), as Redis's
/// loadSingleAppendOnlyFile parses it.
pub struct CommandReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> CommandReader<'a> {
    pub fn new(data: &'a [u8], pos: usize) -> CommandReader<'a> {
        CommandReader { data, pos }
    }

    /// Bytes consumed so far (the end of the last whole command).
    pub fn offset(&self) -> usize {
        self.pos
    }

    fn line(&self, from: usize) -> Option<(&'a [u8], usize)> {
        let rest = self.data.get(from..)?;
        let nl = rest.iter().position(|&b| b == b'\n')?;
        Some((&rest[..nl], from + nl + 1))
    }

    /// The next command's arguments, `None` at the end of the data.
    pub fn next_command(&mut self, argv: &mut Vec<&'a [u8]>) -> Option<Result<(), LogError>> {
        argv.clear();
        loop {
            if self.pos >= self.data.len() {
                return None;
            }
            let truncated = Err(LogError::Truncated {
                valid_up_to: self.pos,
            });
            let Some((head, mut at)) = self.line(self.pos) else {
                return Some(truncated);
            };
            if head.first() == Some(&b'#') {
                // An annotation (`#TS:…`): skipped.
                self.pos = at;
                continue;
            }
            if head.first() != Some(&b'*') {
                return Some(Err(LogError::Format { offset: self.pos }));
            }
            let argc = match parse_len(&head[1..]) {
                Some(n) if n >= 1 => n,
                _ => return Some(Err(LogError::Format { offset: self.pos })),
            };
            for _ in 0..argc {
                let Some((len_line, next)) = self.line(at) else {
                    return Some(truncated);
                };
                if len_line.first() != Some(&b'$') {
                    return Some(Err(LogError::Format { offset: at }));
                }
                let Some(len) = parse_len(&len_line[1..]).filter(|&n| n <= ARG_LEN_MAX) else {
                    return Some(Err(LogError::Format { offset: at }));
                };
                let end = next.checked_add(len).filter(|&e| e <= self.data.len());
                let Some(end) = end else {
                    return Some(truncated);
                };
                if end + 2 > self.data.len() {
                    return Some(truncated);
                }
                argv.push(&self.data[next..end]);
                at = end + 2;
            }
            self.pos = at;
            return Some(Ok(()));
        }
    }
}

/// A length on a `*` or `$` line (a trailing `\r` allowed).
fn parse_len(s: &[u8]) -> Option<usize> {
    let s = s.strip_suffix(b"\r").unwrap_or(s);
    if s.is_empty() || s.len() > 19 || !s.iter().all(|b| b.is_ascii_digit()) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

// ---- a plain (command) base: aof-use-rdb-preamble no ----

/// Elements per command when a collection is rewritten (Redis's
/// AOF_REWRITE_ITEMS_PER_CMD).
const ITEMS_PER_CMD: usize = 64;

fn put_command(out: &mut impl std::io::Write, argv: &[&[u8]]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for a in argv {
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
    out.write_all(&buf)
}

/// Write collection `key`'s elements as commands of at most
/// ITEMS_PER_CMD elements each (`per` arguments per element).
fn put_batched(
    out: &mut impl std::io::Write,
    cmd: &[u8],
    key: &[u8],
    items: &[Vec<u8>],
    per: usize,
) -> std::io::Result<()> {
    for chunk in items.chunks(ITEMS_PER_CMD * per) {
        let mut argv: Vec<&[u8]> = vec![cmd, key];
        argv.extend(chunk.iter().map(|i| i.as_slice()));
        put_command(out, &argv)?;
    }
    Ok(())
}

/// The dataset as the commands that rebuild it (Redis's
/// rewriteAppendOnlyFileRio): per database a SELECT, then per key SET,
/// RPUSH, SADD, ZADD or HMSET in batches, and PEXPIREAT for a TTL; the
/// function libraries before them as FUNCTION LOAD.
pub fn write_commands(
    dbs: &[crate::db::Db],
    functions: &[Vec<u8>],
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    use crate::db::{Value, ValueRef};
    // Function libraries first, as Redis's rewriteFunctions.
    for code in functions {
        put_command(out, &[b"FUNCTION", b"LOAD", code])?;
    }
    // Keys written, for the rewrite child's reports to its parent.
    let mut saved: u64 = 0;
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        put_command(out, &[b"SELECT", i.to_string().as_bytes()])?;
        let mut err = None;
        db.main.for_each(&mut |e| {
            if err.is_some() {
                return;
            }
            saved += 1;
            if saved % 1024 == 1 {
                crate::util::child_info::progress(saved);
            }
            let key = e.key();
            let res = (|| -> std::io::Result<()> {
                match e.value() {
                    ValueRef::Str(v) => put_command(out, &[b"SET", key, v])?,
                    ValueRef::Int(n) => put_command(out, &[b"SET", key, n.to_string().as_bytes()])?,
                    ValueRef::Boxed(Value::Str(v)) => put_command(out, &[b"SET", key, v])?,
                    ValueRef::Boxed(Value::List(l)) => {
                        let items = l.to_vecs();
                        put_batched(out, b"RPUSH", key, &items, 1)?;
                    }
                    ValueRef::Boxed(Value::Set(st)) => {
                        put_batched(out, b"SADD", key, &st.members(), 1)?;
                    }
                    ValueRef::Boxed(Value::ZSet(z)) => {
                        let mut items = Vec::new();
                        for (m, score) in z.items() {
                            items.push(crate::protocol::reply::format_double(score).into_bytes());
                            items.push(m.to_vec());
                        }
                        put_batched(out, b"ZADD", key, &items, 2)?;
                    }
                    ValueRef::Boxed(Value::Hash(h)) => {
                        let mut items = Vec::new();
                        h.for_each(&mut |f, v| {
                            items.push(f.to_vec());
                            items.push(v.to_vec());
                        });
                        put_batched(out, b"HMSET", key, &items, 2)?;
                    }
                    ValueRef::Boxed(Value::Stream(st)) => write_stream(out, key, st)?,
                }
                if e.has_expire() {
                    if let Some(when) = db.get_expire(key) {
                        put_command(out, &[b"PEXPIREAT", key, when.to_string().as_bytes()])?;
                    }
                }
                Ok(())
            })();
            if let Err(x) = res {
                err = Some(x);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
    }
    Ok(())
}

/// A stream as the commands that rebuild it (Redis's rewriteStreamObject):
/// XADD per entry (an empty stream made by XADD MAXLEN 0), XSETID for its
/// IDs and counters, then per group XGROUP CREATE and, per consumer, an
/// XCLAIM … FORCE per pending entry (XGROUP CREATECONSUMER when it has none).
fn write_stream(
    out: &mut impl std::io::Write,
    key: &[u8],
    s: &crate::db::Stream,
) -> std::io::Result<()> {
    use crate::db::StreamId;
    if s.length > 0 {
        let mut res = Ok(());
        s.range(StreamId::MIN, StreamId::MAX, false, &mut |e| {
            let id = e.id.to_string();
            let fields: Vec<(Vec<u8>, Vec<u8>)> = e
                .fields
                .iter()
                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                .collect();
            let mut argv: Vec<&[u8]> = vec![b"XADD", key, id.as_bytes()];
            for (f, v) in &fields {
                argv.push(f);
                argv.push(v);
            }
            res = put_command(out, &argv);
            res.is_ok()
        });
        res?;
    } else {
        put_command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"])?;
    }
    let last = s.last_id.to_string();
    let added = s.entries_added.to_string();
    let maxdel = s.max_deleted_entry_id.to_string();
    put_command(
        out,
        &[
            b"XSETID",
            key,
            last.as_bytes(),
            b"ENTRIESADDED",
            added.as_bytes(),
            b"MAXDELETEDID",
            maxdel.as_bytes(),
        ],
    )?;
    for (name, g) in &s.groups {
        let last = g.last_id.to_string();
        let read = g.entries_read.to_string();
        put_command(
            out,
            &[
                b"XGROUP",
                b"CREATE",
                key,
                name,
                last.as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ],
        )?;
        for (cname, c) in &g.consumers {
            if c.pel.is_empty() {
                put_command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, cname])?;
                continue;
            }
            for id in &c.pel {
                let nack = &g.pel[id];
                let id = id.to_string();
                let time = nack.delivery_time.to_string();
                let count = nack.delivery_count.to_string();
                put_command(
                    out,
                    &[
                        b"XCLAIM",
                        key,
                        name,
                        cname,
                        b"0",
                        id.as_bytes(),
                        b"TIME",
                        time.as_bytes(),
                        b"RETRYCOUNT",
                        count.as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ],
                )?;
            }
        }
    }
    Ok(())
}

/// Write a plain base file crash-safely: a temporary file, fsynced,
/// renamed into place (when `may_publish` still agrees), the directory
/// fsynced.
pub fn save_commands_to_file(
    dbs: &[crate::db::Db],
    functions: &[Vec<u8>],
    dir: &std::path::Path,
    name: &str,
    timestamp: Option<i64>,
    fsync_every: Option<u64>,
    may_publish: &dyn Fn() -> bool,
) -> std::io::Result<()> {
    let tmp = dir.join(commands_temp_name(std::process::id() as i32, name));
    let file = std::fs::File::create(&tmp)?;
    let mut w =
        std::io::BufWriter::with_capacity(1 << 16, super::SyncingWriter::new(&file, fsync_every));
    // With aof-timestamp-enabled, a base starts with when it was made, as
    // Redis's rewriteAppendOnlyFileRio writes it.
    let stamp = match timestamp {
        Some(ts) => std::io::Write::write_all(&mut w, format!("#TS:{ts}\r\n").as_bytes()),
        None => Ok(()),
    };
    let res = stamp
        .and_then(|_| write_commands(dbs, functions, &mut w))
        .and_then(|_| std::io::Write::flush(&mut w))
        .and_then(|_| file.sync_all());
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if !may_publish() {
        let _ = std::fs::remove_file(&tmp);
        return Err(std::io::Error::other("the parent is gone"));
    }
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Does a file start as an RDB image (an RDB base, or an old-style AOF with
/// an RDB preamble)?
pub fn is_rdb(data: &[u8]) -> bool {
    data.starts_with(b"REDIS")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_and_orders_files() {
        let text = b"file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type i\nfile appendonly.aof.3.incr.aof seq 3 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.format().as_bytes(), text);
        let order: Vec<&str> = m.load_order().map(|f| f.name.as_str()).collect();
        assert_eq!(
            order,
            [
                "appendonly.aof.2.base.rdb",
                "appendonly.aof.2.incr.aof",
                "appendonly.aof.3.incr.aof"
            ]
        );
        assert_eq!((m.base_seq, m.incr_seq), (2, 3));
    }

    #[test]
    fn rewrites_list_the_newest_history_first_as_redis() {
        // Redis's integration/aof-multi-part "AOF enable/disable auto gc":
        // two rewrites with history kept.
        let mut m = Manifest::parse(
            b"file appendonly.aof.5.base.rdb seq 5 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
        )
        .unwrap();
        for seq in [6, 7] {
            m.add_incr("appendonly.aof");
            let name = base_name("appendonly.aof", seq, true);
            m.install_base(
                AofFile {
                    name,
                    seq,
                    kind: FileKind::Base,
                },
                1,
            );
        }
        assert_eq!(
            m.format(),
            "file appendonly.aof.7.base.rdb seq 7 type b\n\
             file appendonly.aof.2.incr.aof seq 2 type h\n\
             file appendonly.aof.6.base.rdb seq 6 type h\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.5.base.rdb seq 5 type h\n\
             file appendonly.aof.3.incr.aof seq 3 type i\n"
        );
    }

    #[test]
    fn manifest_errors_are_redis_s() {
        let err = |t: &[u8]| Manifest::parse(t).unwrap_err();
        assert_eq!(err(b""), "Found an empty AOF manifest");
        assert!(err(b"file a seq 1\n").starts_with("Invalid AOF manifest file format"));
        assert!(err(b"file a seq 1 type b\nfile b seq 2 type b\n")
            .starts_with("Found duplicate base file information"));
        assert!(err(b"file a seq 2 type i\nfile b seq 1 type i\n")
            .starts_with("Found a non-monotonic sequence number"));
        assert!(err(b"file a seq 1 type x\n").starts_with("Unknown AOF file type"));
        assert!(err(b"file ../a seq 1 type b\n").starts_with("File can't be a path"));
        assert!(
            err(b"file a seq 1 type b").starts_with("The AOF manifest file contains too long line")
        );
        // Comments are skipped; names with spaces are quoted both ways.
        let mut m = Manifest::parse(b"# hi\nfile \"a b\" seq 1 type b\n").unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "a b");
        assert_eq!(m.format(), "file \"a b\" seq 1 type b\n");
        m.add_incr("x");
        assert_eq!(m.incrs[0].name, "x.1.incr.aof");
    }

    #[test]
    fn command_log_reads_whole_commands_and_reports_truncation() {
        let log = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n#TS:1\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nDEL";
        let mut r = CommandReader::new(log, 0);
        let mut argv = Vec::new();
        assert_eq!(r.next_command(&mut argv), Some(Ok(())));
        assert_eq!(argv, [&b"SELECT"[..], b"0"]);
        assert_eq!(r.next_command(&mut argv), Some(Ok(())));
        assert_eq!(argv, [&b"SET"[..], b"k", b"v"]);
        let valid = r.offset();
        assert_eq!(
            r.next_command(&mut argv),
            Some(Err(LogError::Truncated { valid_up_to: valid }))
        );
        let mut bad = CommandReader::new(b"*1\r\n$4\r\nPING\r\nGARBAGE\r\n", 0);
        assert_eq!(bad.next_command(&mut argv), Some(Ok(())));
        assert_eq!(
            bad.next_command(&mut argv),
            Some(Err(LogError::Format { offset: 14 }))
        );
    }
}

//! The RDB writer: version 10; lists as Redis writes them (quicklist2),
//! the other types in plain encodings Redis 7.0 loads.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use super::*;
use crate::db::quicklist::NodeBytes;
use crate::db::{Db, Value, ValueRef};
use crate::persistence::crc64::crc64;
use crate::persistence::lzf;

/// Bytes `write_rdb` gathers before it passes them on.
const WRITE_BUF: usize = 1 << 16;

/// A writer that keeps the running CRC of everything written. It gathers
/// the small pieces of each key (type, lengths, bytes) in `buf` and takes
/// their CRC a buffer at a time when it passes them on, where `crc64` runs
/// by carry-less multiplication, instead of a call into its tables for
/// each piece.
struct RdbWriter<W: Write> {
    buf: Vec<u8>,
    /// `buf` is passed on to `out` when it would grow past this.
    limit: usize,
    out: W,
    /// The CRC of every byte passed on so far.
    crc: u64,
    /// `rdbcompression`: LZF-compress strings longer than 20 bytes.
    compress: bool,
}

impl<W: Write> RdbWriter<W> {
    #[inline]
    fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        if self.buf.len() + b.len() > self.limit {
            return self.pass_on_then(b);
        }
        self.buf.extend_from_slice(b);
        Ok(())
    }

    /// `raw` when `b` does not fit: pass the gathered bytes on, then keep
    /// `b`, or pass it on too when it is longer than the buffer.
    #[cold]
    #[inline(never)]
    fn pass_on_then(&mut self, b: &[u8]) -> io::Result<()> {
        self.pass_on()?;
        if b.len() > self.limit {
            self.crc = crc64(self.crc, b);
            return self.out.write_all(b);
        }
        self.buf.extend_from_slice(b);
        Ok(())
    }

    /// Pass the gathered bytes on, their CRC taken.
    fn pass_on(&mut self) -> io::Result<()> {
        self.crc = crc64(self.crc, &self.buf);
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn len(&mut self, n: u64) -> io::Result<()> {
        if n < 64 {
            self.raw(&[n as u8])
        } else if n < 16384 {
            self.raw(&[0x40 | (n >> 8) as u8, n as u8])
        } else if n <= u32::MAX as u64 {
            self.raw(&[0x80])?;
            self.raw(&(n as u32).to_be_bytes())
        } else {
            self.raw(&[0x81])?;
            self.raw(&n.to_be_bytes())
        }
    }

    /// A string, integer-encoded when it is a canonical 32-bit integer.
    fn string(&mut self, s: &[u8]) -> io::Result<()> {
        if s.len() <= 11 {
            if let Some(n) = crate::util::parse_i64(s) {
                if let Ok(v) = i8::try_from(n) {
                    return self.raw(&[0xC0, v as u8]);
                } else if let Ok(v) = i16::try_from(n) {
                    self.raw(&[0xC1])?;
                    return self.raw(&v.to_le_bytes());
                } else if let Ok(v) = i32::try_from(n) {
                    self.raw(&[0xC2])?;
                    return self.raw(&v.to_le_bytes());
                }
            }
        }
        // As Redis: LZF for strings over 20 bytes when it saves at least 4.
        if self.compress && s.len() > 20 {
            if let Some(c) = lzf::compress(s, s.len() - 4) {
                return self.lzf_blob(&c, s.len());
            }
        }
        self.len(s.len() as u64)?;
        self.raw(s)
    }

    /// LZF-compressed bytes and their uncompressed length (rdbSaveLzfBlob).
    fn lzf_blob(&mut self, compressed: &[u8], raw_len: usize) -> io::Result<()> {
        self.raw(&[ENC_LZF])?;
        self.len(compressed.len() as u64)?;
        self.len(raw_len as u64)?;
        self.raw(compressed)
    }
}

/// FUNCTION DUMP's payload: a FUNCTION2 record per library, then the RDB
/// version (2 bytes, little endian) and a CRC-64 of all that (as DUMP).
pub fn functions_payload(codes: &[Vec<u8>], compress: bool) -> Vec<u8> {
    payload(compress, |r| {
        for code in codes {
            r.raw(&[OP_FUNCTION2])?;
            r.string(code)?;
        }
        Ok(())
    })
}

/// Serialise every database of `dbs` in RDB format to `w`.
pub fn write_rdb<W: Write>(dbs: &[Db], opts: &SaveOptions, w: W) -> io::Result<()> {
    let mut r = RdbWriter {
        buf: Vec::with_capacity(WRITE_BUF),
        limit: WRITE_BUF,
        out: w,
        crc: 0,
        compress: opts.compress,
    };
    r.raw(format!("REDIS{RDB_VERSION:04}").as_bytes())?;
    let now_ms = crate::util::unix_time_ms();
    // Redis's order: the replication fields come before aof-base.
    let mut aux = vec![
        ("redis-ver", crate::REDIS_VERSION.to_string()),
        ("redis-bits", "64".to_string()),
        ("ctime", (now_ms / 1000).to_string()),
        ("used-mem", opts.used_memory.to_string()),
    ];
    if let Some(r) = &opts.repl {
        aux.push(("repl-stream-db", r.stream_db.to_string()));
        aux.push(("repl-id", r.id.clone()));
        aux.push(("repl-offset", r.offset.to_string()));
    }
    aux.push(("aof-base", u8::from(opts.aof_base).to_string()));
    for (k, v) in aux {
        r.raw(&[OP_AUX])?;
        r.string(k.as_bytes())?;
        r.string(v.as_bytes())?;
    }
    // Function libraries come before the keys, as Redis writes them.
    for code in &opts.functions {
        r.raw(&[OP_FUNCTION2])?;
        r.string(code)?;
    }
    // Keys written, for a background child's reports to its parent.
    let mut saved: u64 = 0;
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        r.raw(&[OP_SELECTDB])?;
        r.len(i as u64)?;
        r.raw(&[OP_RESIZEDB])?;
        r.len(db.len() as u64)?;
        r.len(db.expires.len() as u64)?;
        let key_delay_us = opts.key_save_delay_us;
        let mut err = None;
        db.main.for_each(&mut |e| {
            if err.is_some() {
                return;
            }
            saved += 1;
            if saved % 1024 == 1 {
                crate::util::child_info::progress(saved);
            }
            let res = (|| -> io::Result<()> {
                if e.has_expire() {
                    if let Some(t) = db.get_expire(e.key()) {
                        r.raw(&[OP_EXPIRETIME_MS])?;
                        r.raw(&t.to_le_bytes())?;
                    }
                }
                // Redis's order: expire, then IDLE or FREQ, then the key.
                match opts.access {
                    AccessRecords::None => {}
                    AccessRecords::Lru { clock } => {
                        let idle = crate::db::entry::lru_idle(clock, e.lru());
                        r.raw(&[OP_IDLE])?;
                        r.len(idle as u64)?;
                    }
                    AccessRecords::Lfu { minutes, decay } => {
                        r.raw(&[OP_FREQ])?;
                        r.raw(&[crate::db::entry::lfu_decayed(e.lru(), minutes, decay)])?;
                    }
                }
                if key_delay_us > 0 {
                    std::thread::sleep(std::time::Duration::from_micros(key_delay_us as u64));
                }
                write_entry(&mut r, e)
            })();
            if let Err(x) = res {
                err = Some(x);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
    }
    r.raw(&[OP_EOF])?;
    // The trailer goes out with the last bytes it covers.
    let crc = crc64(r.crc, &r.buf);
    let crc = if opts.checksum { crc } else { 0 };
    r.buf.extend_from_slice(&crc.to_le_bytes());
    r.out.write_all(&r.buf)?;
    r.out.flush()
}

/// A key in a dump file. Small hashes, sorted sets and sets of integers
/// go as plain types there: kvstore writes and loads those faster than
/// Redis's listpack and intset (which it would have to build, and to read
/// back into its own forms), and Redis loads either.
fn write_entry<W: Write>(r: &mut RdbWriter<W>, e: &crate::db::Entry) -> io::Result<()> {
    write_object(r, Some(e.key()), e, false)
}

/// DUMP's payload for a key's value: its RDB type and serialisation, the
/// RDB version (2 bytes, little endian) and a CRC-64 of all that.
pub fn dump_payload(e: &crate::db::Entry, compress: bool) -> Vec<u8> {
    payload(compress, |r| write_object(r, None, e, true))
}

/// A DUMP-style payload: what `body` writes, the RDB version (2 bytes,
/// little endian), a CRC-64 of all that.
fn payload(
    compress: bool,
    body: impl FnOnce(&mut RdbWriter<io::Sink>) -> io::Result<()>,
) -> Vec<u8> {
    // Everything stays in the writer's buffer (nothing is passed on), and
    // the CRC is taken once, over the version too.
    let mut r = RdbWriter {
        buf: Vec::new(),
        limit: usize::MAX,
        out: io::sink(),
        crc: 0,
        compress,
    };
    // Writing to memory cannot fail.
    let _ = body(&mut r);
    let mut buf = r.buf;
    buf.extend_from_slice(&(RDB_VERSION as u16).to_le_bytes());
    let crc = crc64(0, &buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    buf
}

/// The type byte, the key (in a dump; not in a DUMP payload), the value;
/// `compact`: small collections in Redis's compact encodings.
fn write_object<W: Write>(
    r: &mut RdbWriter<W>,
    key: Option<&[u8]>,
    e: &crate::db::Entry,
    compact: bool,
) -> io::Result<()> {
    match e.value() {
        ValueRef::Str(s) => {
            r.raw(&[T_STRING])?;
            if let Some(k) = key {
                r.string(k)?;
            }
            r.string(s)
        }
        ValueRef::Int(n) => {
            r.raw(&[T_STRING])?;
            if let Some(k) = key {
                r.string(k)?;
            }
            r.string(n.to_string().as_bytes())
        }
        ValueRef::Boxed(v) => match v {
            Value::Str(s) => {
                r.raw(&[T_STRING])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                r.string(s)
            }
            Value::List(l) => {
                // As Redis's rdbSaveObject: the node count, then each node's
                // container and bytes; a compressed node as its LZF blob.
                r.raw(&[T_LIST_QUICKLIST_2])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                r.len(l.shape().nodes as u64)?;
                let mut res = Ok(());
                l.for_each_node(&mut |container, bytes| {
                    if res.is_ok() {
                        res = r.len(container as u64).and_then(|_| match bytes {
                            NodeBytes::Raw(b) => r.string(b),
                            NodeBytes::Lzf {
                                compressed,
                                raw_len,
                            } => r.lzf_blob(compressed, raw_len),
                        });
                    }
                });
                res
            }
            // Compact encodings are written as Redis writes them (the same
            // bytes: a DUMP of a small object is Redis's DUMP).
            Value::Set(crate::db::Set::Ints(ints)) if compact => {
                r.raw(&[T_SET_INTSET])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                r.string(&intset_bytes(ints))
            }
            Value::Hash(h) if compact && h.encoding_is_packed() => {
                r.raw(&[T_HASH_LISTPACK])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                r.string(&hash_listpack(h))
            }
            Value::ZSet(z) if compact && z.encoding() == "listpack" => {
                r.raw(&[T_ZSET_LISTPACK])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                r.string(&zset_listpack(z))
            }
            Value::Set(s) => {
                r.raw(&[T_SET])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                let members = s.members();
                r.len(members.len() as u64)?;
                for m in &members {
                    r.string(m)?;
                }
                Ok(())
            }
            Value::Hash(h) => {
                r.raw(&[T_HASH])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                r.len(h.len() as u64)?;
                let mut res = Ok(());
                h.for_each(&mut |f, v| {
                    if res.is_ok() {
                        res = r.string(f).and_then(|_| r.string(v));
                    }
                });
                res
            }
            Value::ZSet(z) => {
                r.raw(&[T_ZSET_2])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                let items = z.items();
                r.len(items.len() as u64)?;
                for (m, s) in items {
                    r.string(m)?;
                    r.raw(&s.to_le_bytes())?;
                }
                Ok(())
            }
            Value::Stream(st) => {
                r.raw(&[T_STREAM_LISTPACKS_2])?;
                if let Some(k) = key {
                    r.string(k)?;
                }
                write_stream(r, st)
            }
        },
    }
}

/// A set of integers as Redis's intset: the narrowest width that holds
/// them all (2, 4 or 8 bytes), their count, then the values in order,
/// little-endian.
fn intset_bytes(ints: &[i64]) -> Vec<u8> {
    let fits = |lo: i64, hi: i64| ints.iter().all(|x| (lo..=hi).contains(x));
    let width: usize = if fits(i16::MIN.into(), i16::MAX.into()) {
        2
    } else if fits(i32::MIN.into(), i32::MAX.into()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * ints.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(ints.len() as u32).to_le_bytes());
    for &x in ints {
        out.extend_from_slice(&x.to_le_bytes()[..width]);
    }
    out
}

/// A small hash as Redis's listpack: field, value, … in the hash's order.
pub fn hash_listpack(h: &crate::db::Hash) -> Vec<u8> {
    let mut lp = crate::db::listpack::new();
    let mut bytes = 0;
    h.for_each(&mut |f, v| bytes += f.len() + v.len() + 8);
    lp.reserve(bytes);
    h.for_each(&mut |f, v| {
        crate::db::listpack::push_str(&mut lp, f);
        crate::db::listpack::push_str(&mut lp, v);
    });
    lp
}

/// A small sorted set as Redis's listpack: member, score, … in order, the
/// score written as Redis's d2string writes it.
pub fn zset_listpack(z: &crate::db::ZSet) -> Vec<u8> {
    let mut lp = crate::db::listpack::new();
    let items = z.items();
    lp.reserve(items.iter().map(|(m, _)| m.len() + 32).sum());
    for (m, score) in items {
        crate::db::listpack::push_str(&mut lp, m);
        crate::db::listpack::push_str(&mut lp, d2string(score).as_bytes());
    }
    lp
}

/// A score as Redis puts it in a listpack (its d2string): an integer
/// where the double is one within ±2^62, else `%.17g`.
fn d2string(d: f64) -> String {
    const HALF: f64 = (i64::MAX / 2) as f64;
    if d.is_nan() {
        "nan".into()
    } else if d.is_infinite() {
        if d < 0.0 { "-inf" } else { "inf" }.into()
    } else if d == 0.0 {
        if d.is_sign_negative() { "-0" } else { "0" }.into()
    } else if (-HALF..=HALF).contains(&d) && (d as i64) as f64 == d {
        (d as i64).to_string()
    } else {
        crate::protocol::reply::format_double(d)
    }
}

/// A stream as Redis 7.0 writes it (RDB_TYPE_STREAM_LISTPACKS_2): the
/// nodes as they are, the stream's IDs and counters, then each group with
/// its PEL and its consumers with theirs.
fn write_stream<W: Write>(r: &mut RdbWriter<W>, s: &crate::db::Stream) -> io::Result<()> {
    r.len(s.nodes.len() as u64)?;
    for (master, node) in s.nodes.iter() {
        r.string(&master.to_be_bytes())?;
        r.string(node)?;
    }
    r.len(s.length)?;
    for id in [s.last_id, s.first_id, s.max_deleted_entry_id] {
        r.len(id.ms)?;
        r.len(id.seq)?;
    }
    r.len(s.entries_added)?;
    r.len(s.groups.len() as u64)?;
    for (name, g) in &s.groups {
        r.string(name)?;
        r.len(g.last_id.ms)?;
        r.len(g.last_id.seq)?;
        r.len(g.entries_read as u64)?;
        r.len(g.pel.len() as u64)?;
        for (id, nack) in &g.pel {
            r.raw(&id.to_be_bytes())?;
            r.raw(&nack.delivery_time.to_le_bytes())?;
            r.len(nack.delivery_count)?;
        }
        r.len(g.consumers.len() as u64)?;
        for (cname, c) in &g.consumers {
            r.string(cname)?;
            r.raw(&c.seen_time.to_le_bytes())?;
            r.len(c.pel.len() as u64)?;
            for id in &c.pel {
                r.raw(&id.to_be_bytes())?;
            }
        }
    }
    Ok(())
}

/// The file `save_to_file` writes in process `pid` before renaming it (a
/// child killed half way leaves it behind for its parent to remove).
pub fn temp_name(pid: i32) -> String {
    format!("temp-{pid}.rdb")
}

/// Write a snapshot to `dir/filename` crash-safely: a temporary file,
/// fsynced, renamed over the target, and the directory fsynced, so a crash
/// leaves either the old file or the new one.
///
/// `may_publish` is asked just before the rename: a background save whose
/// parent has died says no, so it never replaces a newer dump written by a
/// restarted server. Errors say what failed in Redis's words (the log shows
/// them: ENOSPC, EACCES, …).
pub fn save_to_file(
    dbs: &[Db],
    opts: &SaveOptions,
    dir: &Path,
    filename: &str,
    may_publish: &dyn Fn() -> bool,
) -> io::Result<()> {
    use crate::config::os_error_text;
    let tmp_name = temp_name(std::process::id() as i32);
    let tmp = dir.join(&tmp_name);
    let context = |e: io::Error, what: String| io::Error::new(e.kind(), what);
    let file = File::create(&tmp).map_err(|e| {
        let why = os_error_text(&e);
        context(
            e,
            format!(
                "Failed opening the temp RDB file {tmp_name} (in server root dir {}) for saving: {why}",
                dir.display()
            ),
        )
    })?;
    let res = write_rdb(
        dbs,
        opts,
        crate::persistence::SyncingWriter::new(&file, opts.fsync_every),
    )
    .and_then(|_| file.sync_all());
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        let why = os_error_text(&e);
        return Err(context(e, format!("Write error saving DB on disk: {why}")));
    }
    if !may_publish() {
        let _ = fs::remove_file(&tmp);
        return Err(io::Error::other(
            "the server that started this save is gone: not replacing the dump",
        ));
    }
    fs::rename(&tmp, dir.join(filename)).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        let why = os_error_text(&e);
        context(
            e,
            format!(
                "Error moving temp DB file {tmp_name} on the final destination {filename} (in server root dir {}): {why}",
                dir.display()
            ),
        )
    })?;
    File::open(dir)?.sync_all()
}

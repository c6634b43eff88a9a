//! Redis-format RDB snapshots: writing (version 10, plain encodings Redis
//! 7.0 loads and redis-check-rdb accepts) and loading (through a memory map,
//! never a heap copy of the file), including the compact encodings a Redis
//! 7.0 dump holds: intset, listpack hashes and sorted sets, quicklist2.
//!
//! The file ends with a CRC-64 (Jones) of everything before it; a truncated
//! or corrupt file is refused with the offset and what was expected.

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::crc64::crc64;
use super::lzf;
use crate::config::Config;
use crate::db::{Db, Hash, List, NodeLimit, Set, Value, ValueRef, ZSet};

pub const RDB_VERSION: u32 = 10;
/// Oldest and newest versions we read.
const MIN_VERSION: u32 = 1;
const MAX_VERSION: u32 = 12;

// Object types.
const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_ZSET: u8 = 3;
const T_HASH: u8 = 4;
const T_ZSET_2: u8 = 5;
const T_MODULE: u8 = 6;
const T_MODULE_2: u8 = 7;
const T_HASH_ZIPMAP: u8 = 9;
const T_LIST_ZIPLIST: u8 = 10;
const T_SET_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_LIST_QUICKLIST: u8 = 14;
const T_STREAM_LISTPACKS: u8 = 15;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;
const T_STREAM_LISTPACKS_2: u8 = 19;
const T_SET_LISTPACK: u8 = 20;
const T_STREAM_LISTPACKS_3: u8 = 21;

// Opcodes.
const OP_FUNCTION2: u8 = 245;
const OP_FUNCTION_PRE_GA: u8 = 246;
const OP_MODULE_AUX: u8 = 247;
const OP_IDLE: u8 = 248;
const OP_FREQ: u8 = 249;
const OP_AUX: u8 = 250;
const OP_RESIZEDB: u8 = 251;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_EXPIRETIME: u8 = 253;
const OP_SELECTDB: u8 = 254;
const OP_EOF: u8 = 255;

// ---------------------------------------------------------------- writing

/// A writer that keeps the running CRC of everything written.
struct RdbWriter<W: Write> {
    out: BufWriter<W>,
    crc: u64,
    /// `rdbcompression`: LZF-compress strings longer than 20 bytes.
    compress: bool,
}

impl<W: Write> RdbWriter<W> {
    fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc = crc64(self.crc, b);
        self.out.write_all(b)
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
                self.raw(&[0xC3])?;
                self.len(c.len() as u64)?;
                self.len(s.len() as u64)?;
                return self.raw(&c);
            }
        }
        self.len(s.len() as u64)?;
        self.raw(s)
    }
}

/// What the writer takes from the configuration and the server.
#[derive(Debug, Clone)]
pub struct SaveOptions {
    /// LZF-compress strings (`rdbcompression`).
    pub compress: bool,
    /// Write a CRC-64 trailer; zero when off (`rdbchecksum`).
    pub checksum: bool,
    /// Sleep this many microseconds per key (`rdb-key-save-delay`, a test aid).
    pub key_save_delay_us: i64,
    /// Recorded in the `used-mem` aux field.
    pub used_memory: usize,
}

impl SaveOptions {
    pub fn from_config(cfg: &Config, used_memory: usize) -> SaveOptions {
        SaveOptions {
            compress: cfg.rdbcompression,
            checksum: cfg.rdbchecksum,
            key_save_delay_us: cfg.rdb_key_save_delay,
            used_memory,
        }
    }
}

/// What the loader takes from the configuration: whether to verify the
/// checksum and the limits that decide each loaded value's encoding.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub checksum: bool,
    list_node: NodeLimit,
    /// (entries, value bytes) of a listpack hash / sorted set.
    hash_limits: (usize, usize),
    zset_limits: (usize, usize),
    intset_max: usize,
}

impl LoadOptions {
    pub fn from_config(cfg: &Config) -> LoadOptions {
        LoadOptions {
            checksum: cfg.rdbchecksum,
            list_node: NodeLimit(cfg.list_max_listpack_size),
            hash_limits: (
                cfg.hash_max_listpack_entries.max(0) as usize,
                cfg.hash_max_listpack_value.max(0) as usize,
            ),
            zset_limits: (
                cfg.zset_max_listpack_entries.max(0) as usize,
                cfg.zset_max_listpack_value.max(0) as usize,
            ),
            intset_max: cfg.set_max_intset_entries.max(0) as usize,
        }
    }
}

/// Serialise every database of `dbs` in RDB format to `w`.
pub fn write_rdb<W: Write>(dbs: &[Db], opts: &SaveOptions, w: W) -> io::Result<()> {
    let mut r = RdbWriter {
        out: BufWriter::with_capacity(1 << 16, w),
        crc: 0,
        compress: opts.compress,
    };
    r.raw(format!("REDIS{RDB_VERSION:04}").as_bytes())?;
    let now_ms = crate::util::unix_time_ms();
    let aux = [
        ("redis-ver", crate::REDIS_VERSION.to_string()),
        ("redis-bits", "64".to_string()),
        ("ctime", (now_ms / 1000).to_string()),
        ("used-mem", opts.used_memory.to_string()),
        ("aof-base", "0".to_string()),
    ];
    for (k, v) in aux {
        r.raw(&[OP_AUX])?;
        r.string(k.as_bytes())?;
        r.string(v.as_bytes())?;
    }
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
            let res = (|| -> io::Result<()> {
                if e.has_expire() {
                    if let Some(t) = db.get_expire(e.key()) {
                        r.raw(&[OP_EXPIRETIME_MS])?;
                        r.raw(&t.to_le_bytes())?;
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
    let crc = if opts.checksum { r.crc } else { 0 };
    r.out.write_all(&crc.to_le_bytes())?;
    r.out.flush()
}

fn write_entry<W: Write>(r: &mut RdbWriter<W>, e: &crate::db::Entry) -> io::Result<()> {
    let key = e.key();
    match e.value() {
        ValueRef::Str(s) => {
            r.raw(&[T_STRING])?;
            r.string(key)?;
            r.string(s)
        }
        ValueRef::Int(n) => {
            r.raw(&[T_STRING])?;
            r.string(key)?;
            r.string(n.to_string().as_bytes())
        }
        ValueRef::Boxed(v) => match v {
            Value::Str(s) => {
                r.raw(&[T_STRING])?;
                r.string(key)?;
                r.string(s)
            }
            Value::List(l) => {
                r.raw(&[T_LIST])?;
                r.string(key)?;
                r.len(l.len() as u64)?;
                for item in l.iter() {
                    r.string(item)?;
                }
                Ok(())
            }
            Value::Set(s) => {
                r.raw(&[T_SET])?;
                r.string(key)?;
                let members = s.members();
                r.len(members.len() as u64)?;
                for m in &members {
                    r.string(m)?;
                }
                Ok(())
            }
            Value::Hash(h) => {
                r.raw(&[T_HASH])?;
                r.string(key)?;
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
                r.string(key)?;
                let items = z.items();
                r.len(items.len() as u64)?;
                for (m, s) in items {
                    r.string(m)?;
                    r.raw(&s.to_le_bytes())?;
                }
                Ok(())
            }
        },
    }
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
    let tmp_name = format!("temp-{}.rdb", std::process::id());
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
    let res = write_rdb(dbs, opts, &file).and_then(|_| file.sync_all());
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

// ---------------------------------------------------------------- loading

/// What a load found.
#[derive(Debug, Default, Clone)]
pub struct LoadStats {
    pub keys: u64,
    pub expired_skipped: u64,
    pub version: u32,
    pub per_type: [u64; 5],
    pub with_expire: u64,
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, String>;

impl<'a> Reader<'a> {
    fn fail<T>(&self, what: &str) -> R<T> {
        Err(format!("offset {}: {}", self.pos, what))
    }

    fn bytes(&mut self, n: usize, what: &str) -> R<&'a [u8]> {
        match self.pos.checked_add(n).filter(|&e| e <= self.data.len()) {
            Some(end) => {
                let b = &self.data[self.pos..end];
                self.pos = end;
                Ok(b)
            }
            None => self.fail(&format!(
                "unexpected end of file reading {what} ({n} bytes)"
            )),
        }
    }

    fn u8(&mut self, what: &str) -> R<u8> {
        Ok(self.bytes(1, what)?[0])
    }

    /// A length, or a special encoding marker: `(value, is_encoded)`.
    fn len_enc(&mut self) -> R<(u64, bool)> {
        let b = self.u8("length")?;
        match b >> 6 {
            0 => Ok(((b & 0x3f) as u64, false)),
            1 => Ok((
                (((b & 0x3f) as u64) << 8) | self.u8("length")? as u64,
                false,
            )),
            2 => match b {
                0x80 => Ok((
                    u32::from_be_bytes(self.bytes(4, "length")?.try_into().unwrap()) as u64,
                    false,
                )),
                0x81 => Ok((
                    u64::from_be_bytes(self.bytes(8, "length")?.try_into().unwrap()),
                    false,
                )),
                _ => self.fail(&format!("invalid length prefix 0x{b:02x}")),
            },
            _ => Ok(((b & 0x3f) as u64, true)),
        }
    }

    fn len(&mut self) -> R<u64> {
        match self.len_enc()? {
            (n, false) => Ok(n),
            _ => self.fail("expected a length, found a string encoding"),
        }
    }

    /// A count of elements that must be plausible for the remaining bytes.
    fn count(&mut self, min_bytes_each: usize) -> R<usize> {
        let n = self.len()?;
        let left = (self.data.len() - self.pos) as u64;
        if n > left / min_bytes_each.max(1) as u64 + 1 {
            return self.fail(&format!(
                "element count {n} larger than the rest of the file"
            ));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> R<Cow<'a, [u8]>> {
        let (n, enc) = self.len_enc()?;
        if !enc {
            return Ok(Cow::Borrowed(self.bytes(n as usize, "string")?));
        }
        match n {
            0 => Ok(Cow::Owned(
                (self.u8("int8")? as i8).to_string().into_bytes(),
            )),
            1 => Ok(Cow::Owned(
                i16::from_le_bytes(self.bytes(2, "int16")?.try_into().unwrap())
                    .to_string()
                    .into_bytes(),
            )),
            2 => Ok(Cow::Owned(
                i32::from_le_bytes(self.bytes(4, "int32")?.try_into().unwrap())
                    .to_string()
                    .into_bytes(),
            )),
            3 => {
                let clen = self.len()? as usize;
                let len = self.len()? as usize;
                let at = self.pos;
                let comp = self.bytes(clen, "compressed string")?;
                match lzf::decompress(comp, len) {
                    Some(v) => Ok(Cow::Owned(v)),
                    None => Err(format!("offset {at}: invalid LZF compressed string")),
                }
            }
            _ => self.fail(&format!("unknown string encoding {n}")),
        }
    }

    fn f64_le(&mut self) -> R<f64> {
        Ok(f64::from_le_bytes(
            self.bytes(8, "double")?.try_into().unwrap(),
        ))
    }

    /// Old-style double: 1-byte length then ASCII, 253/254/255 = nan/+inf/-inf.
    fn f64_str(&mut self) -> R<f64> {
        match self.u8("double length")? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let b = self.bytes(n as usize, "double")?;
                std::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .map_or_else(|| self.fail("invalid double"), Ok)
            }
        }
    }
}

/// Decode a listpack into its elements (integers as decimal strings).
fn listpack_items(lp: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let bad = |what: &str| Err(format!("invalid listpack: {what}"));
    if lp.len() < 7 {
        return bad("too short");
    }
    let total = u32::from_le_bytes(lp[0..4].try_into().unwrap()) as usize;
    if total != lp.len() {
        return bad("size header does not match");
    }
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let Some(&b) = lp.get(p) else {
            return bad("missing end marker");
        };
        if b == 0xFF {
            break;
        }
        let get = |from: usize, n: usize| lp.get(from..from + n).ok_or("truncated entry");
        let (item, size): (Vec<u8>, usize) = if b & 0x80 == 0 {
            ((b & 0x7f).to_string().into_bytes(), 1)
        } else if b & 0xC0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (get(p + 1, n)?.to_vec(), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            let v = (((b & 0x1f) as u16) << 8) | *lp.get(p + 1).ok_or("truncated entry")? as u16;
            let v = ((v << 3) as i16 >> 3) as i64;
            (v.to_string().into_bytes(), 2)
        } else if b & 0xF0 == 0xE0 {
            let n =
                (((b & 0x0f) as usize) << 8) | *lp.get(p + 1).ok_or("truncated entry")? as usize;
            (get(p + 2, n)?.to_vec(), 2 + n)
        } else {
            match b {
                0xF0 => {
                    let n = u32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap()) as usize;
                    (get(p + 5, n)?.to_vec(), 5 + n)
                }
                0xF1 => (
                    i16::from_le_bytes(get(p + 1, 2)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    3,
                ),
                0xF2 => {
                    let b3 = get(p + 1, 3)?;
                    let v = (((b3[0] as u32) | (b3[1] as u32) << 8 | (b3[2] as u32) << 16) << 8)
                        as i32
                        >> 8;
                    (v.to_string().into_bytes(), 4)
                }
                0xF3 => (
                    i32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    5,
                ),
                0xF4 => (
                    i64::from_le_bytes(get(p + 1, 8)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    9,
                ),
                _ => return bad("unknown entry encoding"),
            }
        };
        let backlen = if size < 128 {
            1
        } else if size < 16384 {
            2
        } else if size < 2097152 {
            3
        } else if size < 268435456 {
            4
        } else {
            5
        };
        out.push(item);
        p += size + backlen;
    }
    Ok(out)
}

/// Decode a ziplist (pre-7.0 compact encoding) into its elements.
fn ziplist_items(zl: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let bad = |what: &str| Err(format!("invalid ziplist: {what}"));
    if zl.len() < 11 {
        return bad("too short");
    }
    if u32::from_le_bytes(zl[0..4].try_into().unwrap()) as usize != zl.len() {
        return bad("size header does not match");
    }
    let mut out = Vec::new();
    let mut p = 10;
    loop {
        let Some(&first) = zl.get(p) else {
            return bad("missing end marker");
        };
        if first == 0xFF {
            break;
        }
        // prevlen: 1 byte, or 0xFE and 4 more.
        p += if first == 0xFE { 5 } else { 1 };
        let get = |from: usize, n: usize| zl.get(from..from + n).ok_or("truncated entry");
        let Some(&enc) = zl.get(p) else {
            return bad("truncated entry");
        };
        let (item, size): (Vec<u8>, usize) = match enc >> 6 {
            0 => {
                let n = (enc & 0x3f) as usize;
                (get(p + 1, n)?.to_vec(), 1 + n)
            }
            1 => {
                let n = (((enc & 0x3f) as usize) << 8)
                    | *zl.get(p + 1).ok_or("truncated entry")? as usize;
                (get(p + 2, n)?.to_vec(), 2 + n)
            }
            2 => {
                let n = u32::from_be_bytes(get(p + 1, 4)?.try_into().unwrap()) as usize;
                (get(p + 5, n)?.to_vec(), 5 + n)
            }
            _ => match enc {
                0xC0 => (
                    i16::from_le_bytes(get(p + 1, 2)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    3,
                ),
                0xD0 => (
                    i32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    5,
                ),
                0xE0 => (
                    i64::from_le_bytes(get(p + 1, 8)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    9,
                ),
                0xF0 => {
                    let b = get(p + 1, 3)?;
                    let v = (((b[0] as u32) | (b[1] as u32) << 8 | (b[2] as u32) << 16) << 8)
                        as i32
                        >> 8;
                    (v.to_string().into_bytes(), 4)
                }
                0xFE => (
                    (*zl.get(p + 1).ok_or("truncated entry")? as i8)
                        .to_string()
                        .into_bytes(),
                    2,
                ),
                0xF1..=0xFD => (((enc & 0x0f) - 1).to_string().into_bytes(), 1),
                _ => return bad("unknown entry encoding"),
            },
        };
        out.push(item);
        p += size;
    }
    Ok(out)
}

/// Decode a zipmap (the oldest compact hash encoding) into field, value, ….
fn zipmap_items(zm: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let bad = || Err("invalid zipmap".to_string());
    let mut out = Vec::new();
    let mut p = 1;
    let read_len = |p: &mut usize| -> Option<usize> {
        let b = *zm.get(*p)?;
        if b < 254 {
            *p += 1;
            Some(b as usize)
        } else if b == 254 {
            let n = u32::from_le_bytes(zm.get(*p + 1..*p + 5)?.try_into().ok()?) as usize;
            *p += 5;
            Some(n)
        } else {
            None
        }
    };
    loop {
        match zm.get(p) {
            None => return bad(),
            Some(0xFF) => break,
            _ => {}
        }
        let Some(klen) = read_len(&mut p) else {
            return bad();
        };
        let Some(key) = zm.get(p..p + klen) else {
            return bad();
        };
        p += klen;
        let Some(vlen) = read_len(&mut p) else {
            return bad();
        };
        let Some(&free) = zm.get(p) else { return bad() };
        p += 1;
        let Some(val) = zm.get(p..p + vlen) else {
            return bad();
        };
        p += vlen + free as usize;
        out.push(key.to_vec());
        out.push(val.to_vec());
    }
    Ok(out)
}

/// Decode an intset into decimal strings.
fn intset_items(is: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    if is.len() < 8 {
        return Err("invalid intset: too short".into());
    }
    let width = u32::from_le_bytes(is[0..4].try_into().unwrap()) as usize;
    let n = u32::from_le_bytes(is[4..8].try_into().unwrap()) as usize;
    if !matches!(width, 2 | 4 | 8) || is.len() != 8 + width * n {
        return Err("invalid intset: bad encoding or size".into());
    }
    Ok((0..n)
        .map(|i| {
            let b = &is[8 + i * width..8 + (i + 1) * width];
            let v: i64 = match width {
                2 => i16::from_le_bytes(b.try_into().unwrap()) as i64,
                4 => i32::from_le_bytes(b.try_into().unwrap()) as i64,
                _ => i64::from_le_bytes(b.try_into().unwrap()),
            };
            v.to_string().into_bytes()
        })
        .collect())
}

fn type_name(t: u8) -> &'static str {
    match t {
        T_MODULE | T_MODULE_2 => "module",
        T_STREAM_LISTPACKS | T_STREAM_LISTPACKS_2 | T_STREAM_LISTPACKS_3 => "stream",
        _ => "unknown",
    }
}

/// Read one value of type `t` into a boxed value or string.
fn read_value<'a>(r: &mut Reader<'a>, t: u8, opts: &LoadOptions) -> R<Loaded<'a>> {
    let node = opts.list_node;
    let hash_lim = opts.hash_limits;
    let zset_lim = opts.zset_limits;
    let intset_max = opts.intset_max;
    let make_list = |items: &mut dyn Iterator<Item = Vec<u8>>| {
        let mut l = List::default();
        for i in items {
            l.push_back(&i, node);
        }
        Loaded::Value(Value::List(l))
    };
    let make_hash = |pairs: Vec<Vec<u8>>| -> R<Loaded> {
        if !pairs.len().is_multiple_of(2) {
            return Err("hash with an odd number of elements".into());
        }
        let mut h = Hash::default();
        for p in pairs.chunks(2) {
            if !h.set(&p[0], &p[1], hash_lim.0, hash_lim.1) {
                return Err("duplicate hash field".into());
            }
        }
        Ok(Loaded::Value(Value::Hash(h)))
    };
    let make_zset = |pairs: Vec<(Vec<u8>, f64)>| -> R<Loaded> {
        let maxlen = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        let mut z = ZSet::with_hint(pairs.len(), maxlen, zset_lim.0, zset_lim.1);
        for (m, s) in pairs {
            if s.is_nan() {
                return Err("zset score is NaN".into());
            }
            if z.score(&m).is_some() {
                return Err("duplicate zset member".into());
            }
            z.insert(&m, s, zset_lim.0, zset_lim.1);
        }
        Ok(Loaded::Value(Value::ZSet(z)))
    };
    let make_set = |members: Vec<Vec<u8>>| -> R<Loaded> {
        let mut s = Set::default();
        for m in members {
            if !s.add(&m, intset_max) {
                return Err("duplicate set member".into());
            }
        }
        Ok(Loaded::Value(Value::Set(s)))
    };
    match t {
        T_STRING => Ok(Loaded::Str(r.string()?)),
        T_LIST => {
            let n = r.count(1)?;
            let mut items = Vec::with_capacity(n.min(1 << 20));
            for _ in 0..n {
                items.push(r.string()?.into_owned());
            }
            Ok(make_list(&mut items.into_iter()))
        }
        T_SET => {
            let n = r.count(1)?;
            let mut items = Vec::with_capacity(n.min(1 << 20));
            for _ in 0..n {
                items.push(r.string()?.into_owned());
            }
            make_set(items)
        }
        T_ZSET | T_ZSET_2 => {
            let n = r.count(2)?;
            let mut pairs = Vec::with_capacity(n.min(1 << 20));
            for _ in 0..n {
                let m = r.string()?.into_owned();
                let s = if t == T_ZSET_2 {
                    r.f64_le()?
                } else {
                    r.f64_str()?
                };
                pairs.push((m, s));
            }
            make_zset(pairs)
        }
        T_HASH => {
            let n = r.count(2)?;
            let mut items = Vec::with_capacity((2 * n).min(1 << 20));
            for _ in 0..2 * n {
                items.push(r.string()?.into_owned());
            }
            make_hash(items)
        }
        T_SET_INTSET => make_set(intset_items(&r.string()?)?),
        T_LIST_ZIPLIST => Ok(make_list(&mut ziplist_items(&r.string()?)?.into_iter())),
        T_HASH_ZIPLIST => make_hash(ziplist_items(&r.string()?)?),
        T_HASH_ZIPMAP => make_hash(zipmap_items(&r.string()?)?),
        T_ZSET_ZIPLIST => {
            let items = ziplist_items(&r.string()?)?;
            if !items.len().is_multiple_of(2) {
                return Err("zset ziplist with an odd number of elements".into());
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            for p in items.chunks(2) {
                let s = crate::util::parse_f64(&p[1]).ok_or("invalid zset score")?;
                pairs.push((p[0].clone(), s));
            }
            make_zset(pairs)
        }
        T_LIST_QUICKLIST => {
            let nodes = r.count(1)?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                items.extend(ziplist_items(&r.string()?)?);
            }
            Ok(make_list(&mut items.into_iter()))
        }
        T_HASH_LISTPACK => make_hash(listpack_items(&r.string()?)?),
        T_SET_LISTPACK => make_set(listpack_items(&r.string()?)?),
        T_ZSET_LISTPACK => {
            let items = listpack_items(&r.string()?)?;
            if !items.len().is_multiple_of(2) {
                return Err("zset listpack with an odd number of elements".into());
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            for p in items.chunks(2) {
                let s = std::str::from_utf8(&p[1])
                    .ok()
                    .and_then(|s| crate::util::parse_f64(s.as_bytes()))
                    .ok_or("invalid zset score")?;
                pairs.push((p[0].clone(), s));
            }
            make_zset(pairs)
        }
        T_LIST_QUICKLIST_2 => {
            let nodes = r.count(2)?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                let container = r.len()?;
                let data = r.string()?;
                match container {
                    1 => items.push(data.into_owned()),
                    2 => items.extend(listpack_items(&data)?),
                    _ => return r.fail("invalid quicklist node container"),
                }
            }
            Ok(make_list(&mut items.into_iter()))
        }
        other => Err(format!(
            "values of type {} ({other}) are not supported",
            type_name(other)
        )),
    }
}

enum Loaded<'a> {
    /// A string value, borrowed from the mapped file when stored plain.
    Str(Cow<'a, [u8]>),
    Value(Value),
}

/// Load the RDB file at `path` into the (empty) databases `dbs`.
pub fn load_file(dbs: &mut [Db], opts: &LoadOptions, path: &Path) -> Result<LoadStats, String> {
    let file = File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    // SAFETY: the file is only read; kvstore replaces dumps by rename, never
    // by writing into an existing file, so the mapping does not change.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|e| format!("mapping {}: {e}", path.display()))?;
    load_bytes(dbs, opts, &map)
}

/// A load in progress: the loop runs it in slices so that clients get
/// `-LOADING` meanwhile instead of waiting.
#[derive(Debug)]
pub struct LoadState {
    pos: usize,
    db: usize,
    expire: Option<i64>,
    now: i64,
    pub stats: LoadStats,
    started: std::time::Instant,
    next_report: std::time::Instant,
    pub done: bool,
}

impl LoadState {
    /// Bytes of the file consumed so far.
    pub fn loaded_bytes(&self) -> usize {
        self.pos
    }

    pub fn started(&self) -> std::time::Instant {
        self.started
    }
}

/// Check the header of an RDB image and prepare to load it.
pub fn load_begin(data: &[u8]) -> Result<LoadState, String> {
    let mut r = Reader { data, pos: 0 };
    let magic = r.bytes(9, "header")?;
    if &magic[..5] != b"REDIS" {
        return Err("offset 0: not an RDB file (expected \"REDIS\")".into());
    }
    let version: u32 = std::str::from_utf8(&magic[5..])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or("offset 5: invalid RDB version")?;
    if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
        return Err(format!("offset 5: unsupported RDB version {version}"));
    }
    let started = std::time::Instant::now();
    Ok(LoadState {
        pos: r.pos,
        db: 0,
        expire: None,
        now: crate::util::unix_time_ms(),
        stats: LoadStats {
            version,
            ..Default::default()
        },
        started,
        next_report: started + std::time::Duration::from_secs(2),
        done: false,
    })
}

/// Load an RDB image from memory (the mapped file) in one go.
pub fn load_bytes(dbs: &mut [Db], opts: &LoadOptions, data: &[u8]) -> Result<LoadStats, String> {
    let mut st = load_begin(data)?;
    while !st.done {
        load_step(dbs, opts, data, &mut st, usize::MAX)?;
    }
    Ok(st.stats)
}

/// Load up to `max_keys` more keys of `data`; sets `st.done` at the end
/// (after verifying the checksum).
pub fn load_step(
    dbs: &mut [Db],
    opts: &LoadOptions,
    data: &[u8],
    st: &mut LoadState,
    max_keys: usize,
) -> Result<(), String> {
    let mut r = Reader { data, pos: st.pos };
    let mut budget = max_keys;
    loop {
        if budget == 0 {
            st.pos = r.pos;
            return Ok(());
        }
        let op = r.u8("opcode")?;
        match op {
            OP_EOF => break,
            OP_SELECTDB => {
                let at = r.pos;
                st.db = r.len()? as usize;
                if st.db >= dbs.len() {
                    return Err(format!(
                        "offset {at}: database {} out of range (databases is {})",
                        st.db,
                        dbs.len()
                    ));
                }
            }
            OP_RESIZEDB => {
                let keys = r.len()?;
                let expires = r.len()?;
                // Size the tables once instead of growing them key by key
                // (bounded by what the rest of the file could hold).
                let left = (data.len() - r.pos) as u64;
                dbs[st.db].main.reserve(keys.min(left / 4) as usize);
                dbs[st.db].expires.reserve(expires.min(left / 12) as usize);
            }
            OP_AUX => {
                r.string()?;
                r.string()?;
            }
            OP_EXPIRETIME_MS => {
                st.expire = Some(i64::from_le_bytes(
                    r.bytes(8, "expire time")?.try_into().unwrap(),
                ))
            }
            OP_EXPIRETIME => {
                st.expire = Some(
                    i32::from_le_bytes(r.bytes(4, "expire time")?.try_into().unwrap()) as i64
                        * 1000,
                )
            }
            OP_IDLE => {
                r.len()?;
            }
            OP_FREQ => {
                r.u8("frequency")?;
            }
            OP_FUNCTION2 => {
                // A function library (Lua source). kvstore has no scripting
                // engine: the library is read and dropped, loudly.
                let code = r.string()?;
                let name = String::from_utf8_lossy(&code)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                tracing::warn!("RDB holds a function library ({name}); functions are not supported, it is not loaded");
            }
            OP_MODULE_AUX | OP_FUNCTION_PRE_GA => {
                return r.fail("module data and pre-7.0 function records are not supported");
            }
            t => {
                let key = r.string()?;
                let at = r.pos;
                let value = read_value(&mut r, t, opts).map_err(|e| {
                    if e.starts_with("offset") {
                        format!("{e} (key '{}')", String::from_utf8_lossy(&key))
                    } else {
                        format!("offset {at}: key '{}': {e}", String::from_utf8_lossy(&key))
                    }
                })?;
                budget -= 1;
                let ttl = st.expire.take();
                if ttl.is_some_and(|t| t <= st.now) {
                    st.stats.expired_skipped += 1;
                    continue;
                }
                let d = &mut dbs[st.db];
                let (entry, kind) = match value {
                    Loaded::Str(s) => (crate::db::Entry::string(&key, &s), 0),
                    Loaded::Value(v) => {
                        let kind = match &v {
                            Value::List(_) => 1,
                            Value::Set(_) => 2,
                            Value::ZSet(_) => 3,
                            _ => 4,
                        };
                        (
                            crate::db::Entry::new(
                                &key,
                                crate::db::NewValue::Boxed(Box::new(v)),
                                false,
                            ),
                            kind,
                        )
                    }
                };
                if d.main.insert(entry).is_some() {
                    return Err(format!(
                        "offset {at}: duplicate key '{}'",
                        String::from_utf8_lossy(&key)
                    ));
                }
                if let Some(t) = ttl {
                    d.set_expire(&key, t);
                    st.stats.with_expire += 1;
                }
                st.stats.keys += 1;
                st.stats.per_type[kind] += 1;
                if st.stats.keys.is_multiple_of(65536)
                    && std::time::Instant::now() >= st.next_report
                {
                    st.next_report += std::time::Duration::from_secs(2);
                    let secs = st.started.elapsed().as_secs_f64().max(0.001);
                    tracing::info!(
                        "Loading RDB: {:.0}% ({} keys, {:.0} keys/s)",
                        r.pos as f64 * 100.0 / data.len() as f64,
                        st.stats.keys,
                        st.stats.keys as f64 / secs
                    );
                }
            }
        }
    }
    let body_end = r.pos;
    if st.stats.version >= 5 {
        let trailer = r.bytes(8, "CRC64 checksum")?;
        let stored = u64::from_le_bytes(trailer.try_into().unwrap());
        if stored != 0 && opts.checksum {
            let computed = crc64(0, &data[..body_end]);
            if computed != stored {
                return Err(format!("offset {body_end}: wrong RDB checksum: expected {stored:016x}, computed {computed:016x}"));
            }
        }
    }
    st.pos = r.pos;
    st.done = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_listpack_entries() {
        // Built by hand: 7-bit uint 5, 6-bit str "ab", 13-bit int -2, end.
        let mut lp = vec![0, 0, 0, 0, 3, 0];
        lp.extend_from_slice(&[0x05, 1]);
        lp.extend_from_slice(&[0x82, b'a', b'b', 3]);
        let v: u16 = (-2i16 as u16) & 0x1fff;
        lp.extend_from_slice(&[0xC0 | (v >> 8) as u8, v as u8, 2]);
        lp.push(0xFF);
        let total = lp.len() as u32;
        lp[0..4].copy_from_slice(&total.to_le_bytes());
        let items = listpack_items(&lp).unwrap();
        assert_eq!(items, vec![b"5".to_vec(), b"ab".to_vec(), b"-2".to_vec()]);
    }

    #[test]
    fn decodes_ziplists_and_zipmaps() {
        // Entries: "ab" (6-bit string), 7 (4-bit immediate), -300 (int16), end.
        let mut zl = vec![0; 10];
        zl.extend_from_slice(&[0x00, 0x02, b'a', b'b']);
        zl.extend_from_slice(&[0x04, 0xF8]);
        zl.extend_from_slice(&[0x02, 0xC0]);
        zl.extend_from_slice(&(-300i16).to_le_bytes());
        zl.push(0xFF);
        let total = zl.len() as u32;
        zl[0..4].copy_from_slice(&total.to_le_bytes());
        zl[8..10].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(
            ziplist_items(&zl).unwrap(),
            vec![b"ab".to_vec(), b"7".to_vec(), b"-300".to_vec()]
        );
        assert!(ziplist_items(&zl[..zl.len() - 1]).is_err());
        // zipmap: {"f": "vv"} with one free byte.
        let zm = [1, 1, b'f', 2, 1, b'v', b'v', 0, 0xFF];
        assert_eq!(
            zipmap_items(&zm).unwrap(),
            vec![b"f".to_vec(), b"vv".to_vec()]
        );
        assert!(zipmap_items(&zm[..5]).is_err());
    }

    #[test]
    fn decodes_intsets() {
        let mut is = vec![2, 0, 0, 0, 2, 0, 0, 0];
        is.extend_from_slice(&(-3i16).to_le_bytes());
        is.extend_from_slice(&7i16.to_le_bytes());
        assert_eq!(
            intset_items(&is).unwrap(),
            vec![b"-3".to_vec(), b"7".to_vec()]
        );
        assert!(intset_items(&is[..9]).is_err());
    }
}

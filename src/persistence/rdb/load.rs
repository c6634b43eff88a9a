//! The RDB loader: reads a mapped file (never a heap copy) from version 1
//! to 12, in slices so the loop can serve -LOADING meanwhile.

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;

use super::encoding::*;
use super::*;
use crate::db::{Db, Hash, List, Set, Value, ZSet};
use crate::persistence::crc64::crc64;
use crate::persistence::lzf;

/// What a load found.
#[derive(Debug, Default, Clone)]
pub struct LoadStats {
    /// The replication history the dump was taken at: its `repl-id`,
    /// `repl-offset` and `repl-stream-db` aux fields (see `repl()`).
    pub repl_id: Option<String>,
    pub repl_offset: Option<i64>,
    pub repl_stream_db: i64,
    /// The `used-mem` aux field: memory the writer used (INFO
    /// loading_rdb_used_mem).
    pub used_mem: u64,
    pub keys: u64,
    pub expired_skipped: u64,
    pub version: u32,
    pub per_type: [u64; 5],
    pub with_expire: u64,
}

impl LoadStats {
    /// Where in a replication history the dump was taken, if it says.
    pub fn repl(&self) -> Option<super::ReplInfo> {
        Some(super::ReplInfo {
            stream_db: self.repl_stream_db,
            id: self.repl_id.clone().filter(|id| id.len() == 40)?,
            offset: self.repl_offset?,
        })
    }
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
                let key = r.string()?;
                let value = r.string()?;
                let text = || String::from_utf8_lossy(&value).to_string();
                match key.as_ref() {
                    b"repl-id" => st.stats.repl_id = Some(text()),
                    b"repl-offset" => st.stats.repl_offset = text().parse().ok(),
                    b"repl-stream-db" => st.stats.repl_stream_db = text().parse().unwrap_or(0),
                    b"used-mem" => st.stats.used_mem = text().parse().unwrap_or(0),
                    _ => {}
                }
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

//! The RDB loader: reads a mapped file (never a heap copy) from version 1
//! to 12, in slices so the loop can serve -LOADING meanwhile.

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;

use super::encoding::*;
use super::*;
use crate::db::quicklist::Container;
use crate::db::{Db, Hash, List, Set, Value, ZSet};
use crate::persistence::crc64::crc64;
use crate::persistence::lzf;
use crate::protocol::ARG_LEN_MAX;

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
    /// Empty collections skipped (not loaded as keys).
    pub empty_skipped: u64,
    /// The keys skipped as expired, by database, when the options ask.
    pub expired_keys: Vec<(usize, Vec<u8>)>,
    pub version: u32,
    pub per_type: [u64; 5],
    pub with_expire: u64,
    /// The code of the function libraries in the image.
    pub functions: Vec<Vec<u8>>,
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
    /// `data` is the whole image; otherwise it is what has arrived so far
    /// of one still being received, and running out of it means "wait".
    complete: bool,
    /// A read ran past the end of an incomplete image.
    short: bool,
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
            None => {
                self.short = !self.complete;
                self.fail(&format!(
                    "unexpected end of file reading {what} ({n} bytes)"
                ))
            }
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
            // Of an image still arriving, the rest may yet come.
            self.short = !self.complete;
            return self.fail(&format!(
                "element count {n} larger than the rest of the file"
            ));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> R<Cow<'a, [u8]>> {
        let (n, enc) = self.len_enc()?;
        // Keys and elements are stored with a 32-bit length.
        if !enc && n > ARG_LEN_MAX as u64 {
            return self.fail("a string longer than 4 GiB");
        }
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
                if len > ARG_LEN_MAX {
                    return self.fail("a compressed string longer than 4 GiB");
                }
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

/// A compact encoding's failed check, named as Redis's rdbLoadObject names
/// it (`Zset ziplist integrity check failed`), with what was wrong.
fn integrity(kind: &str, e: String) -> String {
    let detail = e
        .split_once("integrity check failed: ")
        .map_or(e.as_str(), |(_, d)| d);
    format!("{kind} integrity check failed: {detail}")
}

/// An element being loaded: borrowed from the map, or decoded.
type B<'a> = Cow<'a, [u8]>;

fn owned(items: Vec<Vec<u8>>) -> Vec<B<'static>> {
    items.into_iter().map(Cow::Owned).collect()
}

fn make_hash<'a>(pairs: &[B<'_>], lim: (usize, usize)) -> R<Loaded<'a>> {
    if !pairs.len().is_multiple_of(2) {
        return Err("hash with an odd number of elements".into());
    }
    let mut h = Hash::default();
    // Room for it all at once where it stays packed.
    if pairs.len() / 2 <= lim.0 && pairs.iter().all(|p| p.len() <= lim.1) {
        h.reserve_packed(
            pairs
                .iter()
                .map(|p| crate::db::packed::Packed::packed_len(p))
                .sum(),
        );
    }
    for p in pairs.chunks(2) {
        if !h.set(&p[0], &p[1], lim.0, lim.1) {
            return Err("Duplicate hash fields detected (listpack with dup elements)".into());
        }
    }
    Ok(Loaded::Value(Value::Hash(h)))
}

fn make_zset<'a>(pairs: &[(B<'_>, f64)], lim: (usize, usize)) -> R<Loaded<'a>> {
    let maxlen = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    // A small one in order (as dumps write them) is packed as it comes.
    if pairs.len() <= lim.0 && maxlen <= lim.1 {
        let refs: Vec<(&[u8], f64)> = pairs.iter().map(|(m, s)| (&m[..], *s)).collect();
        if let Some(z) = ZSet::packed_from_sorted(&refs) {
            return Ok(Loaded::Value(Value::ZSet(z)));
        }
    }
    let mut z = ZSet::with_hint(pairs.len(), maxlen, lim.0, lim.1);
    for (m, s) in pairs {
        if s.is_nan() {
            return Err("zset score is NaN".into());
        }
        if z.score(m).is_some() {
            return Err("duplicate zset member".into());
        }
        z.insert(m, *s, lim.0, lim.1);
    }
    Ok(Loaded::Value(Value::ZSet(z)))
}

fn make_set<'a>(members: &[B<'_>], intset_max: usize) -> R<Loaded<'a>> {
    let mut s = Set::default();
    for m in members {
        if !s.add(m, intset_max) {
            return Err("duplicate set member".into());
        }
    }
    Ok(Loaded::Value(Value::Set(s)))
}

/// Read one value of type `t` into a boxed value or string.
fn read_value<'a>(r: &mut Reader<'a>, t: u8, opts: &LoadOptions) -> R<Loaded<'a>> {
    let hash_lim = opts.hash_limits;
    let zset_lim = opts.zset_limits;
    let intset_max = opts.intset_max;
    let new_list = || List::new(opts.list_fill, opts.list_compress);
    // Element by element, as Redis's quicklistPushTail (RDB_TYPE_LIST, a
    // ziplist list): the nodes are this server's.
    let make_list = |items: &mut dyn Iterator<Item = Vec<u8>>| {
        let mut l = new_list();
        for i in items {
            l.push_back(&i);
        }
        Loaded::Value(Value::List(l))
    };
    let make_hash = |items: &[B<'_>]| make_hash(items, hash_lim);
    let make_zset = |pairs: &[(B<'_>, f64)]| make_zset(pairs, zset_lim);
    let make_set = |members: &[B<'_>]| make_set(members, intset_max);
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
        // Plain types: elements borrowed from the map where they are
        // stored as they are.
        T_SET => {
            let n = r.count(1)?;
            let mut items = Vec::with_capacity(n.min(1 << 20));
            for _ in 0..n {
                items.push(r.string()?);
            }
            make_set(&items)
        }
        T_ZSET | T_ZSET_2 => {
            let n = r.count(2)?;
            let mut pairs = Vec::with_capacity(n.min(1 << 20));
            for _ in 0..n {
                let m = r.string()?;
                let s = if t == T_ZSET_2 {
                    r.f64_le()?
                } else {
                    r.f64_str()?
                };
                pairs.push((m, s));
            }
            make_zset(&pairs)
        }
        T_HASH => {
            let n = r.count(2)?;
            let mut items = Vec::with_capacity((2 * n).min(1 << 20));
            for _ in 0..2 * n {
                items.push(r.string()?);
            }
            make_hash(&items)
        }
        T_SET_INTSET => {
            let blob = r.string()?;
            let ints = intset_ints(&blob).map_err(|e| integrity("Intset", e))?;
            // In order with none twice, as an intset must be: taken as it is.
            if !ints.is_empty() && ints.len() <= intset_max && ints.windows(2).all(|w| w[0] < w[1])
            {
                return Ok(Loaded::Value(Value::Set(Set::Ints(ints))));
            }
            make_set(&owned(
                ints.iter().map(|v| v.to_string().into_bytes()).collect(),
            ))
        }
        T_LIST_ZIPLIST => {
            let blob = r.string()?;
            let items = ziplist_items(&blob).map_err(|e| integrity("List ziplist", e))?;
            Ok(make_list(&mut items.into_iter()))
        }
        T_HASH_ZIPLIST => {
            let blob = r.string()?;
            ziplist_items(&blob)
                .and_then(|items| make_hash(&owned(items)))
                .map_err(|e| integrity("Hash ziplist", e))
        }
        T_HASH_ZIPMAP => {
            let blob = r.string()?;
            make_hash(&owned(zipmap_items(&blob)?))
        }
        T_ZSET_ZIPLIST => {
            let blob = r.string()?;
            let items = ziplist_items(&blob).map_err(|e| integrity("Zset ziplist", e))?;
            if !items.len().is_multiple_of(2) {
                return Err("zset ziplist with an odd number of elements".into());
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            for p in items.chunks(2) {
                let s = crate::util::parse_f64(&p[1]).ok_or("invalid zset score")?;
                pairs.push((Cow::Borrowed(&p[0][..]), s));
            }
            make_zset(&pairs)
        }
        T_LIST_QUICKLIST => {
            // Each ziplist becomes a listpack node as it is (empty ones
            // are skipped), as Redis loads them.
            let nodes = r.count(1)?;
            let mut l = new_list();
            for _ in 0..nodes {
                let items = ziplist_items(&r.string()?)?;
                if items.is_empty() {
                    continue;
                }
                let mut node = crate::db::listpack::new();
                for i in &items {
                    crate::db::listpack::append(&mut node, i);
                }
                l.append_listpack(node);
            }
            Ok(Loaded::Value(Value::List(l)))
        }
        T_HASH_LISTPACK => {
            let blob = r.string()?;
            listpack_items(&blob)
                .and_then(|items| make_hash(&items))
                .map_err(|e| integrity("Hash listpack", e))
        }
        T_SET_LISTPACK => {
            let blob = r.string()?;
            make_set(&listpack_items(&blob).map_err(|e| integrity("Set listpack", e))?)
        }
        T_ZSET_LISTPACK => {
            let blob = r.string()?;
            let items = listpack_items(&blob).map_err(|e| integrity("Zset listpack", e))?;
            if !items.len().is_multiple_of(2) {
                return Err("zset listpack with an odd number of elements".into());
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            for p in items.chunks(2) {
                let s = std::str::from_utf8(&p[1])
                    .ok()
                    .and_then(|s| crate::util::parse_f64(s.as_bytes()))
                    .ok_or("invalid zset score")?;
                pairs.push((Cow::Borrowed(&p[0][..]), s));
            }
            make_zset(&pairs)
        }
        T_LIST_QUICKLIST_2 => {
            // Nodes as the writer had them: each one's container, then its
            // bytes (an LZF blob for a compressed node, which `string`
            // decompresses and checks). A listpack is validated before it
            // becomes a node; the list compresses it again at its own depth.
            let nodes = r.count(2)?;
            let mut l = new_list();
            for _ in 0..nodes {
                let container = r.len()?;
                if container != Container::Plain as u64 && container != Container::Packed as u64 {
                    return r.fail("quicklist integrity check failed: unknown node container");
                }
                let data = r.string()?;
                if data.is_empty() {
                    return r.fail("empty quicklist node");
                }
                if container == Container::Plain as u64 {
                    l.append_plain(data.into_owned());
                    continue;
                }
                if !crate::db::listpack::validate(&data) {
                    return r.fail("listpack integrity check failed");
                }
                if crate::db::listpack::len(&data) == 0 {
                    continue;
                }
                l.append_listpack(data.into_owned());
            }
            Ok(Loaded::Value(Value::List(l)))
        }
        T_STREAM_LISTPACKS | T_STREAM_LISTPACKS_2 | T_STREAM_LISTPACKS_3 => {
            let s = read_stream(r, t)?;
            Ok(Loaded::Value(Value::Stream(Box::new(s))))
        }
        other => Err(format!(
            "values of type {} ({other}) are not supported",
            type_name(other)
        )),
    }
}

/// A stream (Redis's rdbLoadObject for the three stream types), checked
/// deeply: a damaged node or group is refused, never kept.
fn read_stream(r: &mut Reader, t: u8) -> R<crate::db::Stream> {
    use crate::db::stream::{Consumer, Group, Nack, StreamId};
    let mut s = crate::db::Stream::new();
    let nodes = r.count(2)?;
    for _ in 0..nodes {
        let key = r.string()?;
        let master = StreamId::from_be_bytes(&key)
            .ok_or("stream node key entry is not the size of a stream ID")?;
        let node = r.string()?.into_owned();
        if !crate::db::listpack::validate(&node) {
            return Err("Stream listpack integrity check failed".into());
        }
        if crate::db::listpack::len(&node) == 0 {
            return Err("Empty listpack inside stream".into());
        }
        if s.nodes.insert(master, node).is_some() {
            return Err("Listpack re-added with existing key".into());
        }
    }
    let id = |r: &mut Reader| -> R<StreamId> { Ok(StreamId::new(r.len()?, r.len()?)) };
    s.length = r.len()?;
    s.last_id = id(r)?;
    let v2 = t != T_STREAM_LISTPACKS;
    if v2 {
        s.first_id = id(r)?;
        s.max_deleted_entry_id = id(r)?;
        s.entries_added = r.len()?;
    } else {
        s.entries_added = s.length;
    }
    // The nodes must walk before anything reads them.
    s.validate_nodes()?;
    if !v2 {
        s.first_id = s.edge_id(true).unwrap_or(StreamId::MIN);
    }
    let groups = r.count(3)?;
    for _ in 0..groups {
        let name = r.string()?.into_owned();
        let last_id = id(r)?;
        let entries_read = if v2 {
            r.len()? as i64
        } else {
            s.estimate_distance(last_id)
                .map_or(crate::db::stream::ENTRIES_READ_UNKNOWN, |d| d as i64)
        };
        let mut g = Group {
            last_id,
            entries_read,
            ..Group::default()
        };
        let pel = r.count(17)?;
        for _ in 0..pel {
            let raw = r.bytes(16, "PEL entry")?;
            let pid = StreamId::from_be_bytes(raw).expect("16 bytes");
            let delivery_time =
                i64::from_le_bytes(r.bytes(8, "delivery time")?.try_into().unwrap());
            let delivery_count = r.len()?;
            let nack = Nack {
                delivery_time,
                delivery_count,
                consumer: Vec::new(),
            };
            if g.pel.insert(pid, nack).is_some() {
                return Err("Duplicated global PEL entry loading stream consumer group".into());
            }
        }
        let consumers = r.count(9)?;
        for _ in 0..consumers {
            let cname = r.string()?.into_owned();
            let seen_time = i64::from_le_bytes(r.bytes(8, "seen time")?.try_into().unwrap());
            if t == T_STREAM_LISTPACKS_3 {
                // Redis 7.2's active time: 7.0 has no such field.
                r.bytes(8, "active time")?;
            }
            let mut c = Consumer {
                seen_time,
                ..Consumer::default()
            };
            let owned = r.count(16)?;
            for _ in 0..owned {
                let raw = r.bytes(16, "consumer PEL entry")?;
                let pid = StreamId::from_be_bytes(raw).expect("16 bytes");
                let Some(nack) = g.pel.get_mut(&pid) else {
                    return Err("Consumer entry not found in group global PEL".into());
                };
                nack.consumer = cname.clone();
                if !c.pel.insert(pid) {
                    return Err(
                        "Duplicated consumer PEL entry loading a stream consumer group".into(),
                    );
                }
            }
            if g.consumers.insert(cname, c).is_some() {
                return Err("Duplicate stream consumer detected".into());
            }
        }
        if s.groups.insert(name, g).is_some() {
            return Err("Duplicated consumer group name".into());
        }
    }
    s.validate_groups()?;
    Ok(s)
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
/// `-LOADING` meanwhile instead of waiting. The image may still be
/// arriving (a replica loads its master's dump as it is received): a
/// record that runs past what has arrived is read again once more came.
#[derive(Debug)]
pub struct LoadState {
    pos: usize,
    db: usize,
    expire: Option<i64>,
    /// The next key's IDLE (seconds) or FREQ (counter) record.
    idle: Option<u64>,
    freq: Option<u8>,
    now: i64,
    pub stats: LoadStats,
    started: std::time::Instant,
    next_report: std::time::Instant,
    pub done: bool,
    /// The CRC64 of the image up to `crc_pos` (folded as the load goes, so
    /// the image is read once, while it is in the cache).
    crc: u64,
    crc_pos: usize,
    /// The image must be at least this long before the next step can make
    /// progress (a record was cut by the end of what had arrived).
    need: usize,
}

impl LoadState {
    /// Bytes of the file consumed so far.
    pub fn loaded_bytes(&self) -> usize {
        self.pos
    }

    pub fn started(&self) -> std::time::Instant {
        self.started
    }

    /// How long an incomplete image must be before a step can progress.
    pub fn needs(&self) -> usize {
        self.need
    }
}

/// The length of an RDB header ("REDIS" and four version digits).
pub const HEADER_LEN: usize = 9;

/// Check the header of an RDB image and prepare to load it.
pub fn load_begin(data: &[u8]) -> Result<LoadState, String> {
    let mut r = Reader {
        data,
        pos: 0,
        complete: true,
        short: false,
    };
    let magic = r.bytes(HEADER_LEN, "header")?;
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
        idle: None,
        freq: None,
        now: crate::util::unix_time_ms(),
        stats: LoadStats {
            version,
            ..Default::default()
        },
        started,
        next_report: started + std::time::Duration::from_secs(2),
        done: false,
        crc: crc64(0, &data[..r.pos]),
        crc_pos: r.pos,
        need: 0,
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

/// Load up to `max_keys` more keys of the whole image `data`; sets
/// `st.done` at the end (after verifying the checksum).
pub fn load_step(
    dbs: &mut [Db],
    opts: &LoadOptions,
    data: &[u8],
    st: &mut LoadState,
    max_keys: usize,
) -> Result<(), String> {
    load_step_partial(dbs, opts, data, true, st, max_keys)
}

/// A reader of a DUMP payload's body once Redis's verifyDumpPayload
/// passes: a version this server reads, and the CRC-64 right (unless
/// `skip_crc`: DEBUG SET-SKIP-CHECKSUM-VALIDATION, for fuzzing the parser).
fn payload_reader(data: &[u8], skip_crc: bool) -> R<Reader<'_>> {
    const WRONG: &str = "ERR DUMP payload version or checksum are wrong";
    if data.len() < 10 {
        return Err(WRONG.into());
    }
    let body = data.len() - 10;
    let version = u16::from_le_bytes([data[body], data[body + 1]]) as u32;
    let stored = u64::from_le_bytes(data[body + 2..].try_into().unwrap_or_default());
    if version > MAX_VERSION || (!skip_crc && crc64(0, &data[..body + 2]) != stored) {
        return Err(WRONG.into());
    }
    Ok(Reader {
        data: &data[..body],
        pos: 0,
        complete: true,
        short: false,
    })
}

/// A value RESTORE takes from a DUMP payload.
pub enum Restored {
    Str(Vec<u8>),
    Value(Value),
}

/// Read a DUMP payload (Redis's verifyDumpPayload, then rdbLoadObject):
/// Redis's error texts for a wrong version or checksum and for bad data.
pub fn parse_dump_payload(data: &[u8], opts: &LoadOptions) -> Result<Restored, String> {
    const BAD: &str = "ERR Bad data format";
    let mut r = payload_reader(data, opts.skip_payload_checksum)?;
    let t = r.u8("type").map_err(|_| BAD.to_string())?;
    let value = read_value(&mut r, t, opts).map_err(|e| {
        // The reason goes to the log, as Redis's rdbReportCorruptRDB.
        tracing::warn!("Internal error in RDB reading a RESTORE payload -> {e}");
        BAD.to_string()
    })?;
    match value {
        Loaded::Str(s) => Ok(Restored::Str(s.into_owned())),
        Loaded::Value(v) => {
            // Redis refuses an empty collection.
            if is_empty_collection(&v) {
                return Err(BAD.into());
            }
            Ok(Restored::Value(v))
        }
    }
}

/// A list, set, hash or sorted set without elements (a stream may be
/// empty): no key may hold one (Redis's RDB_LOAD_ERR_EMPTY_KEY).
fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        _ => false,
    }
}

/// The libraries in a FUNCTION DUMP payload (FUNCTION RESTORE), or
/// Redis's error. As Redis's functionRestoreCommand, records are read
/// while more than the footer remains, from a reader over the whole
/// payload (so a string whose length runs into the footer takes its bytes,
/// and the library made of them is refused for what it holds).
pub fn parse_functions_payload(data: &[u8], skip_crc: bool) -> Result<Vec<Vec<u8>>, String> {
    let mut r = payload_reader(data, skip_crc)?;
    r.data = data;
    let mut codes = Vec::new();
    while data.len() - r.pos > 10 {
        let t = r
            .u8("type")
            .map_err(|_| "ERR can not read data type".to_string())?;
        if t != OP_FUNCTION2 && t != OP_FUNCTION_PRE_GA {
            return Err("ERR given type is not a function".into());
        }
        codes.push(read_function_record(&mut r, t).map_err(|e| format!("ERR {e}"))?);
    }
    Ok(codes)
}

/// A library's code from a FUNCTION2 record, or from the record of Redis
/// 7.0's release candidates (name, engine, an optional description and
/// the body, made into the code with its shebang line as Redis's
/// rdbFunctionLoad does); Redis's error when the record is cut short.
fn read_function_record(r: &mut Reader<'_>, t: u8) -> Result<Vec<u8>, &'static str> {
    if t == OP_FUNCTION2 {
        return r
            .string()
            .map(|c| c.into_owned())
            .map_err(|_| "Failed loading library payload");
    }
    let name = r.string().map_err(|_| "Failed loading library name")?;
    let engine = r.string().map_err(|_| "Failed loading engine name")?;
    let has_desc = r
        .len()
        .map_err(|_| "Failed loading library description indicator")?;
    if has_desc != 0 {
        r.string()
            .map_err(|_| "Failed loading library description")?;
    }
    let blob = r.string().map_err(|_| "Failed loading library blob")?;
    let mut code = b"#!".to_vec();
    code.extend_from_slice(&engine);
    code.extend_from_slice(b" name=");
    code.extend_from_slice(&name);
    code.push(b'\n');
    code.extend_from_slice(&blob);
    Ok(code)
}

/// What one record was.
enum Record {
    Other,
    Key,
    End,
}

/// `load_step` of an image of which `data` is what has arrived so far
/// (`complete` once it is all there). A record cut by the end of `data`
/// is left for a later step, which `st.needs()` says when to try.
pub fn load_step_partial(
    dbs: &mut [Db],
    opts: &LoadOptions,
    data: &[u8],
    complete: bool,
    st: &mut LoadState,
    max_keys: usize,
) -> Result<(), String> {
    if data.len() < st.need && !complete {
        return Ok(());
    }
    st.need = 0;
    let crc_wanted = st.stats.version >= 5 && opts.checksum;
    let mut r = Reader {
        data,
        pos: st.pos,
        complete,
        short: false,
    };
    let mut budget = max_keys;
    let step_end = st.pos.saturating_add(opts.step_bytes);
    let mut batch = Vec::with_capacity(BATCH);
    while budget > 0 && r.pos < step_end {
        let record_start = r.pos;
        match load_record(&mut r, dbs, opts, st, &mut batch) {
            Ok(Record::Other) => {}
            Ok(Record::Key) => {
                budget -= 1;
                if batch.len() == BATCH {
                    insert_batch(&mut batch, dbs, st, r.pos, opts.allow_dup)?;
                }
            }
            Ok(Record::End) => {
                insert_batch(&mut batch, dbs, st, r.pos, opts.allow_dup)?;
                let body_end = r.pos;
                if crc_wanted {
                    st.crc = crc64(st.crc, &data[st.crc_pos..body_end]);
                    st.crc_pos = body_end;
                }
                if st.stats.version >= 5 {
                    let trailer = match r.bytes(8, "CRC64 checksum") {
                        Ok(t) => t,
                        Err(_) if r.short => {
                            st.pos = record_start;
                            st.need = data.len() + 1;
                            return Ok(());
                        }
                        Err(e) => return Err(e),
                    };
                    let stored = u64::from_le_bytes(trailer.try_into().unwrap());
                    if stored != 0 && crc_wanted && st.crc != stored {
                        // Redis's words (its tests look for "CRC error").
                        return Err(format!(
                            "offset {body_end}: RDB CRC error: wrong RDB checksum expected: ({:x}) but got ({stored:x})",
                            st.crc
                        ));
                    }
                }
                st.pos = r.pos;
                st.done = true;
                return Ok(());
            }
            Err(_) if r.short => {
                // Cut by the end of what arrived: again once about as much
                // again has come, so a large record is not re-read for
                // every few bytes.
                r.pos = record_start;
                st.need = data.len() + (data.len() - record_start).max(1);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    insert_batch(&mut batch, dbs, st, r.pos, opts.allow_dup)?;
    st.pos = r.pos;
    if crc_wanted {
        st.crc = crc64(st.crc, &data[st.crc_pos..st.pos]);
        st.crc_pos = st.pos;
    }
    Ok(())
}

/// A key read and not yet inserted: keys go into the table in batches, so
/// that their cache misses (bucket, then the chain's first entry, for the
/// check that the key is new) overlap instead of coming one at a time.
struct Pending {
    db: usize,
    entry: crate::db::Entry,
    hash: u64,
    ttl: Option<i64>,
    /// Offset of its value, for messages.
    at: usize,
    /// Index in `LoadStats::per_type`.
    kind: usize,
}

/// Keys inserted together.
const BATCH: usize = 16;

/// Insert the keys of `batch`; `pos` is how far the image was read.
/// With `allow_dup` (DEBUG RELOAD MERGE) a key already there is replaced,
/// its TTL with it; otherwise a duplicate fails the load.
fn insert_batch(
    batch: &mut Vec<Pending>,
    dbs: &mut [Db],
    st: &mut LoadState,
    pos: usize,
    allow_dup: bool,
) -> R<()> {
    for p in batch.iter() {
        dbs[p.db].main.prefetch_chain(p.hash);
    }
    for p in batch.drain(..) {
        let d = &mut dbs[p.db];
        let key = p.ttl.map(|_| p.entry.key().to_vec());
        let replaced = d.main.insert_hashed(p.entry, p.hash);
        if let (Some(old), true) = (&replaced, allow_dup) {
            // The old entry's TTL goes with it (the new entry, in its
            // place, has none yet: a lookup by key would see that one).
            if old.has_expire() {
                d.expires.remove(old.key());
            }
        } else if let Some(old) = replaced {
            return Err(format!(
                "offset {}: duplicate key '{}'",
                p.at,
                String::from_utf8_lossy(old.key())
            ));
        }
        if let (Some(t), Some(key)) = (p.ttl, key) {
            d.set_expire(&key, t);
            st.stats.with_expire += 1;
        }
        st.stats.keys += 1;
        st.stats.per_type[p.kind] += 1;
        if st.stats.keys.is_multiple_of(65536) && std::time::Instant::now() >= st.next_report {
            st.next_report += std::time::Duration::from_secs(2);
            let secs = st.started.elapsed().as_secs_f64().max(0.001);
            tracing::info!(
                "Loading RDB: {} MB read ({} keys, {:.0} keys/s)",
                pos >> 20,
                st.stats.keys,
                st.stats.keys as f64 / secs
            );
        }
    }
    Ok(())
}

/// Read one record (an opcode and what follows it) and apply it; a key
/// goes to `batch`.
fn load_record(
    r: &mut Reader,
    dbs: &mut [Db],
    opts: &LoadOptions,
    st: &mut LoadState,
    batch: &mut Vec<Pending>,
) -> R<Record> {
    let op = r.u8("opcode")?;
    match op {
        OP_EOF => return Ok(Record::End),
        OP_SELECTDB => {
            let at = r.pos;
            let db = r.len()? as usize;
            if db >= dbs.len() {
                return Err(format!(
                    "offset {at}: database {db} out of range (databases is {})",
                    dbs.len()
                ));
            }
            st.db = db;
        }
        OP_RESIZEDB => {
            let keys = r.len()?;
            let expires = r.len()?;
            // Size the tables once instead of growing them key by key
            // (bounded by what the rest of the file could hold; of a file
            // still arriving, by what a few hundred MB could).
            let mut left = (r.data.len() - r.pos) as u64;
            if !r.complete {
                left = left.max(1 << 28);
            }
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
                i32::from_le_bytes(r.bytes(4, "expire time")?.try_into().unwrap()) as i64 * 1000,
            )
        }
        OP_IDLE => {
            st.idle = Some(r.len()?);
        }
        OP_FREQ => {
            st.freq = Some(r.u8("frequency")?);
        }
        OP_FUNCTION2 | OP_FUNCTION_PRE_GA => {
            let code = read_function_record(r, op).or_else(|e| r.fail(e))?;
            st.stats.functions.push(code);
        }
        OP_MODULE_AUX => {
            return r.fail("module data is not supported");
        }
        t => {
            let key = r.string()?;
            let at = r.pos;
            let value = read_value(r, t, opts).map_err(|e| {
                if e.starts_with("offset") {
                    format!("{e} (key '{}')", String::from_utf8_lossy(&key))
                } else {
                    format!("offset {at}: key '{}': {e}", String::from_utf8_lossy(&key))
                }
            })?;
            if opts.key_load_delay != 0 {
                debug_delay(opts.key_load_delay);
            }
            let ttl = st.expire.take();
            let (idle, freq) = (st.idle.take(), st.freq.take());
            if !opts.keep_expired && ttl.is_some_and(|t| crate::db::deadline_passed(t, st.now)) {
                st.stats.expired_skipped += 1;
                if opts.collect_expired {
                    st.stats.expired_keys.push((st.db, key.into_owned()));
                }
                return Ok(Record::Key);
            }
            // A dump written by a buggy or hostile writer may hold an empty
            // collection: it is skipped, as Redis's rdbLoad does.
            if let Loaded::Value(v) = &value {
                if is_empty_collection(v) {
                    st.stats.empty_skipped += 1;
                    if st.stats.empty_skipped <= 10 {
                        tracing::warn!(
                            "rdbLoadObject skipping empty key: {}",
                            String::from_utf8_lossy(&key)
                        );
                    }
                    return Ok(Record::Key);
                }
            }
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
                        crate::db::Entry::new(&key, crate::db::NewValue::Boxed(Box::new(v)), false),
                        kind,
                    )
                }
            };
            let mut entry = entry;
            if let Some(word) = crate::db::entry::access_word(opts.lfu, idle, freq, st.now) {
                entry.set_lru(word);
            }
            let table = &dbs[st.db].main;
            let hash = table.hash(&key);
            table.prefetch_bucket(hash);
            batch.push(Pending {
                db: st.db,
                entry,
                hash,
                ttl,
                at,
                kind,
            });
            return Ok(Record::Key);
        }
    }
    Ok(Record::Other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::db::{Entry, NewValue};

    /// A dataset with every kind of record, some larger than the chunks
    /// the image arrives in, and its image.
    fn sample() -> (Config, Vec<u8>) {
        let cfg = Config::default();
        let mut db = Db::new(0, 7);
        for i in 0..2000u32 {
            let key = format!("s:{i}");
            db.main.insert(Entry::string(
                key.as_bytes(),
                &vec![b'a' + (i % 26) as u8; (i % 300) as usize],
            ));
            if i % 3 == 0 {
                db.set_expire(key.as_bytes(), crate::util::unix_time_ms() + 1_000_000);
            }
        }
        let mut list = List::new(cfg.list_max_listpack_size, cfg.list_compress_depth);
        let mut set = Set::default();
        let mut hash = Hash::default();
        // The list spans many chunks; the set (intset) and hash (listpack)
        // stay packed: a table's order is seeded at random, and the images
        // are compared.
        for i in 0..5000u32 {
            list.push_back(format!("item-{i}").as_bytes());
        }
        for i in 0..100u32 {
            set.add(i.to_string().as_bytes(), 512);
            hash.set(format!("f{i}").as_bytes(), b"value", 128, 64);
        }
        for (key, v) in [
            ("list", Value::List(list)),
            ("set", Value::Set(set)),
            ("hash", Value::Hash(hash)),
        ] {
            db.main.insert(Entry::new(
                key.as_bytes(),
                NewValue::Boxed(Box::new(v)),
                false,
            ));
        }
        let mut image = Vec::new();
        let opts = crate::persistence::rdb::SaveOptions::from_config(&cfg, 0);
        crate::persistence::rdb::write_rdb(&[db], &opts, &mut image).unwrap();
        (cfg, image)
    }

    fn image_of(dbs: &[Db], cfg: &Config) -> Vec<u8> {
        let mut out = Vec::new();
        let opts = crate::persistence::rdb::SaveOptions::from_config(cfg, 0);
        crate::persistence::rdb::write_rdb(dbs, &opts, &mut out).unwrap();
        out
    }

    /// An image without its header, aux fields and checksum (ctime and
    /// used-mem differ from one image to the next, and so the CRC).
    fn body(image: &[u8]) -> &[u8] {
        let mut r = Reader {
            data: image,
            pos: HEADER_LEN,
            complete: true,
            short: false,
        };
        while image[r.pos] == OP_AUX {
            r.pos += 1;
            r.string().unwrap();
            r.string().unwrap();
        }
        &image[r.pos..image.len() - 8]
    }

    #[test]
    fn an_image_loads_the_same_as_it_arrives() {
        let (cfg, image) = sample();
        let opts = LoadOptions::from_config(&cfg);
        let mut whole = vec![Db::new(0, 1)];
        let stats = load_bytes(&mut whole, &opts, &image).unwrap();
        assert_eq!(stats.keys, 2003);
        for chunk in [1usize, 7, 100, 4096, 65536] {
            let mut dbs = vec![Db::new(0, 1)];
            let mut arrived = HEADER_LEN;
            let mut st = load_begin(&image[..arrived]).unwrap();
            let mut steps = 0;
            while !st.done {
                let complete = arrived == image.len();
                load_step_partial(&mut dbs, &opts, &image[..arrived], complete, &mut st, 100)
                    .unwrap();
                steps += 1;
                assert!(
                    steps < 10_000_000,
                    "no progress at {arrived} of {}",
                    image.len()
                );
                if arrived < st.needs().min(image.len()) || st.needs() == 0 {
                    arrived = (arrived + chunk).min(image.len());
                }
            }
            assert_eq!(st.stats.keys, stats.keys, "chunk {chunk}");
            // The same records in the same order.
            let (a, b) = (image_of(&dbs, &cfg), image_of(&whole, &cfg));
            let (x, y) = (body(&a), body(&b));
            assert!(x == y, "chunk {chunk}: the datasets differ");
        }
    }

    #[test]
    fn a_string_longer_than_4_gib_is_refused_before_anything_is_allocated() {
        // A 64-bit length (0x81), plain and as an LZF string's length.
        let mut plain = vec![0x81];
        plain.extend_from_slice(&(1u64 << 32).to_be_bytes());
        let mut lzf = vec![0xc3, 0x01];
        lzf.push(0x81);
        lzf.extend_from_slice(&(1u64 << 32).to_be_bytes());
        lzf.push(0x00);
        for data in [plain, lzf] {
            let mut r = Reader {
                data: &data,
                pos: 0,
                complete: true,
                short: false,
            };
            let e = r.string().unwrap_err();
            assert!(e.contains("longer than 4 GiB"), "{e}");
        }
    }

    #[test]
    fn expired_keys_are_dropped_unless_the_caller_keeps_them() {
        // Redis keeps them on a replica (its master expires them) and in
        // an AOF's base (the incremental commands expect them there).
        let cfg = Config::default();
        let mut db = Db::new(0, 1);
        db.set(crate::db::Entry::string(b"gone", b"1"), false);
        db.set_expire(b"gone", 1000);
        db.set(crate::db::Entry::string(b"live", b"2"), false);
        let mut image = Vec::new();
        let save = crate::persistence::rdb::SaveOptions::from_config(&cfg, 0);
        crate::persistence::rdb::write_rdb(&[db], &save, &mut image).unwrap();
        let mut opts = LoadOptions::from_config(&cfg);
        let mut dbs = vec![Db::new(0, 1)];
        let stats = load_bytes(&mut dbs, &opts, &image).unwrap();
        assert_eq!((stats.keys, stats.expired_skipped, dbs[0].len()), (1, 1, 1));
        opts.keep_expired = true;
        let mut dbs = vec![Db::new(0, 1)];
        let stats = load_bytes(&mut dbs, &opts, &image).unwrap();
        assert_eq!((stats.expired_skipped, dbs[0].len()), (0, 2));
        assert_eq!(dbs[0].get_expire(b"gone"), Some(1000));
    }

    #[test]
    fn empty_collections_in_an_image_are_skipped_not_loaded() {
        // Redis 7.0 writes none, but a buggy or hostile writer may: an
        // empty set, hash, sorted set (type 5) and list (quicklist 2, no
        // nodes), then a string that does load.
        let mut image = b"REDIS0010".to_vec();
        image.extend_from_slice(&[0xFE, 0x00]);
        for (t, key) in [(2u8, "set"), (4, "hash"), (5, "zset"), (18, "list")] {
            image.push(t);
            image.push(key.len() as u8);
            image.extend_from_slice(key.as_bytes());
            image.push(0);
        }
        image.extend_from_slice(&[0, 1, b'k', 1, b'v', 0xFF]);
        let crc = crc64(0, &image);
        image.extend_from_slice(&crc.to_le_bytes());
        let opts = LoadOptions::from_config(&Config::default());
        let mut dbs = vec![Db::new(0, 1)];
        let stats = load_bytes(&mut dbs, &opts, &image).unwrap();
        assert_eq!((stats.keys, stats.empty_skipped), (1, 4));
        assert_eq!(dbs[0].len(), 1);
        assert!(dbs[0].main.get(b"set").is_none());
    }

    #[test]
    fn a_cut_or_damaged_image_fails_once_complete() {
        let (cfg, image) = sample();
        let opts = LoadOptions::from_config(&cfg);
        // Cut: an incomplete image waits; the same bytes complete fail.
        let cut = &image[..image.len() / 2];
        let mut dbs = vec![Db::new(0, 1)];
        let mut st = load_begin(cut).unwrap();
        while st.needs() <= cut.len() {
            load_step_partial(&mut dbs, &opts, cut, false, &mut st, usize::MAX).unwrap();
        }
        assert!(!st.done);
        let err = load_step_partial(&mut dbs, &opts, cut, true, &mut st, usize::MAX).unwrap_err();
        assert!(
            err.contains("unexpected end") || err.contains("larger than the rest"),
            "{err}"
        );
        // A flipped bit in the body: the checksum, folded as it goes, says so.
        let mut bad = image.clone();
        let at = bad.len() / 3;
        bad[at] ^= 0x01;
        let mut dbs = vec![Db::new(0, 1)];
        let mut st = load_begin(&bad).unwrap();
        let mut err = None;
        while !st.done && err.is_none() {
            err = load_step_partial(&mut dbs, &opts, &bad, true, &mut st, 50).err();
        }
        assert!(err.is_some(), "a damaged image loaded");
    }
}

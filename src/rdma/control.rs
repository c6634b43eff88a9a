//! The control plane of an RDMA full sync: the lines that travel on the TCP
//! replication link, in Redis's style, and their parsers.
//!
//! ```text
//! master → replica, in place of the `$<len>` payload line:
//!   +RDMAFULLSYNC <len> <crc64 hex> <addr hex> <rkey> <qpn> <psn> <lid> <gid hex> <mtu> <rd_atomic>
//! then, once its queue pair is up towards the replica's (reads before it
//! would be dropped by a QP still in INIT):
//!   +RDMAREADY
//! and, once it accepted the replica's verdict, before the command stream:
//!   +RDMAOK
//! (or, having given up on RDMA, `$<len>` and the file over TCP: the
//! replica takes whichever comes, so the two decisions cannot cross).
//! replica → master, as commands (the master replies to none of them, as
//! it replies to no REPLCONF ACK, because the payload shares the link):
//!   REPLCONF rdma-qp <qpn> <psn> <lid> <gid hex> <mtu> <rd_atomic>
//!   REPLCONF rdma-progress <bytes>
//!   REPLCONF rdma-done <len> <crc64 hex>
//!   REPLCONF rdma-fail <reason>
//! ```
//!
//! `crc64` is Redis's CRC-64 (Jones) of the file's payload: every byte but
//! the last eight, which are the dump's own checksum of the same bytes, so
//! the master sends the trailer it already has instead of reading the file.

use super::endpoint::{QpInfo, RemoteRegion};

/// What the master offers: the region, the file's checksum, its QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    pub region: RemoteRegion,
    pub crc: u64,
    pub qp: QpInfo,
}

/// The longest reason a replica may give for a failure.
pub const MAX_REASON: usize = 200;

fn hex16(bytes: &[u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_gid(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(gid)
}

/// The words of a QP description: qpn psn lid gid mtu rd_atomic.
fn qp_words(qp: &QpInfo) -> String {
    format!(
        "{} {} {} {} {} {}",
        qp.qpn,
        qp.psn,
        qp.lid,
        hex16(&qp.gid),
        qp.mtu,
        qp.rd_atomic
    )
}

/// A QP from its six words.
pub fn parse_qp(words: &[&str]) -> Option<QpInfo> {
    let [qpn, psn, lid, gid, mtu, rd_atomic] = words else {
        return None;
    };
    let mtu: u32 = mtu.parse().ok()?;
    if !matches!(mtu, 256 | 512 | 1024 | 2048 | 4096) {
        return None;
    }
    Some(QpInfo {
        qpn: qpn.parse().ok()?,
        psn: psn.parse::<u32>().ok().filter(|p| *p < 1 << 24)?,
        lid: lid.parse().ok()?,
        gid: parse_gid(gid)?,
        mtu,
        rd_atomic: rd_atomic.parse().ok().filter(|d| *d > 0)?,
    })
}

impl Offer {
    /// The `+RDMAFULLSYNC` line, with its CRLF.
    pub fn line(&self) -> String {
        format!(
            "+RDMAFULLSYNC {} {:016x} {:x} {} {}\r\n",
            self.region.len,
            self.crc,
            self.region.addr,
            self.region.rkey,
            qp_words(&self.qp)
        )
    }

    /// Parse a `+RDMAFULLSYNC` line (without its line ending).
    pub fn parse(line: &str) -> Option<Offer> {
        let rest = line.strip_prefix("+RDMAFULLSYNC ")?;
        let words: Vec<&str> = rest.split(' ').collect();
        let [len, crc, addr, rkey, qp @ ..] = words.as_slice() else {
            return None;
        };
        let (len, addr): (u64, u64) = (len.parse().ok()?, u64::from_str_radix(addr, 16).ok()?);
        // A region must fit in the address space (reads add offsets to it).
        addr.checked_add(len)?;
        Some(Offer {
            region: RemoteRegion {
                len,
                addr,
                rkey: rkey.parse().ok()?,
            },
            crc: u64::from_str_radix(crc, 16).ok()?,
            qp: parse_qp(qp)?,
        })
    }
}

/// `REPLCONF rdma-qp …` as command arguments.
pub fn qp_command(qp: &QpInfo) -> Vec<Vec<u8>> {
    let mut args: Vec<Vec<u8>> = vec![b"REPLCONF".to_vec(), b"rdma-qp".to_vec()];
    args.extend(qp_words(qp).split(' ').map(|w| w.as_bytes().to_vec()));
    args
}

/// `REPLCONF rdma-done <len> <crc>` as command arguments.
pub fn done_command(len: u64, crc: u64) -> Vec<Vec<u8>> {
    vec![
        b"REPLCONF".to_vec(),
        b"rdma-done".to_vec(),
        len.to_string().into_bytes(),
        format!("{crc:016x}").into_bytes(),
    ]
}

/// `REPLCONF rdma-fail <reason>` (one word: spaces become dashes).
pub fn fail_command(reason: &str) -> Vec<Vec<u8>> {
    let word: String = reason
        .chars()
        .take(MAX_REASON)
        .map(|c| if c.is_ascii_graphic() { c } else { '-' })
        .collect();
    vec![
        b"REPLCONF".to_vec(),
        b"rdma-fail".to_vec(),
        word.into_bytes(),
    ]
}

/// `REPLCONF rdma-progress <bytes>`.
pub fn progress_command(bytes: u64) -> Vec<Vec<u8>> {
    vec![
        b"REPLCONF".to_vec(),
        b"rdma-progress".to_vec(),
        bytes.to_string().into_bytes(),
    ]
}

/// A replica's `REPLCONF rdma-*` message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Qp(QpInfo),
    Progress(u64),
    Done { len: u64, crc: u64 },
    Fail(String),
}

impl Message {
    /// Parse `rdma-<what> args…` (the words after REPLCONF); `None` when
    /// the first word is not an rdma message or its arguments are wrong.
    pub fn parse(words: &[&[u8]]) -> Option<Message> {
        let text: Vec<&str> = words
            .iter()
            .map(|w| std::str::from_utf8(w).ok())
            .collect::<Option<_>>()?;
        let (what, args) = text.split_first()?;
        match (what.to_ascii_lowercase().as_str(), args) {
            ("rdma-qp", qp) => parse_qp(qp).map(Message::Qp),
            ("rdma-progress", [n]) => n.parse().ok().map(Message::Progress),
            ("rdma-done", [len, crc]) => Some(Message::Done {
                len: len.parse().ok()?,
                crc: parse_crc(crc)?,
            }),
            ("rdma-fail", [reason]) if reason.len() <= MAX_REASON => {
                Some(Message::Fail(reason.to_string()))
            }
            _ => None,
        }
    }
}

/// The checksum field of `rdma-done`.
pub fn parse_crc(s: &str) -> Option<u64> {
    (s.len() == 16).then(|| u64::from_str_radix(s, 16).ok())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> Offer {
        Offer {
            region: RemoteRegion {
                addr: 0x7f00_dead_b000,
                rkey: 4242,
                len: 123_456_789,
            },
            crc: 0x0123_4567_89ab_cdef,
            qp: QpInfo {
                qpn: 17,
                psn: 0xabcdef,
                lid: 3,
                gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
                mtu: 4096,
                rd_atomic: 16,
            },
        }
    }

    #[test]
    fn an_offer_line_parses_back() {
        let o = offer();
        let line = o.line();
        assert!(line.ends_with("\r\n"));
        assert_eq!(Offer::parse(line.trim_end()), Some(o));
    }

    #[test]
    fn broken_offer_lines_are_refused() {
        let good = offer().line().trim_end().to_string();
        let words: Vec<&str> = good.split(' ').collect();
        for drop in 1..words.len() {
            let mut w = words.clone();
            w.remove(drop);
            assert_eq!(Offer::parse(&w.join(" ")), None, "{w:?}");
        }
        for bad in [
            "+RDMAFULLSYNC",
            "+RDMAFULLSYNC x 0 0 0 0 0 0 00 4096",
            &good.replace(" 4096", " 4000"),
            &good.replace(" 11259375 ", " 16777216 "),
            &format!("{good} extra"),
            "+RDMAFULLSYNC 100 0123456789abcdef ffffffffffffffff 1 17 11259375 3 fe800000000000000102030405060708 4096 16",
        ] {
            assert_eq!(Offer::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_qp_command_carries_what_parse_qp_reads() {
        let qp = offer().qp;
        let args = qp_command(&qp);
        let words: Vec<&str> = args[2..]
            .iter()
            .map(|a| std::str::from_utf8(a).unwrap())
            .collect();
        assert_eq!(parse_qp(&words), Some(qp));
    }

    #[test]
    fn replica_messages_parse_from_their_commands() {
        let words = |args: Vec<Vec<u8>>| args[1..].to_vec();
        let parse = |args: Vec<Vec<u8>>| {
            let w = words(args);
            let refs: Vec<&[u8]> = w.iter().map(|a| a.as_slice()).collect();
            Message::parse(&refs)
        };
        let qp = offer().qp;
        assert_eq!(parse(qp_command(&qp)), Some(Message::Qp(qp)));
        assert_eq!(parse(progress_command(7)), Some(Message::Progress(7)));
        assert_eq!(
            parse(done_command(9, 0xab)),
            Some(Message::Done { len: 9, crc: 0xab })
        );
        assert_eq!(
            parse(fail_command("CRC mismatch")),
            Some(Message::Fail("CRC-mismatch".into()))
        );
        assert_eq!(Message::parse(&[b"rdma-done", b"9"]), None);
        assert_eq!(Message::parse(&[b"rdma-bogus", b"1"]), None);
        assert_eq!(Message::parse(&[b"rdma-progress", b"\xff"]), None);
    }

    #[test]
    fn a_failure_reason_is_one_bounded_word() {
        let args = fail_command(&format!("CRC mismatch {}", "x".repeat(500)));
        assert_eq!(args[2].len(), MAX_REASON);
        assert!(!args[2].contains(&b' '));
    }
}

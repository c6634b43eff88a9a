//! Just enough DER to read what TLS set-up needs that rustls does not give:
//! encrypted PKCS#8 keys (see `pkcs8`) and the parts of an X.509
//! certificate (RFC 5280) that match a key to its certificate and check a
//! version 1 certificate, which webpki refuses and OpenSSL accepts.

/// A cursor over DER elements.
pub struct Der<'a> {
    rest: &'a [u8],
}

impl<'a> Der<'a> {
    pub fn new(bytes: &'a [u8]) -> Der<'a> {
        Der { rest: bytes }
    }

    pub fn peek(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next element whole (tag and length included) and its content,
    /// whatever its tag.
    pub fn any(&mut self) -> Option<(u8, &'a [u8], &'a [u8])> {
        let start = self.rest;
        let (&t, rest) = self.rest.split_first()?;
        let (&first, mut rest) = rest.split_first()?;
        let len = if first < 0x80 {
            first as usize
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
            rest = &rest[n..];
            len
        };
        if rest.len() < len {
            return None;
        }
        self.rest = &rest[len..];
        let header = start.len() - rest.len();
        Some((t, &start[..header + len], &rest[..len]))
    }

    /// The content of the next element, which must have this tag.
    pub fn take(&mut self, tag: u8) -> Option<&'a [u8]> {
        if self.peek()? != tag {
            return None;
        }
        self.any().map(|(_, _, content)| content)
    }

    pub fn seq(&mut self) -> Option<Der<'a>> {
        self.take(0x30).map(Der::new)
    }

    pub fn oid(&mut self) -> Option<&'a [u8]> {
        self.take(0x06)
    }
}

/// The parts of a certificate this server reads.
#[derive(Clone)]
pub struct Certificate<'a> {
    /// 1, 2 or 3.
    pub version: u8,
    /// The signed part, whole.
    pub tbs: &'a [u8],
    /// Issuer and subject names, whole (compared byte for byte).
    pub issuer: &'a [u8],
    pub subject: &'a [u8],
    /// Validity, in seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
    /// SubjectPublicKeyInfo, whole.
    pub spki: &'a [u8],
    /// The signature's algorithm OID and bits.
    pub sig_alg: &'a [u8],
    pub signature: &'a [u8],
}

impl<'a> Certificate<'a> {
    pub fn parse(der: &'a [u8]) -> Option<Certificate<'a>> {
        let mut cert = Der::new(der).seq()?;
        let (_, tbs, tbs_content) = cert.any()?;
        let mut alg = cert.seq()?;
        let sig_alg = alg.oid()?;
        let signature = bit_string(cert.take(0x03)?)?;
        let mut t = Der::new(tbs_content);
        let mut version = 1;
        if t.peek() == Some(0xa0) {
            let v = t.take(0xa0)?;
            // A peer's certificate: a version byte of 255 must not overflow.
            version = Der::new(v).take(0x02)?.last()?.checked_add(1)?;
        }
        t.take(0x02)?; // serial
        t.seq()?; // signature algorithm (again)
        let (_, issuer, _) = t.any()?;
        let mut validity = t.seq()?;
        let not_before = time(&mut validity)?;
        let not_after = time(&mut validity)?;
        let (_, subject, _) = t.any()?;
        let (_, spki, _) = t.any()?;
        Some(Certificate {
            version,
            tbs,
            issuer,
            subject,
            not_before,
            not_after,
            spki,
            sig_alg,
            signature,
        })
    }
}

/// A BIT STRING's bytes (whole bytes only).
pub fn bit_string(content: &[u8]) -> Option<&[u8]> {
    match content.split_first() {
        Some((0, bits)) => Some(bits),
        _ => None,
    }
}

/// A UTCTime or GeneralizedTime (`…Z`) as seconds since the epoch.
fn time(d: &mut Der) -> Option<i64> {
    let (tag, _, text) = d.any()?;
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 => {
            let yy: i64 = text.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        0x18 => (text.get(..4)?.parse().ok()?, &text[4..]),
        _ => return None,
    };
    if rest.len() != 10 || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |i: usize| rest[i..i + 2].parse::<i64>().ok();
    let (month, day, h, m, s) = (n(0)?, n(2)?, n(4)?, n(6)?, n(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_seconds() {
        let mut d = Der::new(b"\x17\x0d700101000000Z");
        assert_eq!(time(&mut d), Some(0));
        let mut d = Der::new(b"\x18\x0f20261201215000Z");
        assert_eq!(time(&mut d), Some(1_796_161_800));
        let mut d = Der::new(b"\x17\x0d491231235959Z");
        assert_eq!(time(&mut d), Some(2_524_607_999));
        assert_eq!(time(&mut Der::new(b"\x17\x03abc")), None);
    }

    #[test]
    fn truncated_input_is_refused() {
        assert!(Certificate::parse(b"").is_none());
        assert!(Certificate::parse(b"\x30\x05\x30\x03").is_none());
        assert!(Der::new(b"\x30\x84\xff\xff\xff\xff").any().is_none());
        // A version field of 255 (from a peer) is refused, not overflowed.
        let mut cert = b"\x30\x0b\x30\x05\xa0\x03\x02\x01\xff\x30\x00\x03\x00".to_vec();
        assert!(Certificate::parse(&cert).is_none());
        cert[8] = 2;
        assert!(Certificate::parse(&cert).is_none());
    }
}

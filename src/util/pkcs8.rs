//! Encrypted PKCS#8 private keys (`-----BEGIN ENCRYPTED PRIVATE KEY-----`,
//! what `openssl genpkey -aes256` and `openssl pkcs8 -topk8` write), for
//! `tls-key-file-pass`: PBES2 with PBKDF2 (HMAC-SHA1/256/384/512) and
//! AES-128/192/256-CBC (RFC 8018), decrypted to the plain PKCS#8 DER.

use ring::pbkdf2;

use super::der::Der;

/// Decrypt an EncryptedPrivateKeyInfo (DER) with `pass`.
pub fn decrypt(der: &[u8], pass: &[u8]) -> Result<Vec<u8>, String> {
    let bad = || "unsupported or malformed encrypted key".to_string();
    let mut top = Der::new(der).seq().ok_or_else(bad)?;
    let mut alg = top.seq().ok_or_else(bad)?;
    if alg.oid().ok_or_else(bad)? != OID_PBES2 {
        return Err("only PBES2 encrypted keys are supported".into());
    }
    let mut params = alg.seq().ok_or_else(bad)?;
    let mut kdf = params.seq().ok_or_else(bad)?;
    if kdf.oid().ok_or_else(bad)? != OID_PBKDF2 {
        return Err("only PBKDF2 key derivation is supported".into());
    }
    let mut kdf_params = kdf.seq().ok_or_else(bad)?;
    let salt = kdf_params.take(0x04).ok_or_else(bad)?;
    let iterations = be_uint(kdf_params.take(0x02).ok_or_else(bad)?).ok_or_else(bad)?;
    let mut key_len = None;
    let mut prf = pbkdf2::PBKDF2_HMAC_SHA1;
    if kdf_params.peek() == Some(0x02) {
        key_len = Some(be_uint(kdf_params.take(0x02).ok_or_else(bad)?).ok_or_else(bad)?);
    }
    if kdf_params.peek() == Some(0x30) {
        let mut p = kdf_params.seq().ok_or_else(bad)?;
        prf = match p.oid().ok_or_else(bad)? {
            OID_HMAC_SHA1 => pbkdf2::PBKDF2_HMAC_SHA1,
            OID_HMAC_SHA256 => pbkdf2::PBKDF2_HMAC_SHA256,
            OID_HMAC_SHA384 => pbkdf2::PBKDF2_HMAC_SHA384,
            OID_HMAC_SHA512 => pbkdf2::PBKDF2_HMAC_SHA512,
            _ => return Err("unsupported PBKDF2 hash".into()),
        };
    }
    let mut scheme = params.seq().ok_or_else(bad)?;
    let aes_len = match scheme.oid().ok_or_else(bad)? {
        OID_AES128_CBC => 16,
        OID_AES192_CBC => 24,
        OID_AES256_CBC => 32,
        _ => return Err("only AES-CBC encrypted keys are supported".into()),
    };
    let iv = scheme.take(0x04).ok_or_else(bad)?;
    let data = top.take(0x04).ok_or_else(bad)?;
    if iv.len() != 16 || data.is_empty() || !data.len().is_multiple_of(16) {
        return Err(bad());
    }
    if key_len.is_some_and(|n| n != aes_len as u64)
        || iterations == 0
        || iterations > u32::MAX as u64
    {
        return Err(bad());
    }
    let mut key = vec![0u8; aes_len];
    pbkdf2::derive(
        prf,
        std::num::NonZeroU32::new(iterations as u32).ok_or_else(bad)?,
        salt,
        pass,
        &mut key,
    );
    let aes = Aes::new(&key);
    let mut out = Vec::with_capacity(data.len());
    let mut prev: [u8; 16] = iv.try_into().map_err(|_| bad())?;
    for block in data.chunks_exact(16) {
        let mut b: [u8; 16] = block.try_into().expect("16 bytes");
        aes.decrypt_block(&mut b);
        for (x, p) in b.iter_mut().zip(prev) {
            *x ^= p;
        }
        out.extend_from_slice(&b);
        prev = block.try_into().expect("16 bytes");
    }
    // PKCS#7 padding; wrong padding is, nearly always, a wrong passphrase.
    let wrong = || "bad decrypt (wrong passphrase?)".to_string();
    let pad = *out.last().ok_or_else(wrong)? as usize;
    if pad == 0 || pad > 16 || out[out.len() - pad..].iter().any(|&b| b as usize != pad) {
        return Err(wrong());
    }
    out.truncate(out.len() - pad);
    // The plaintext is a PrivateKeyInfo: a SEQUENCE.
    if Der::new(&out).seq().is_none() {
        return Err(wrong());
    }
    Ok(out)
}

const OID_PBES2: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0d];
const OID_PBKDF2: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0c];
const OID_HMAC_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x07];
const OID_HMAC_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x09];
const OID_HMAC_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x0a];
const OID_HMAC_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x0b];
const OID_AES128_CBC: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x02];
const OID_AES192_CBC: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x16];
const OID_AES256_CBC: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x2a];

/// A non-negative DER INTEGER's value (up to 8 bytes).
fn be_uint(bytes: &[u8]) -> Option<u64> {
    let bytes = match bytes {
        [0, rest @ ..] => rest,
        [b, ..] if b & 0x80 != 0 => return None,
        b => b,
    };
    if bytes.len() > 8 {
        return None;
    }
    Some(bytes.iter().fold(0, |a, &b| (a << 8) | b as u64))
}

/// AES decryption (FIPS 197's inverse cipher), byte-oriented: it runs once
/// per key file, on a few kilobytes.
struct Aes {
    round_keys: Vec<[u8; 16]>,
}

const SBOX: [u8; 256] = {
    let mut sbox = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        // The multiplicative inverse in GF(2^8), then the affine map.
        let inv = if i == 0 { 0 } else { gf_pow(i as u8, 254) };
        let mut s = inv;
        let mut r = 1;
        while r < 5 {
            s ^= inv.rotate_left(r);
            r += 1;
        }
        sbox[i] = s ^ 0x63;
        i += 1;
    }
    sbox
};

const INV_SBOX: [u8; 256] = {
    let mut inv = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        inv[SBOX[i] as usize] = i as u8;
        i += 1;
    }
    inv
};

const fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        let hi = a & 0x80;
        a <<= 1;
        if hi != 0 {
            a ^= 0x1b;
        }
        b >>= 1;
    }
    p
}

const fn gf_pow(a: u8, mut e: u32) -> u8 {
    let mut result = 1;
    let mut base = a;
    while e > 0 {
        if e & 1 != 0 {
            result = gf_mul(result, base);
        }
        base = gf_mul(base, base);
        e >>= 1;
    }
    result
}

impl Aes {
    fn new(key: &[u8]) -> Aes {
        let nk = key.len() / 4;
        let rounds = nk + 6;
        let mut w: Vec<[u8; 4]> = key
            .chunks_exact(4)
            .map(|c| c.try_into().expect("4 bytes"))
            .collect();
        let mut rcon = 1u8;
        for i in nk..4 * (rounds + 1) {
            let mut t = w[i - 1];
            if i % nk == 0 {
                t = [
                    SBOX[t[1] as usize] ^ rcon,
                    SBOX[t[2] as usize],
                    SBOX[t[3] as usize],
                    SBOX[t[0] as usize],
                ];
                rcon = gf_mul(rcon, 2);
            } else if nk > 6 && i % nk == 4 {
                t = t.map(|b| SBOX[b as usize]);
            }
            let prev = w[i - nk];
            w.push([
                t[0] ^ prev[0],
                t[1] ^ prev[1],
                t[2] ^ prev[2],
                t[3] ^ prev[3],
            ]);
        }
        let round_keys = w
            .chunks_exact(4)
            .map(|c| {
                let mut k = [0u8; 16];
                for (j, word) in c.iter().enumerate() {
                    k[4 * j..4 * j + 4].copy_from_slice(word);
                }
                k
            })
            .collect();
        Aes { round_keys }
    }

    fn decrypt_block(&self, b: &mut [u8; 16]) {
        let rounds = self.round_keys.len() - 1;
        xor(b, &self.round_keys[rounds]);
        for round in (0..rounds).rev() {
            // InvShiftRows: row r moves right by r (state is column-major).
            let s = *b;
            for c in 0..4 {
                for r in 0..4 {
                    b[4 * ((c + r) % 4) + r] = s[4 * c + r];
                }
            }
            for x in b.iter_mut() {
                *x = INV_SBOX[*x as usize];
            }
            xor(b, &self.round_keys[round]);
            if round > 0 {
                for c in 0..4 {
                    let col = [b[4 * c], b[4 * c + 1], b[4 * c + 2], b[4 * c + 3]];
                    for r in 0..4 {
                        b[4 * c + r] = gf_mul(col[r], 14)
                            ^ gf_mul(col[(r + 1) % 4], 11)
                            ^ gf_mul(col[(r + 2) % 4], 13)
                            ^ gf_mul(col[(r + 3) % 4], 9);
                    }
                }
            }
        }
    }
}

fn xor(b: &mut [u8; 16], k: &[u8; 16]) {
    for (x, y) in b.iter_mut().zip(k) {
        *x ^= y;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn aes_decrypts_the_fips_197_vectors() {
        let plain = unhex("00112233445566778899aabbccddeeff");
        for (key, cipher) in [
            (
                "000102030405060708090a0b0c0d0e0f",
                "69c4e0d86a7b0430d8cdb78070b4c55a",
            ),
            (
                "000102030405060708090a0b0c0d0e0f1011121314151617",
                "dda97ca4864cdfe06eaf70a0ec0d7191",
            ),
            (
                "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                "8ea2b7ca516745bfeafc49904b496089",
            ),
        ] {
            let mut b: [u8; 16] = unhex(cipher).try_into().unwrap();
            Aes::new(&unhex(key)).decrypt_block(&mut b);
            assert_eq!(b.to_vec(), plain, "key {key}");
        }
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(decrypt(b"", b"x").is_err());
        assert!(decrypt(&[0x30, 0x82, 0xff], b"x").is_err());
        assert!(decrypt(&[0x30, 0x03, 0x30, 0x01, 0x00], b"x").is_err());
    }
}

//! CRC-64 with the Jones polynomial, reflected, as Redis's crc64.c computes
//! it for the RDB trailer (check value of "123456789": 0xe9c6d914c4b8d9ca).

const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

const fn make_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut j = 0;
        while j < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            j += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// Slicing-by-8 tables (as Redis's crcspeed): `TABLES[k][b]` is the CRC of
/// byte `b` followed by `k` zero bytes, so eight bytes are folded per step
/// with eight independent lookups instead of eight dependent ones.
const fn make_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    t[0] = make_table();
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = make_tables();

/// Continue a CRC over `data`.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let t = &TABLES;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(w);
        let x = crc ^ u64::from_le_bytes(bytes);
        crc = t[7][(x & 0xff) as usize]
            ^ t[6][((x >> 8) & 0xff) as usize]
            ^ t[5][((x >> 16) & 0xff) as usize]
            ^ t[4][((x >> 24) & 0xff) as usize]
            ^ t[3][((x >> 32) & 0xff) as usize]
            ^ t[2][((x >> 40) & 0xff) as usize]
            ^ t[1][((x >> 48) & 0xff) as usize]
            ^ t[0][(x >> 56) as usize];
    }
    for &b in words.remainder() {
        crc = t[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_redis_check_value() {
        assert_eq!(super::crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn eight_at_a_time_equals_byte_at_a_time() {
        let table = super::make_table();
        let slow = |mut crc: u64, data: &[u8]| {
            for &b in data {
                crc = table[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
            }
            crc
        };
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 131 % 251) as u8).collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 1000] {
            for split in [0, 3, len / 2] {
                let split = split.min(len);
                let a = super::crc64(super::crc64(0, &data[..split]), &data[split..len]);
                assert_eq!(a, slow(0, &data[..len]), "len {len} split {split}");
            }
        }
    }
}

//! LZF decompression, for strings Redis stores compressed in RDB files.

/// Decompress `input` into exactly `out_len` bytes; `None` if the data is
/// malformed or does not produce that length.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            // Literal run of ctrl + 1 bytes.
            let n = ctrl + 1;
            let lit = input.get(i..i + n)?;
            if out.len() + n > out_len {
                return None;
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            // Back reference.
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            len += 2;
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            if back > out.len() || out.len() + len > out_len {
                return None;
            }
            let start = out.len() - back;
            for k in 0..len {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    if out.len() == out_len {
        Some(out)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn literal_and_backref() {
        // "abcabcabc": literal "abc" then a back reference of length 6, distance 3.
        let data = [2, b'a', b'b', b'c', (4 << 5) as u8, 2];
        assert_eq!(super::decompress(&data, 9).unwrap(), b"abcabcabc");
        assert!(super::decompress(&data, 10).is_none());
        assert!(super::decompress(&[0xe0, 0xff], 3).is_none());
    }
}

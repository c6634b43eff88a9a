//! Property test: however a valid command stream is split into reads, the
//! parser yields exactly the commands that were sent.

use kvstore::protocol::{ParseLimits, QueryBuffer};
use proptest::prelude::*;

fn encode(cmd: &[Vec<u8>]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", cmd.len()).into_bytes();
    for a in cmd {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Inline form, for commands whose arguments are plain words.
fn encode_inline(cmd: &[Vec<u8>]) -> Option<Vec<u8>> {
    let plain = cmd
        .iter()
        .all(|a| !a.is_empty() && a.iter().all(|b| b.is_ascii_alphanumeric()));
    // Longer inline requests are invalid (as in Redis): use RESP for those.
    let line_len: usize = cmd.iter().map(|a| a.len() + 1).sum();
    if !plain || cmd.is_empty() || line_len >= kvstore::protocol::parser::PROTO_INLINE_MAX_SIZE {
        return None;
    }
    let mut v = cmd.join(&b' ');
    v.extend_from_slice(b"\r\n");
    Some(v)
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 0..40),
        4 => "[a-zA-Z0-9]{1,12}".prop_map(|s| s.into_bytes()),
        // Big arguments take the exact-size buffer path.
        1 => (32 * 1024..40 * 1024usize, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
    ]
}

fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(arg(), 1..6)
}

fn parse_in_chunks(stream: &[u8], cuts: &[usize]) -> Vec<Vec<Vec<u8>>> {
    let mut q = QueryBuffer::new();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    points.sort_unstable();
    points.push(stream.len());
    for p in points {
        q.feed(&stream[pos..p]);
        pos = p;
        while q.parse(ParseLimits::default()).expect("valid stream") {
            let mut argv = Vec::new();
            q.argv(&mut argv);
            out.push(argv.iter().map(|a| a.to_vec()).collect());
            q.consume();
        }
        q.compact();
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_split_parses_to_the_same_commands(
        cmds in proptest::collection::vec((command(), any::<bool>()), 1..12),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let mut stream = Vec::new();
        for (cmd, inline) in &cmds {
            match (inline, encode_inline(cmd)) {
                (true, Some(bytes)) => stream.extend_from_slice(&bytes),
                _ => stream.extend_from_slice(&encode(cmd)),
            }
        }
        let expected: Vec<Vec<Vec<u8>>> = cmds.iter().map(|(c, _)| c.clone()).collect();
        prop_assert_eq!(&parse_in_chunks(&stream, &cuts), &expected);
        // One byte at a time is the harshest split of all.
        if stream.len() < 4096 {
            let every: Vec<usize> = (0..stream.len()).collect();
            prop_assert_eq!(&parse_in_chunks(&stream, &every), &expected);
        }
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut q = QueryBuffer::new();
        q.feed(&bytes);
        while let Ok(true) = q.parse(ParseLimits { max_bulk_len: 1 << 20, authenticated: true }) {
            let mut argv = Vec::new();
            q.argv(&mut argv);
            q.consume();
        }
    }
}

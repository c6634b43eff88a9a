//! The two networking engines (`io-engine io_uring|epoll`): the paths
//! where they differ, each run against both. (The rest of the suite runs
//! with the default engine, io_uring, and CI runs it again with epoll:
//! `KVSTORE_TEST_IO_ENGINE`.)

mod common;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::Duration;

use common::{bulk_payload, encode, start_kvstore, Conn, Rng, ServerProcess};

const ENGINES: [&str; 2] = ["io_uring", "epoll"];

fn start(engine: &str, extra: &[&str]) -> ServerProcess {
    eprintln!("engine: {engine}");
    let mut args = vec!["--io-engine", engine];
    args.extend_from_slice(extra);
    start_kvstore(&args)
}

/// Bytes that are not all the same, so that a misplaced byte shows.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
        })
        .collect()
}

#[test]
fn each_engine_is_reported_and_fixed_at_start() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut c = Conn::connect(kv.port);
        assert_eq!(c.info_field("server", "multiplexing_api"), engine);
        assert_eq!(
            c.cmd_str(&["CONFIG", "GET", "io-engine"]),
            format!("*2\r\n$9\r\nio-engine\r\n${}\r\n{engine}\r\n", engine.len()).into_bytes()
        );
        // Fixed at start: only the engine in use is taken (Redis's test
        // of every option set to itself).
        let other = if engine == "epoll" {
            "io_uring"
        } else {
            "epoll"
        };
        let reply = c.cmd_str(&["CONFIG", "SET", "io-engine", other]);
        assert!(
            reply.starts_with(b"-ERR"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "io-engine", engine]),
            b"+OK\r\n"
        );
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvstore"))
        .args(["--io-engine", "kqueue", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("io_uring, epoll"), "{text}");
}

#[test]
fn many_clients_pipelining_get_every_reply_in_order() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let port = kv.port;
        let workers: Vec<_> = (0..16)
            .map(|w| {
                std::thread::spawn(move || {
                    let mut c = Conn::connect(port);
                    for round in 0..20 {
                        let mut batch = Vec::new();
                        for i in 0..50 {
                            batch.extend(encode(&[b"INCR", format!("n{w}").as_bytes()]));
                            let v = pattern(1 + (i * 37 + round * 101) % 3000, w as u8);
                            batch.extend(encode(&[b"SET", format!("k{w}:{i}").as_bytes(), &v]));
                            batch.extend(encode(&[b"GET", format!("k{w}:{i}").as_bytes()]));
                        }
                        c.send_raw(&batch);
                        for i in 0..50 {
                            let n = round * 50 + i + 1;
                            assert_eq!(c.read_reply(), format!(":{n}\r\n").into_bytes());
                            assert_eq!(c.read_reply(), b"+OK\r\n");
                            let v = pattern(1 + (i * 37 + round * 101) % 3000, w as u8);
                            assert_eq!(bulk_payload(&c.read_reply()), Some(v.as_slice()));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let mut c = Conn::connect(port);
        assert_eq!(c.cmd_str(&["GET", "n15"]), b"$4\r\n1000\r\n", "{engine}");
    }
}

#[test]
fn big_values_and_replies_the_socket_cannot_take_at_once() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut c = Conn::connect(kv.port);
        // 24 MB in: thousands of receive buffers into one argument.
        let big = pattern(24 << 20, 7);
        assert_eq!(c.cmd(&[b"SET", b"big", &big]), b"+OK\r\n");
        assert_eq!(c.cmd_str(&["STRLEN", "big"]), b":25165824\r\n");
        // A list whose LRANGE is a 2 MB reply built in the reply buffer;
        // twenty of them asked for before any is read: the socket fills,
        // and the rest goes out as it drains.
        let item = pattern(100, 3);
        for chunk in 0..20 {
            let mut args: Vec<&[u8]> = vec![b"RPUSH", b"list"];
            for _ in 0..1000 {
                args.push(&item);
            }
            assert_eq!(
                c.cmd(&args),
                format!(":{}\r\n", (chunk + 1) * 1000).into_bytes()
            );
        }
        let mut pipeline = Vec::new();
        for _ in 0..20 {
            pipeline.extend(encode(&[b"LRANGE", b"list", b"0", b"-1"]));
        }
        pipeline.extend(encode(&[b"GET", b"big"]));
        c.send_raw(&pipeline);
        std::thread::sleep(Duration::from_millis(300));
        for _ in 0..20 {
            let reply = c.read_reply();
            let (_, items) = common::aggregate_items(&reply).expect("an array");
            assert_eq!(items.len(), 20_000, "{engine}");
            assert!(items
                .iter()
                .all(|i| bulk_payload(i) == Some(item.as_slice())));
        }
        assert_eq!(
            bulk_payload(&c.read_reply()),
            Some(big.as_slice()),
            "{engine}"
        );
        assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn big_arguments_inside_a_pipeline_keep_their_neighbours() {
    // Arguments of 32 KiB and more go to a buffer of their own; here they
    // arrive in the same receive as the commands around them.
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut c = Conn::connect(kv.port);
        let sizes = [40_000usize, 5, 70_000, 32 * 1024, 100_000, 1];
        let mut pipeline = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let v = pattern(n, i as u8);
            pipeline.extend(encode(&[b"SET", format!("b{i}").as_bytes(), &v]));
            pipeline.extend(encode(&[b"GET", format!("b{i}").as_bytes()]));
            pipeline.extend(encode(&[b"PING"]));
        }
        c.send_raw(&pipeline);
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(c.read_reply(), b"+OK\r\n", "{engine} {i}");
            let v = pattern(n, i as u8);
            assert_eq!(
                bulk_payload(&c.read_reply()),
                Some(v.as_slice()),
                "{engine} {i}"
            );
            assert_eq!(c.read_reply(), b"+PONG\r\n", "{engine} {i}");
        }
    }
}

#[test]
fn clients_sending_big_arguments_are_read_directly_and_in_order() {
    // Under io_uring a client that sends a big argument has its input read
    // directly (straight into the argument's buffer), and goes back to its
    // receive after 64 reads without one: across each move its input keeps
    // its order, whether the move comes in the middle of an argument, of a
    // pipeline or between round trips.
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut c = Conn::connect(kv.port);
        let mut other = Conn::connect(kv.port);
        let mut probe = Conn::connect(kv.port);
        for round in 0..3u8 {
            // A big value whose first bytes arrive alone: the server is in
            // the middle of it when the rest comes, with more commands.
            let big = pattern(300_000 + round as usize, round);
            let cmd = encode(&[b"SET", format!("big{round}").as_bytes(), &big]);
            let cut = cmd.len() - big.len() - 2 + 10;
            c.send_raw(&cmd[..cut]);
            std::thread::sleep(Duration::from_millis(30));
            let mut rest = cmd[cut..].to_vec();
            rest.extend(encode(&[b"INCR", b"n"]));
            rest.extend(encode(&[b"GET", format!("big{round}").as_bytes()]));
            c.send_raw(&rest);
            assert_eq!(c.read_reply(), b"+OK\r\n", "{engine} {round}");
            assert_eq!(
                c.read_reply(),
                format!(":{}\r\n", round as usize * 101 + 1).into_bytes(),
                "{engine} {round}"
            );
            assert_eq!(bulk_payload(&c.read_reply()), Some(big.as_slice()));
            // Another client's commands meanwhile are its own.
            assert_eq!(
                other.cmd_str(&["INCR", "o"]),
                format!(":{}\r\n", round + 1).into_bytes()
            );
            // A second big value, sent whole: read straight into its buffer
            // (through the ring it would take one read per 8 KB).
            let huge = pattern(16 << 20, round + 10);
            let before = probe.info_num::<u64>("stats", "total_reads_processed");
            assert_eq!(c.cmd(&[b"SET", b"huge", &huge]), b"+OK\r\n");
            let taken = probe.info_num::<u64>("stats", "total_reads_processed") - before;
            assert!(taken < 1500, "{engine} {round}: {taken} reads for 16 MB");
            // Round trips of small commands: the client goes back to the
            // ring along the way, and nothing is lost or reordered.
            for i in 0..100 {
                assert_eq!(
                    c.cmd_str(&["INCR", "n"]),
                    format!(":{}\r\n", round as usize * 101 + 2 + i).into_bytes(),
                    "{engine} {round} {i}"
                );
            }
            // A pipeline of small commands around a big one, in one write.
            let mid = pattern(50_000, round + 20);
            let mut pipeline = encode(&[b"PING"]);
            pipeline.extend(encode(&[b"SET", b"mid", &mid]));
            pipeline.extend(encode(&[b"STRLEN", b"mid"]));
            pipeline.extend(encode(&[b"GET", b"mid"]));
            c.send_raw(&pipeline);
            assert_eq!(c.read_reply(), b"+PONG\r\n");
            assert_eq!(c.read_reply(), b"+OK\r\n");
            assert_eq!(c.read_reply(), b":50000\r\n");
            assert_eq!(bulk_payload(&c.read_reply()), Some(mid.as_slice()));
            assert_eq!(c.cmd(&[b"GET", b"huge"]).len(), (16 << 20) + 13);
            // Back to small round trips before the next round.
            for _ in 0..70 {
                assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
            }
        }
        // A client that leaves in the middle of a big argument, after it
        // was moved: its slot's next holder gets nothing of it.
        let mut gone = Conn::connect(kv.port);
        assert_eq!(gone.cmd(&[b"SET", b"g", &pattern(100_000, 1)]), b"+OK\r\n");
        gone.send_raw(&encode(&[b"SET", b"g", &pattern(200_000, 2)])[..150_000]);
        std::thread::sleep(Duration::from_millis(30));
        drop(gone);
        let mut next = Conn::connect(kv.port);
        assert_eq!(next.cmd_str(&["PING"]), b"+PONG\r\n");
        assert_eq!(
            bulk_payload(&next.cmd_str(&["GET", "g"])),
            Some(pattern(100_000, 1).as_slice())
        );
        assert_eq!(next.cmd_str(&["GET", "n"]), b"$3\r\n303\r\n");
    }
}

#[test]
fn random_mixes_of_big_and_small_commands_in_random_pieces_keep_their_order() {
    // Clients move between the ring's receive and direct reads as they
    // send big arguments and stop; their input, cut anywhere and sent in
    // bursts, must run exactly as sent.
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let port = kv.port;
        let workers: Vec<_> = (0..4u64)
            .map(|w| {
                std::thread::spawn(move || {
                    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((w + 1) * 0x1234_5678_9abc));
                    let mut c = Conn::connect(port);
                    let mut model: Vec<Vec<u8>> = vec![Vec::new(); 4];
                    let mut counter = 0;
                    for burst in 0..30 {
                        let mut bytes = Vec::new();
                        let mut expect: Vec<Vec<u8>> = Vec::new();
                        for _ in 0..1 + rng.pick(12) {
                            let k = rng.pick(4);
                            let key = format!("w{w}:{k}");
                            let size = match rng.pick(5) {
                                0 => 32 * 1024 + rng.pick(250_000),
                                _ => 1 + rng.pick(300),
                            };
                            let val = pattern(size, rng.pick(200) as u8);
                            match rng.pick(4) {
                                0 => {
                                    bytes.extend(encode(&[b"SET", key.as_bytes(), &val]));
                                    expect.push(b"+OK\r\n".to_vec());
                                    model[k] = val;
                                }
                                1 => {
                                    bytes.extend(encode(&[b"APPEND", key.as_bytes(), &val]));
                                    model[k].extend_from_slice(&val);
                                    expect.push(format!(":{}\r\n", model[k].len()).into_bytes());
                                }
                                2 => {
                                    bytes.extend(encode(&[b"GET", key.as_bytes()]));
                                    let mut r = format!("${}\r\n", model[k].len()).into_bytes();
                                    r.extend_from_slice(&model[k]);
                                    r.extend_from_slice(b"\r\n");
                                    if model[k].is_empty() {
                                        r = b"$-1\r\n".to_vec();
                                    }
                                    expect.push(r);
                                }
                                _ => {
                                    counter += 1;
                                    bytes.extend(encode(&[b"INCR", format!("w{w}:n").as_bytes()]));
                                    expect.push(format!(":{counter}\r\n").into_bytes());
                                }
                            }
                        }
                        // Sent in up to five pieces cut anywhere, some of
                        // them after a pause.
                        let mut cuts: Vec<usize> =
                            (0..rng.pick(5)).map(|_| rng.pick(bytes.len())).collect();
                        cuts.sort();
                        let mut from = 0;
                        for cut in cuts.into_iter().chain([bytes.len()]) {
                            c.send_raw(&bytes[from..cut.max(from)]);
                            from = cut.max(from);
                            if rng.pick(3) == 0 {
                                std::thread::sleep(Duration::from_millis(rng.pick(4) as u64));
                            }
                        }
                        for (i, want) in expect.iter().enumerate() {
                            let got = c.read_reply();
                            assert!(
                                &got == want,
                                "client {w} burst {burst} reply {i}: {} bytes, not the {} expected",
                                got.len(),
                                want.len()
                            );
                        }
                        // Now and then, small round trips: back to the ring.
                        if rng.pick(4) == 0 {
                            for _ in 0..70 {
                                assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
                            }
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    }
}

#[test]
fn clients_read_directly_for_big_arguments_run_and_debug_scripts() {
    for engine in ENGINES {
        let kv = start(engine, &["--busy-reply-threshold", "100"]);
        let mut other = Conn::connect(kv.port);
        // The caller of a busy script has its input read directly (it sent
        // a big argument): what it sends while the script runs, in many
        // small packets, waits for the script and runs after it, in order.
        let mut runner = Conn::connect(kv.port);
        assert_eq!(
            runner.cmd(&[b"SET", b"big", &pattern(200_000, 3)]),
            b"+OK\r\n"
        );
        start_busy_script(&mut runner, &mut other);
        for _ in 0..300 {
            runner.send_raw(b"PING\r\n");
            std::thread::sleep(Duration::from_millis(2));
        }
        let big2 = pattern(100_000, 4);
        runner.send_raw(&encode(&[b"SET", b"big2", &big2]));
        assert_eq!(other.cmd_str(&["SCRIPT", "KILL"]), b"+OK\r\n", "{engine}");
        let reply = String::from_utf8(runner.read_reply()).unwrap();
        assert!(reply.starts_with("-ERR Script killed"), "{engine}: {reply}");
        for _ in 0..300 {
            assert_eq!(runner.read_reply(), b"+PONG\r\n", "{engine}");
        }
        assert_eq!(runner.read_reply(), b"+OK\r\n", "{engine}");
        assert_eq!(
            bulk_payload(&runner.cmd_str(&["GET", "big2"])),
            Some(big2.as_slice())
        );
        // A debugging session of such a client: the debugger reads its
        // socket itself, nothing else does.
        let mut dbg = Conn::connect(kv.port);
        assert_eq!(
            dbg.cmd(&[b"SET", b"big3", &pattern(100_000, 5)]),
            b"+OK\r\n"
        );
        assert_eq!(dbg.cmd_str(&["SCRIPT", "DEBUG", "sync"]), b"+OK\r\n");
        let stopped = dbg.cmd_str(&["EVAL", "local a = 7\nreturn a", "0"]);
        assert!(stopped.starts_with(b"*2\r\n+* Stopped at 1"), "{engine}");
        dbg.cmd_str(&["step"]);
        let printed = String::from_utf8(dbg.cmd_str(&["print", "a"])).unwrap();
        assert!(printed.contains("+<value> 7\r\n"), "{engine}: {printed}");
        dbg.send(&[b"c"]);
        let end = String::from_utf8(dbg.read_reply()).unwrap();
        assert!(end.contains("<endsession>"), "{engine}: {end}");
        assert_eq!(dbg.read_reply(), b":7\r\n", "{engine}");
        dbg.expect_closed();
        assert_eq!(other.cmd_str(&["STRLEN", "big3"]), b":100000\r\n");
    }
}

#[test]
fn a_client_that_closes_its_side_gets_all_its_replies() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut s = std::net::TcpStream::connect(("127.0.0.1", kv.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut pipeline = Vec::new();
        for i in 0..200 {
            pipeline.extend(encode(&[b"INCR", b"c"]));
            pipeline.extend(encode(&[b"ECHO", format!("e{i}").as_bytes()]));
        }
        s.write_all(&pipeline).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        let mut want = Vec::new();
        for i in 0..200 {
            want.extend(format!(":{}\r\n", i + 1).into_bytes());
            let e = format!("e{i}");
            want.extend(format!("${}\r\n{e}\r\n", e.len()).into_bytes());
        }
        assert_eq!(got, want, "{engine}");
    }
}

#[test]
fn a_slot_taken_by_a_new_client_gets_nothing_of_the_old_one() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut admin = Conn::connect(kv.port);
        for round in 0..100 {
            // A client killed mid-command, with more of its input arriving
            // after the kill; the next client likely takes its slot.
            let mut old = Conn::connect(kv.port);
            let id = old.client_id();
            old.send_raw(b"*3\r\n$3\r\nSET\r\n$5\r\nstale\r\n$10\r\nabc");
            assert_eq!(
                admin.cmd_str(&["CLIENT", "KILL", "ID", &id]),
                b":1\r\n",
                "{engine} round {round}"
            );
            let _ = old.writer.write_all(b"defghij\r\n*1\r\n$4\r\nPING\r\n");
            let mut new = Conn::connect(kv.port);
            assert_eq!(new.cmd_str(&["PING"]), b"+PONG\r\n");
            assert_eq!(new.cmd_str(&["GET", "stale"]), b"$-1\r\n", "{engine}");
            assert_eq!(new.cmd_str(&["ECHO", "mine"]), b"$4\r\nmine\r\n");
            assert!(
                old.try_read_reply().is_none(),
                "{engine}: the killed client is closed"
            );
        }
        assert_eq!(admin.cmd_str(&["DBSIZE"]), b":0\r\n");
    }
}

#[test]
fn input_that_arrives_while_blocked_runs_after_the_unblock() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut waiter = Conn::connect(kv.port);
        let mut pusher = Conn::connect(kv.port);
        waiter.send_raw(&encode(&[b"BLPOP", b"q", b"0"]));
        common::wait_for("the client to block", 10, || {
            pusher.info_field("clients", "blocked_clients") == "1"
        });
        // Sent while blocked: kept until the BLPOP is answered.
        let mut more = Vec::new();
        for i in 0..100 {
            more.extend(encode(&[b"ECHO", format!("{i}").as_bytes()]));
        }
        waiter.send_raw(&more);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(pusher.cmd_str(&["LPUSH", "q", "x"]), b":1\r\n");
        assert_eq!(
            waiter.read_reply(),
            b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n",
            "{engine}"
        );
        for i in 0..100 {
            let e = format!("{i}");
            assert_eq!(
                waiter.read_reply(),
                format!("${}\r\n{e}\r\n", e.len()).into_bytes()
            );
        }
    }
}

/// `runner` starts a script that never ends; return once `other` is told
/// BUSY.
fn start_busy_script(runner: &mut Conn, other: &mut Conn) {
    runner.send(&[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"]);
    common::wait_for("the script to be busy", 10, || {
        other.cmd_str(&["PING"]).starts_with(b"-BUSY")
    });
}

#[test]
fn input_that_arrives_during_a_busy_script_waits_for_it() {
    for engine in ENGINES {
        let kv = start(engine, &["--busy-reply-threshold", "100"]);
        let mut runner = Conn::connect(kv.port);
        let mut other = Conn::connect(kv.port);
        start_busy_script(&mut runner, &mut other);
        // The script's own client sends more while its script runs, and a
        // client connects meanwhile.
        runner.send_raw(&encode(&[b"ECHO", b"after"]));
        let mut late = Conn::connect(kv.port);
        assert!(
            late.cmd_str(&["GET", "x"]).starts_with(b"-BUSY"),
            "{engine}"
        );
        assert_eq!(other.cmd_str(&["SCRIPT", "KILL"]), b"+OK\r\n");
        let reply = String::from_utf8(runner.read_reply()).unwrap();
        assert!(reply.starts_with("-ERR Script killed"), "{engine}: {reply}");
        assert_eq!(runner.read_reply(), b"$5\r\nafter\r\n", "{engine}");
        assert_eq!(late.cmd_str(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn input_taken_in_during_a_busy_script_is_answered_or_closed_after_it() {
    for engine in ENGINES {
        let kv = start(engine, &["--busy-reply-threshold", "100"]);
        let mut runner = Conn::connect(kv.port);
        let mut other = Conn::connect(kv.port);
        let mut blocked = Conn::connect(kv.port);
        blocked.send(&[b"BLPOP", b"nolist", b"0"]);
        // A big argument (read into a buffer of its own) half sent.
        let mut big = Conn::connect(kv.port);
        let set = encode(&[b"SET", b"big", &pattern(200_000, 7)]);
        big.send_raw(&set[..100_000]);
        common::wait_for("the clients", 10, || {
            other.info_field("clients", "blocked_clients") == "1"
        });
        start_busy_script(&mut runner, &mut other);
        // The script's caller sends many small packets, each on its own
        // (each took a receive buffer of the ring until the script ended,
        // and once they ran out nobody's input, SCRIPT KILL's included,
        // could be read).
        for _ in 0..600 {
            runner.send_raw(b"PING\r\n");
            std::thread::sleep(Duration::from_millis(2));
        }
        // The big argument is completed, and the blocked client leaves.
        big.send_raw(&set[100_000..]);
        drop(blocked);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(other.cmd_str(&["SCRIPT", "KILL"]), b"+OK\r\n", "{engine}");
        let reply = String::from_utf8(runner.read_reply()).unwrap();
        assert!(reply.starts_with("-ERR Script killed"), "{engine}: {reply}");
        for _ in 0..600 {
            assert_eq!(runner.read_reply(), b"+PONG\r\n", "{engine}");
        }
        // Answered (BUSY while the script ran, or run after it), not left
        // waiting for more input that will not come.
        let reply = big.read_reply();
        assert!(
            reply == b"+OK\r\n" || reply.starts_with(b"-BUSY"),
            "{engine}: {:?}",
            String::from_utf8_lossy(&reply)
        );
        // The client that left while blocked is gone, not kept forever.
        common::wait_for("the blocked client to be closed", 10, || {
            other.info_field("clients", "connected_clients") == "3"
        });
        assert_eq!(other.info_field("clients", "blocked_clients"), "0");
    }
}

#[test]
fn snapshots_forked_while_clients_send_are_whole() {
    for engine in ENGINES {
        let kv = start(engine, &["--enable-debug-command", "yes"]);
        let port = kv.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut c = Conn::connect(port);
                    let mut n = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let mut batch = Vec::new();
                        for _ in 0..100 {
                            n += 1;
                            batch.extend(encode(&[
                                b"SET",
                                format!("w{w}:{n}").as_bytes(),
                                &pattern(64, (n % 251) as u8),
                            ]));
                        }
                        c.send_raw(&batch);
                        for _ in 0..100 {
                            assert_eq!(c.read_reply(), b"+OK\r\n");
                        }
                    }
                    n
                })
            })
            .collect();
        let mut c = Conn::connect(port);
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(150));
            assert!(c.cmd_str(&["BGSAVE"]).starts_with(b"+Background saving"));
            common::wait_for("the BGSAVE to finish", 30, || {
                c.info_field("persistence", "rdb_bgsave_in_progress") == "0"
            });
            assert_eq!(c.info_field("persistence", "rdb_last_bgsave_status"), "ok");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
        assert_eq!(
            c.cmd_str(&["DBSIZE"]),
            format!(":{written}\r\n").into_bytes()
        );
        // The last snapshot was whole: a reload from a fresh one gives back
        // every key, and values are what was written.
        assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n", "{engine}");
        assert_eq!(
            c.cmd_str(&["DBSIZE"]),
            format!(":{written}\r\n").into_bytes()
        );
        assert_eq!(
            bulk_payload(&c.cmd_str(&["GET", "w2:7"])),
            Some(pattern(64, 7).as_slice())
        );
    }
}

#[test]
fn unix_socket_clients_are_served_by_each_engine() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.sock");
        let path_s = path.to_str().unwrap().to_string();
        let _kv = start(engine, &["--unixsocket", &path_s]);
        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let v = pattern(100_000, 9);
        let mut req = encode(&[b"SET", b"u", &v]);
        req.extend(encode(&[b"GET", b"u"]));
        s.write_all(&req).unwrap();
        let mut want = b"+OK\r\n$100000\r\n".to_vec();
        want.extend(&v);
        want.extend(b"\r\n");
        let mut got = vec![0; want.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, want, "{engine}");
    }
}

#[test]
fn a_burst_of_connections_is_accepted_and_served_by_each_engine() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        // All connected before any sends: the listener's backlog fills and
        // the accepts drain it.
        let mut conns: Vec<Conn> = (0..300).map(|_| Conn::connect(kv.port)).collect();
        for (i, c) in conns.iter_mut().enumerate() {
            let v = format!("v{i}");
            assert_eq!(c.cmd_str(&["SET", &format!("k{i}"), &v]), b"+OK\r\n");
        }
        for (i, c) in conns.iter_mut().enumerate().rev() {
            let want = format!("${}\r\nv{i}\r\n", format!("v{i}").len());
            assert_eq!(c.cmd_str(&["GET", &format!("k{i}")]), want.as_bytes());
        }
        let mut probe = Conn::connect(kv.port);
        assert_eq!(
            probe.info_field("clients", "connected_clients"),
            "301",
            "{engine}"
        );
        drop(conns);
        common::wait_for("the burst's clients to be gone", 10, || {
            probe.info_field("clients", "connected_clients") == "1"
        });
        let total: u64 = probe
            .info_field("stats", "total_connections_received")
            .parse()
            .unwrap();
        assert!(total >= 301, "{engine}: {total}");
    }
}

/// Is anything listening on `port` (does a TCP handshake complete)?
fn listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    )
    .is_ok()
}

#[test]
fn listeners_moved_by_config_set_close_the_old_socket_and_accept_on_the_new() {
    for engine in ENGINES {
        let kv = start(engine, &[]);
        let mut c = Conn::connect(kv.port);
        // A new port: the old socket is closed (anything still holding it,
        // such as an io_uring operation in flight, would keep it
        // listening), the new one serves.
        let port2 = common::free_port();
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "port", &port2.to_string()]),
            b"+OK\r\n"
        );
        assert!(!listening(kv.port), "{engine}: the old port still listens");
        let mut c2 = Conn::connect(port2);
        assert_eq!(c2.cmd_str(&["PING"]), b"+PONG\r\n");
        // The same port on an overlapping address list, there and back:
        // the old sockets must be closed before the new ones can bind.
        for bind in ["127.0.0.1", "0.0.0.0", "127.0.0.1"] {
            assert_eq!(
                c2.cmd_str(&["CONFIG", "SET", "bind", bind]),
                b"+OK\r\n",
                "{engine}"
            );
            let mut c3 = Conn::connect(port2);
            assert_eq!(c3.cmd_str(&["PING"]), b"+PONG\r\n", "{engine} {bind}");
        }
        // Back to the first port.
        assert_eq!(
            c2.cmd_str(&["CONFIG", "SET", "port", &kv.port.to_string()]),
            b"+OK\r\n"
        );
        assert!(!listening(port2), "{engine}: port {port2} still listens");
        assert_eq!(Conn::connect(kv.port).cmd_str(&["PING"]), b"+PONG\r\n");
        // Clients connected before every move were never disturbed.
        assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    }
}

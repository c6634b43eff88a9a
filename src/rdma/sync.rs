//! The two halves of an RDMA full sync as pure state machines: inputs are
//! control messages, completions and clock ticks, outputs are actions for
//! the caller (the event loop) to carry out. Nothing here touches a device,
//! a socket or a file, so every interleaving can be tested.
//!
//! `Fetch` (replica) keeps `window` reads of `chunk` bytes in flight, one per
//! slot of its registered ring, so the link stays full however long a round
//! trip takes (the seed's design had one chunk in flight and a READY/NEXT
//! message per chunk). Reads may complete in any order; their slots are
//! written to the file strictly in offset order (so the caller can fold the
//! CRC as it writes), and a slot is posted again only once written.
//!
//! `Serve` (master) waits for the replica's queue pair, brings its own up
//! towards it, then waits for the verdict: `rdma-done` with the offered
//! length and checksum puts the replica online; anything else — a failure
//! report, a wrong verdict, silence past the timeout — releases the region
//! and falls back to sending the same file over TCP. Either way the region
//! is released exactly once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::control::Offer;
use super::endpoint::{Completion, QpInfo, WcStatus};

/// What the replica's machine asks the caller to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAction {
    /// Post a read of `len` bytes at `remote_addr` into `slot`.
    PostRead {
        wr_id: u64,
        slot: usize,
        len: usize,
        remote_addr: u64,
    },
    /// The slot's bytes belong at `offset` of the file (in offset order).
    Write {
        slot: usize,
        offset: u64,
        len: usize,
    },
    /// Every byte is written: compute the checksum, call `verified`.
    Verify,
    /// The file is complete and checked: report `rdma-done`.
    Done { len: u64, crc: u64 },
    /// Give up: report `rdma-fail`, tear the endpoint down (reads may still
    /// be in flight), wait for the TCP transfer.
    Fail(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchState {
    Fetching,
    Verifying,
    Done,
    Failed,
}

/// The replica's half.
#[derive(Debug)]
pub struct Fetch {
    offer: Offer,
    chunk: u64,
    chunks: u64,
    pub state: FetchState,
    /// The chunk each slot holds (posted or completed), `None` when free.
    slots: Vec<Option<u64>>,
    /// The next chunk to post.
    next_post: u64,
    /// The next chunk to write.
    next_write: u64,
    /// Completed chunks waiting for their predecessors: chunk → slot.
    completed: BTreeMap<u64, usize>,
    /// Reads posted and not completed (the device owns their slots).
    outstanding: usize,
    timeout: Duration,
    last_progress: Instant,
    /// Bytes written so far.
    pub written: u64,
}

impl Fetch {
    /// A fetch of `offer` through `window` slots of `chunk` bytes; it fails
    /// when no read completes for `timeout`.
    pub fn new(
        offer: Offer,
        window: usize,
        chunk: usize,
        timeout: Duration,
        now: Instant,
    ) -> Fetch {
        let chunk = chunk.max(1) as u64;
        Fetch {
            offer,
            chunk,
            chunks: offer.region.len.div_ceil(chunk),
            state: FetchState::Fetching,
            slots: vec![None; window.max(1)],
            next_post: 0,
            next_write: 0,
            completed: BTreeMap::new(),
            outstanding: 0,
            timeout,
            last_progress: now,
            written: 0,
        }
    }

    /// Reads the device still owns.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    fn chunk_len(&self, chunk: u64) -> usize {
        (self.offer.region.len - chunk * self.chunk).min(self.chunk) as usize
    }

    /// Post the next chunk into a free `slot`, if any chunk is left.
    fn post_into(&mut self, slot: usize, out: &mut Vec<FetchAction>) {
        if self.next_post >= self.chunks {
            return;
        }
        let chunk = self.next_post;
        self.next_post += 1;
        self.slots[slot] = Some(chunk);
        self.outstanding += 1;
        out.push(FetchAction::PostRead {
            wr_id: chunk,
            slot,
            len: self.chunk_len(chunk),
            remote_addr: self.offer.region.addr + chunk * self.chunk,
        });
    }

    /// The first reads, one per slot (the timeout counts from `now`).
    pub fn start(&mut self, now: Instant) -> Vec<FetchAction> {
        self.last_progress = now;
        let mut out = Vec::new();
        for slot in 0..self.slots.len() {
            self.post_into(slot, &mut out);
        }
        if self.chunks == 0 {
            self.state = FetchState::Verifying;
            out.push(FetchAction::Verify);
        }
        out
    }

    fn fail(&mut self, reason: String) -> Vec<FetchAction> {
        if matches!(self.state, FetchState::Done | FetchState::Failed) {
            return Vec::new();
        }
        self.state = FetchState::Failed;
        vec![FetchAction::Fail(reason)]
    }

    /// A completion from the device.
    pub fn completion(&mut self, c: Completion, now: Instant) -> Vec<FetchAction> {
        // Ours only if posted and not already completed.
        let Some(slot) = self
            .slots
            .iter()
            .position(|s| *s == Some(c.wr_id))
            .filter(|s| !self.completed.values().any(|v| v == s))
        else {
            return self.fail(format!("unexpected completion of work request {}", c.wr_id));
        };
        self.outstanding -= 1;
        if self.state != FetchState::Fetching {
            // After a failure the device hands back what was in flight.
            self.slots[slot] = None;
            return Vec::new();
        }
        if c.status != WcStatus::Success {
            return self.fail(format!(
                "RDMA read of chunk {} failed: {:?}",
                c.wr_id, c.status
            ));
        }
        let want = self.chunk_len(c.wr_id);
        if c.bytes as usize != want {
            return self.fail(format!(
                "RDMA read of chunk {} moved {} bytes, not {want}",
                c.wr_id, c.bytes
            ));
        }
        self.last_progress = now;
        self.completed.insert(c.wr_id, slot);
        let mut out = Vec::new();
        while let Some(slot) = self.completed.remove(&self.next_write) {
            let chunk = self.next_write;
            let len = self.chunk_len(chunk);
            out.push(FetchAction::Write {
                slot,
                offset: chunk * self.chunk,
                len,
            });
            self.written += len as u64;
            self.next_write += 1;
            self.slots[slot] = None;
            self.post_into(slot, &mut out);
        }
        if self.next_write == self.chunks {
            self.state = FetchState::Verifying;
            out.push(FetchAction::Verify);
        }
        out
    }

    /// The checksum of everything written (all but the trailer).
    pub fn verified(&mut self, crc: u64) -> Vec<FetchAction> {
        if self.state != FetchState::Verifying {
            return Vec::new();
        }
        if crc != self.offer.crc {
            return self.fail(format!(
                "CRC64 mismatch: received {crc:016x}, offered {:016x}",
                self.offer.crc
            ));
        }
        self.state = FetchState::Done;
        vec![FetchAction::Done {
            len: self.offer.region.len,
            crc,
        }]
    }

    /// Time passes: give up when no read completed for the timeout.
    pub fn tick(&mut self, now: Instant) -> Vec<FetchAction> {
        if self.state == FetchState::Fetching
            && now.saturating_duration_since(self.last_progress) > self.timeout
        {
            return self.fail(format!(
                "no RDMA read completed for {} s",
                self.timeout.as_secs()
            ));
        }
        Vec::new()
    }

    /// The caller gives up (the endpoint failed, the master went to TCP).
    pub fn abort(&mut self, reason: &str) -> Vec<FetchAction> {
        self.fail(reason.to_string())
    }
}

/// What the master's machine asks the caller to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeAction {
    /// Bring our queue pair up towards the replica's.
    Connect(QpInfo),
    /// Deregister the region and unmap the file.
    Release,
    /// The replica has the snapshot: send it the stream kept meanwhile.
    Online,
    /// Send the same file over TCP instead.
    Fallback(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeState {
    AwaitQp,
    Transferring,
    Done,
    FellBack,
}

/// The master's half.
#[derive(Debug)]
pub struct Serve {
    offer: Offer,
    pub state: ServeState,
    timeout: Duration,
    last_progress: Instant,
    /// Bytes the replica last said it had.
    pub progress: u64,
}

impl Serve {
    pub fn new(offer: Offer, timeout: Duration, now: Instant) -> Serve {
        Serve {
            offer,
            state: ServeState::AwaitQp,
            timeout,
            last_progress: now,
            progress: 0,
        }
    }

    fn fall_back(&mut self, reason: String) -> Vec<ServeAction> {
        if matches!(self.state, ServeState::Done | ServeState::FellBack) {
            return Vec::new();
        }
        self.state = ServeState::FellBack;
        vec![ServeAction::Release, ServeAction::Fallback(reason)]
    }

    /// `REPLCONF rdma-qp`.
    pub fn replica_qp(&mut self, qp: QpInfo, now: Instant) -> Vec<ServeAction> {
        if self.state != ServeState::AwaitQp {
            return self.fall_back("the replica sent its queue pair twice".into());
        }
        self.state = ServeState::Transferring;
        self.last_progress = now;
        vec![ServeAction::Connect(qp)]
    }

    /// Our queue pair could not be brought up.
    pub fn connect_failed(&mut self, reason: &str) -> Vec<ServeAction> {
        self.fall_back(format!("connecting the queue pair: {reason}"))
    }

    /// `REPLCONF rdma-progress`: it resets the timeout only while it
    /// grows, and may not claim more than the region holds.
    pub fn progress(&mut self, bytes: u64, now: Instant) -> Vec<ServeAction> {
        if self.state != ServeState::Transferring {
            return Vec::new();
        }
        if bytes > self.offer.region.len {
            return self.fall_back(format!(
                "the replica claims {bytes} bytes of {}",
                self.offer.region.len
            ));
        }
        if bytes > self.progress {
            self.progress = bytes;
            self.last_progress = now;
        }
        Vec::new()
    }

    /// `REPLCONF rdma-done <len> <crc>`.
    pub fn done(&mut self, len: u64, crc: u64) -> Vec<ServeAction> {
        if self.state != ServeState::Transferring {
            return self.fall_back("rdma-done before the queue pair was up".into());
        }
        if len != self.offer.region.len || crc != self.offer.crc {
            return self.fall_back(format!(
                "the replica received {len} bytes with CRC64 {crc:016x}, not {} with {:016x}",
                self.offer.region.len, self.offer.crc
            ));
        }
        self.state = ServeState::Done;
        self.progress = len;
        vec![ServeAction::Release, ServeAction::Online]
    }

    /// `REPLCONF rdma-fail <reason>`.
    pub fn failed(&mut self, reason: &str) -> Vec<ServeAction> {
        self.fall_back(format!("the replica reports: {reason}"))
    }

    /// Time passes: silence past the timeout falls back.
    pub fn tick(&mut self, now: Instant) -> Vec<ServeAction> {
        if matches!(self.state, ServeState::AwaitQp | ServeState::Transferring)
            && now.saturating_duration_since(self.last_progress) > self.timeout
        {
            return self.fall_back(format!(
                "no word from the replica for {} s",
                self.timeout.as_secs()
            ));
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persistence::crc64::crc64;
    use crate::rdma::endpoint::RemoteRegion;
    use proptest::prelude::*;

    fn offer_for(data: &[u8]) -> Offer {
        Offer {
            region: RemoteRegion {
                addr: 0x1000,
                rkey: 7,
                len: data.len() as u64,
            },
            crc: crc64(0, data),
            qp: QpInfo {
                qpn: 1,
                psn: 2,
                lid: 3,
                gid: [0; 16],
                mtu: 1024,
                rd_atomic: 16,
            },
        }
    }

    /// A fetch of `data` with a 1 s timeout.
    fn fetch_of(data: &[u8], window: usize, chunk: usize) -> Fetch {
        Fetch::new(
            offer_for(data),
            window,
            chunk,
            Duration::from_secs(1),
            Instant::now(),
        )
    }

    /// What can happen to a posted read in the simulation.
    #[derive(Debug, Clone, Copy)]
    enum Fate {
        Ok,
        Error,
        Short,
        Corrupt,
    }

    /// Drive a `Fetch` against a simulated device: `picks` choose which
    /// outstanding read completes next, `fates` what happens to it, `ticks`
    /// when the clock jumps past the timeout. Returns the file written and
    /// the final state, checking the ownership rules on the way.
    fn simulate(
        data: &[u8],
        window: usize,
        chunk: usize,
        picks: &[usize],
        fates: &[Fate],
        tick_at: Option<usize>,
    ) -> (Vec<u8>, FetchState, usize) {
        let t0 = Instant::now();
        let mut f = Fetch::new(offer_for(data), window, chunk, Duration::from_secs(5), t0);
        let mut slots: Vec<Vec<u8>> = vec![Vec::new(); window];
        // Reads in flight: (wr_id, slot, len, addr).
        let mut flight: Vec<(u64, usize, usize, u64)> = Vec::new();
        let mut file = vec![0u8; data.len()];
        let mut crc = 0u64;
        let mut fails = 0;
        let mut actions = f.start(Instant::now());
        let mut step = 0;
        loop {
            for a in std::mem::take(&mut actions) {
                match a {
                    FetchAction::PostRead {
                        wr_id,
                        slot,
                        len,
                        remote_addr,
                    } => {
                        assert!(
                            flight.iter().all(|r| r.1 != slot),
                            "slot {slot} posted twice"
                        );
                        flight.push((wr_id, slot, len, remote_addr));
                    }
                    FetchAction::Write { slot, offset, len } => {
                        assert!(flight.iter().all(|r| r.1 != slot), "slot {slot} in flight");
                        let o = offset as usize;
                        file[o..o + len].copy_from_slice(&slots[slot][..len]);
                        crc = crc64(crc, &slots[slot][..len]);
                    }
                    FetchAction::Verify => actions.extend(f.verified(crc)),
                    FetchAction::Done { len, .. } => assert_eq!(len, data.len() as u64),
                    FetchAction::Fail(_) => fails += 1,
                }
            }
            if !actions.is_empty() {
                continue;
            }
            if tick_at == Some(step) {
                actions = f.tick(t0 + Duration::from_secs(6));
                step += 1;
                continue;
            }
            if flight.is_empty() {
                break;
            }
            let pick = picks.get(step).copied().unwrap_or(0) % flight.len();
            let fate = fates.get(step).copied().unwrap_or(Fate::Ok);
            step += 1;
            let (wr_id, slot, len, addr) = flight.remove(pick);
            let at = (addr - 0x1000) as usize;
            slots[slot] = data[at..at + len].to_vec();
            let (status, bytes) = match fate {
                Fate::Ok => (WcStatus::Success, len as u32),
                Fate::Error => (WcStatus::RemoteAccess, 0),
                Fate::Short => (WcStatus::Success, len as u32 - 1),
                Fate::Corrupt => {
                    slots[slot][0] ^= 1;
                    (WcStatus::Success, len as u32)
                }
            };
            actions = f.completion(
                Completion {
                    wr_id,
                    status,
                    bytes,
                },
                t0,
            );
        }
        assert_eq!(f.outstanding(), 0, "every read handed back");
        (file, f.state, fails)
    }

    #[test]
    fn reads_in_order_fill_the_file() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let (file, state, fails) = simulate(&data, 4, 1000, &[], &[], None);
        assert_eq!(state, FetchState::Done);
        assert_eq!(fails, 0);
        assert_eq!(file, data);
    }

    #[test]
    fn the_window_keeps_every_slot_busy() {
        let data = vec![1u8; 100];
        let mut f = fetch_of(&data, 4, 10);
        let posts = f
            .start(Instant::now())
            .iter()
            .filter(|a| matches!(a, FetchAction::PostRead { .. }))
            .count();
        assert_eq!(posts, 4);
        assert_eq!(f.outstanding(), 4);
    }

    #[test]
    fn a_stray_completion_fails_the_fetch() {
        let data = vec![1u8; 100];
        let mut f = fetch_of(&data, 2, 10);
        f.start(Instant::now());
        let out = f.completion(
            Completion {
                wr_id: 99,
                status: WcStatus::Success,
                bytes: 10,
            },
            Instant::now(),
        );
        assert!(matches!(out.as_slice(), [FetchAction::Fail(_)]));
    }

    #[test]
    fn the_master_goes_online_only_on_the_offered_verdict() {
        let data = b"abc".to_vec();
        let o = offer_for(&data);
        let t0 = Instant::now();
        let mut s = Serve::new(o, Duration::from_secs(5), t0);
        assert_eq!(s.replica_qp(o.qp, t0), vec![ServeAction::Connect(o.qp)]);
        assert_eq!(
            s.done(3, o.crc),
            vec![ServeAction::Release, ServeAction::Online]
        );
        assert_eq!(s.failed("late"), vec![]);
        let mut s = Serve::new(o, Duration::from_secs(5), t0);
        s.replica_qp(o.qp, t0);
        assert!(matches!(
            s.done(3, o.crc ^ 1).as_slice(),
            [ServeAction::Release, ServeAction::Fallback(_)]
        ));
        let mut s = Serve::new(o, Duration::from_secs(5), t0);
        s.replica_qp(o.qp, t0);
        assert_eq!(s.progress(1, t0 + Duration::from_secs(4)), vec![]);
        assert_eq!(s.tick(t0 + Duration::from_secs(8)), vec![]);
        assert!(matches!(
            s.tick(t0 + Duration::from_secs(10)).as_slice(),
            [ServeAction::Release, ServeAction::Fallback(_)]
        ));
    }

    fn fate() -> impl Strategy<Value = Fate> {
        prop_oneof![
            20 => Just(Fate::Ok),
            1 => Just(Fate::Error),
            1 => Just(Fate::Short),
            1 => Just(Fate::Corrupt),
        ]
    }

    proptest! {
        /// Any completion order and any fault: the fetch ends Done with the
        /// exact bytes, or Failed once, with every read handed back.
        #[test]
        fn any_interleaving_ends_done_and_equal_or_failed(
            data in proptest::collection::vec(any::<u8>(), 0..3000),
            window in 1usize..6,
            chunk in 1usize..400,
            picks in proptest::collection::vec(any::<usize>(), 0..200),
            fates in proptest::collection::vec(fate(), 0..200),
            tick_at in proptest::option::of(0usize..60),
        ) {
            let (file, state, fails) = simulate(&data, window, chunk, &picks, &fates, tick_at);
            match state {
                FetchState::Done => {
                    prop_assert_eq!(fails, 0);
                    prop_assert_eq!(file, data);
                }
                FetchState::Failed => prop_assert_eq!(fails, 1),
                other => prop_assert!(false, "ended in {:?}", other),
            }
            // Without injected faults, it always succeeds.
            if fates.iter().all(|f| matches!(f, Fate::Ok)) && tick_at.is_none() {
                prop_assert_eq!(state, FetchState::Done);
            }
        }

        /// Any sequence of control messages and ticks: the region is released
        /// exactly once, and the replica goes online or falls back, never both.
        #[test]
        fn the_master_releases_its_region_once(events in proptest::collection::vec(0u8..7, 0..20)) {
            let data = b"snapshot".to_vec();
            let o = offer_for(&data);
            let t0 = Instant::now();
            let mut s = Serve::new(o, Duration::from_secs(5), t0);
            let mut all = Vec::new();
            for (i, e) in events.iter().enumerate() {
                let now = t0 + Duration::from_secs(i as u64);
                all.extend(match e {
                    0 => s.replica_qp(o.qp, now),
                    1 => s.done(o.region.len, o.crc),
                    2 => s.done(o.region.len, o.crc ^ 1),
                    3 => s.failed("x"),
                    4 => s.connect_failed("x"),
                    5 => s.progress(i as u64, now),
                    _ => s.tick(now + Duration::from_secs(10)),
                });
            }
            let releases = all.iter().filter(|a| **a == ServeAction::Release).count();
            let online = all.iter().filter(|a| **a == ServeAction::Online).count();
            let fallbacks = all.iter().filter(|a| matches!(a, ServeAction::Fallback(_))).count();
            match s.state {
                ServeState::Done => prop_assert_eq!((releases, online, fallbacks), (1, 1, 0)),
                ServeState::FellBack => prop_assert_eq!((releases, online, fallbacks), (1, 0, 1)),
                _ => prop_assert_eq!((releases, online, fallbacks), (0, 0, 0)),
            }
        }
    }
}

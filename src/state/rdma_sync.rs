//! RDMA full sync, carried out: the master offers its dump to an
//! RDMA-capable replica and the replica fetches it (the machines are in
//! `rdma::sync`, the lines in `rdma::control`; this file does what their
//! actions say with real endpoints, files and replica links).
//!
//! Master: when a disk-based snapshot for replicas is written, a replica
//! that said `capa rdma` gets, in place of `$<len>`, an offer of the file
//! mapped read-only and registered with the device. Its `REPLCONF rdma-*`
//! messages drive `Serve`; on success the replica gets the stream kept
//! since +FULLRESYNC and is online, on any failure the region is released
//! and the same file goes out over TCP (`SendBulk`).
//!
//! Replica: the offer opens an endpoint, sends our queue pair, and keeps a
//! window of reads in flight; each completed slot is written at its offset
//! of the temporary dump (strictly in order, folding the CRC), and the
//! verdict goes back over TCP. A failure sends `rdma-fail` and waits for
//! the master's `$<len>`; the rest is the ordinary TCP transfer.

use std::fs::File;
use std::io::Seek;
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::client::ClientState;
use super::replication::ReplicaPhase;
use super::Server;
use crate::persistence::crc64::crc64;
use crate::rdma::control::{self, Offer};
use crate::rdma::sync::{Fetch, FetchAction, Serve, ServeAction};
use crate::rdma::{Endpoint, RdmaError, CHUNK, WINDOW};

/// The size of a dump's checksum trailer.
const TRAILER: u64 = 8;

/// A replica being served over RDMA (in its `ReplicaPhase`).
pub struct RdmaServe {
    pub machine: Serve,
    /// Dropped before the mapping it registered (field order).
    endpoint: Box<dyn Endpoint>,
    rkey: u32,
    map: Option<memmap2::Mmap>,
    /// The dump, for the TCP fallback.
    file: File,
    len: u64,
    started: Instant,
}

impl std::fmt::Debug for RdmaServe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaServe")
            .field("state", &self.machine.state)
            .field("len", &self.len)
            .finish()
    }
}

/// The dump's payload checksum: its trailer when the writer computed one
/// (so the master reads nothing), else computed here.
fn payload_crc(map: &[u8]) -> u64 {
    let payload = map.len().saturating_sub(TRAILER as usize);
    let mut trailer = [0u8; 8];
    trailer.copy_from_slice(&map[payload..]);
    match u64::from_le_bytes(trailer) {
        0 => crc64(0, &map[..payload]),
        crc => crc,
    }
}

impl Server {
    /// Does this replica get its full sync over RDMA?
    pub fn wants_rdma(&self, capa_rdma: bool) -> bool {
        capa_rdma && self.config.repl_rdma && self.repl.rdma.is_some()
    }

    /// Offer the dump at `path` to a replica: map and register it. The
    /// returned line replaces the `$<len>` line.
    pub fn offer_rdma(
        &mut self,
        path: &std::path::Path,
    ) -> Result<(Box<RdmaServe>, String), RdmaError> {
        let device = self
            .repl
            .rdma
            .as_ref()
            .ok_or_else(|| RdmaError("no RDMA device".into()))?;
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len <= TRAILER {
            return Err(RdmaError(format!("the dump is only {len} bytes")));
        }
        // SAFETY: the dump is written once by the child and renamed into
        // place; nothing writes it while mapped (a later save writes a new
        // file and renames it over this name, leaving this inode alone).
        let map = unsafe { memmap2::Mmap::map(&file) }?;
        // Children forked while it is registered never see it.
        map.advise(memmap2::Advice::DontFork)?;
        let crc = payload_crc(&map);
        let mut endpoint = device.0.open_endpoint()?;
        let region = endpoint.register_file(&file, map.as_ptr(), map.len())?;
        let offer = Offer {
            region,
            crc,
            qp: endpoint.local_info(),
        };
        let timeout = Duration::from_secs(self.config.repl_timeout.max(1) as u64);
        let serve = RdmaServe {
            machine: Serve::new(offer, timeout, Instant::now()),
            endpoint,
            rkey: region.rkey,
            map: Some(map),
            file,
            len,
            started: Instant::now(),
        };
        Ok((Box::new(serve), offer.line()))
    }

    /// `REPLCONF rdma-*` from a replica (out of the slab): feed its
    /// machine and carry out what it says. Never answered.
    pub fn rdma_replica_message(&mut self, client: &mut ClientState, msg: control::Message) {
        let now = Instant::now();
        let Some(ReplicaPhase::RdmaTransfer(serve)) = client.repl.as_mut().map(|l| &mut l.phase)
        else {
            // Late news from a transfer that already ended: nothing to do.
            return;
        };
        let actions = match msg {
            control::Message::Qp(qp) => serve.machine.replica_qp(qp, now),
            control::Message::Progress(bytes) => serve.machine.progress(bytes, now),
            control::Message::Done { len, crc } => serve.machine.done(len, crc),
            control::Message::Fail(reason) => serve.machine.failed(&reason),
        };
        self.apply_serve_actions(client, actions);
    }

    fn apply_serve_actions(&mut self, client: &mut ClientState, actions: Vec<ServeAction>) {
        let mut queue = std::collections::VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            let Some(link) = client.repl.as_mut() else {
                return;
            };
            let ReplicaPhase::RdmaTransfer(serve) = &mut link.phase else {
                return;
            };
            match action {
                ServeAction::Connect(qp) => match serve.endpoint.connect(&qp) {
                    // Reads sent before our queue pair is up would be
                    // dropped: the replica starts on this line.
                    Ok(()) => client.reply.raw(b"+RDMAREADY\r\n"),
                    Err(e) => queue.extend(serve.machine.connect_failed(&e.0)),
                },
                ServeAction::Release => {
                    let _ = serve.endpoint.deregister(serve.rkey);
                    serve.map = None;
                }
                ServeAction::Online => {
                    let usec = serve.started.elapsed().as_micros() as u64;
                    let bytes = serve.len;
                    let stats = &mut self.repl.rdma_stats;
                    stats.fullsyncs += 1;
                    stats.last_bytes = bytes;
                    stats.last_usec = usec;
                    // Our verdict, then the stream kept since +FULLRESYNC
                    // (or, for `rdb-only`, the end of the link).
                    client.reply.raw(b"+RDMAOK\r\n");
                    link.phase = ReplicaPhase::Online;
                    self.bulk_sent(client);
                    info!(
                        "Synchronization with replica {} succeeded over RDMA ({bytes} bytes in {:.3} s)",
                        client.addr,
                        usec as f64 / 1e6
                    );
                }
                ServeAction::Fallback(reason) => {
                    self.repl.rdma_stats.failures += 1;
                    self.repl.rdma_stats.fallbacks += 1;
                    warn!(
                        "RDMA full sync to replica {} failed ({reason}): sending the dump over TCP",
                        client.addr
                    );
                    let ReplicaPhase::RdmaTransfer(serve) =
                        std::mem::replace(&mut link.phase, ReplicaPhase::WaitBgsaveEnd)
                    else {
                        return;
                    };
                    let RdmaServe { mut file, len, .. } = *serve;
                    if let Err(e) = file.rewind() {
                        warn!("SYNC failed for replica {}: {e}", client.addr);
                        client.close_asap = true;
                        return;
                    }
                    client.reply.raw(format!("${len}\r\n").as_bytes());
                    link.phase = ReplicaPhase::SendBulk {
                        file,
                        remaining: len,
                    };
                }
            }
        }
    }

    /// Once a second: RDMA transfers whose replica went silent fall back.
    pub fn rdma_serve_cron(&mut self) {
        let now = Instant::now();
        for id in self.repl.replicas.clone() {
            let Some((slot, mut c)) = self.take_client(id) else {
                continue;
            };
            if let Some(ReplicaPhase::RdmaTransfer(serve)) = c.repl.as_mut().map(|l| &mut l.phase) {
                let actions = serve.machine.tick(now);
                if !actions.is_empty() {
                    self.apply_serve_actions(&mut c, actions);
                    if c.close_asap {
                        self.to_close.push((slot, id));
                    }
                    c.queue_write(&mut self.pending_writes);
                }
            }
            self.clients[slot] = Some(c);
        }
    }
}

/// A replica's fetch in progress (kept in the `Transfer`).
pub struct RdmaFetch {
    machine: Fetch,
    endpoint: Box<dyn Endpoint>,
    /// CRC64 of the payload written so far (the trailer excluded).
    crc: u64,
    payload_len: u64,
    started: Instant,
    last_report: Instant,
}

impl std::fmt::Debug for RdmaFetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaFetch")
            .field("state", &self.machine.state)
            .field("written", &self.machine.written)
            .finish()
    }
}

/// Where a fetch stands after its completions were handled.
#[derive(Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    Running,
    /// All bytes are in and checked; the transfer is complete.
    Done,
    /// It failed; the master was told; a TCP transfer follows.
    Failed,
}

fn queue_command(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    super::feed::encode_command(&refs, out);
}

impl Server {
    /// The master offered its dump over RDMA (`+RDMAFULLSYNC`): open an
    /// endpoint and send our queue pair (into `out`, the link's output);
    /// the reads start at `+RDMAREADY` (`rdma_fetch_begin`). Returns the
    /// completion fd for the loop to poll, or `None` when RDMA cannot be
    /// used (the master was told).
    pub fn rdma_fetch_start(&mut self, offer: Offer, out: &mut Vec<u8>) -> Option<RawFd> {
        match self.open_fetch(offer) {
            Ok((fetch, fd)) => {
                let qp = fetch.endpoint.local_info();
                queue_command(out, &control::qp_command(&qp));
                if let Some(t) = self.master.transfer.as_mut() {
                    t.rdma = Some(Box::new(fetch));
                }
                info!(
                    "MASTER <-> REPLICA sync: receiving {} bytes from master over RDMA",
                    offer.region.len
                );
                Some(fd)
            }
            Err(e) => {
                self.repl.rdma_stats.failures += 1;
                warn!("RDMA full sync not possible ({e}): asking for the dump over TCP");
                queue_command(out, &control::fail_command(&e.0));
                None
            }
        }
    }

    fn open_fetch(&mut self, offer: Offer) -> Result<(RdmaFetch, RawFd), RdmaError> {
        let device = self
            .repl
            .rdma
            .as_ref()
            .ok_or_else(|| RdmaError("no RDMA device".into()))?;
        if offer.region.len <= TRAILER {
            return Err(RdmaError("offered dump too short".into()));
        }
        let mut endpoint = device.0.open_endpoint()?;
        endpoint.alloc_slots(WINDOW, CHUNK)?;
        endpoint.connect(&offer.qp)?;
        let fd = endpoint.completion_fd();
        let timeout = Duration::from_secs(self.config.repl_timeout.max(1) as u64);
        let now = Instant::now();
        Ok((
            RdmaFetch {
                machine: Fetch::new(offer, WINDOW, CHUNK, timeout, now),
                endpoint,
                crc: 0,
                payload_len: offer.region.len - TRAILER,
                started: now,
                last_report: now,
            },
            fd,
        ))
    }

    /// `+RDMAREADY`: the master's queue pair is up; post the first reads.
    pub fn rdma_fetch_begin(&mut self, out: &mut Vec<u8>) -> FetchOutcome {
        let now = Instant::now();
        let Some(fetch) = self.master.transfer.as_mut().and_then(|t| t.rdma.as_mut()) else {
            return FetchOutcome::Failed;
        };
        // The timeout and the progress reports count from the first reads.
        fetch.last_report = now;
        let actions = fetch.machine.start(now);
        self.run_fetch_actions(actions, out)
    }

    /// Completions are waiting (the loop saw the fd): handle them all.
    pub fn rdma_fetch_poll(&mut self, out: &mut Vec<u8>) -> FetchOutcome {
        let Some(fetch) = self.master.transfer.as_mut().and_then(|t| t.rdma.as_mut()) else {
            return FetchOutcome::Running;
        };
        let mut completions = Vec::new();
        let mut actions = Vec::new();
        match fetch.endpoint.poll(&mut completions) {
            Ok(()) => {
                let now = Instant::now();
                for c in completions {
                    actions.extend(fetch.machine.completion(c, now));
                }
            }
            Err(e) => actions.extend(fetch.machine.abort(&format!("polling completions: {e}"))),
        }
        self.run_fetch_actions(actions, out)
    }

    /// Once a loop turn while fetching: time out a stalled fetch, and tell
    /// the master how far it got once a second (its timeout counts from
    /// that).
    pub fn rdma_fetch_tick(&mut self, out: &mut Vec<u8>) -> FetchOutcome {
        let Some(fetch) = self.master.transfer.as_mut().and_then(|t| t.rdma.as_mut()) else {
            return FetchOutcome::Running;
        };
        let now = Instant::now();
        if now.duration_since(fetch.last_report) >= Duration::from_secs(1) {
            fetch.last_report = now;
            queue_command(out, &control::progress_command(fetch.machine.written));
        }
        let actions = fetch.machine.tick(now);
        self.run_fetch_actions(actions, out)
    }

    fn run_fetch_actions(&mut self, actions: Vec<FetchAction>, out: &mut Vec<u8>) -> FetchOutcome {
        let mut queue = std::collections::VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            let Some(t) = self.master.transfer.as_mut() else {
                return FetchOutcome::Failed;
            };
            let Some(fetch) = t.rdma.as_mut() else {
                return FetchOutcome::Failed;
            };
            match action {
                FetchAction::PostRead {
                    wr_id,
                    slot,
                    len,
                    remote_addr,
                } => {
                    let rkey = t.rdma_rkey;
                    if let Err(e) = fetch
                        .endpoint
                        .post_read(wr_id, slot, len, remote_addr, rkey)
                    {
                        queue.extend(fetch.machine.abort(&format!("posting a read: {e}")));
                    }
                }
                FetchAction::Write { slot, offset, len } => {
                    let Some(bytes) = fetch.endpoint.slot(slot, len) else {
                        queue.extend(fetch.machine.abort("a slot shorter than its chunk"));
                        continue;
                    };
                    let payload = fetch.payload_len.saturating_sub(offset).min(len as u64);
                    fetch.crc = crc64(fetch.crc, &bytes[..payload as usize]);
                    if let Err(e) = t.file.write_all_at(bytes, offset) {
                        queue.extend(fetch.machine.abort(&format!("writing the dump: {e}")));
                    }
                }
                FetchAction::Verify => {
                    let crc = fetch.crc;
                    queue.extend(fetch.machine.verified(crc));
                }
                FetchAction::Done { len, crc } => {
                    queue_command(out, &control::done_command(len, crc));
                    let usec = fetch.started.elapsed().as_micros() as u64;
                    // The transfer is complete at the master's +RDMAOK (it
                    // may have gone to TCP meanwhile: then `$<len>` comes).
                    t.rdma = None;
                    t.rdma_verified = Some(len);
                    t.rdma_result = Some((len, usec));
                    info!(
                        "MASTER <-> REPLICA sync: received {len} bytes over RDMA in {:.3} s, checked",
                        usec as f64 / 1e6
                    );
                    return FetchOutcome::Done;
                }
                FetchAction::Fail(reason) => {
                    queue_command(out, &control::fail_command(&reason));
                    // Dropping the endpoint destroys the queue pair: reads
                    // still in flight are flushed, the slots are freed.
                    t.rdma = None;
                    // Unless the master's TCP transfer already began.
                    if t.size.is_none() {
                        if let Err(e) = t.restart() {
                            warn!("{e}");
                        }
                    }
                    self.repl.rdma_stats.failures += 1;
                    warn!("RDMA full sync failed ({reason}): waiting for the dump over TCP");
                    return FetchOutcome::Failed;
                }
            }
        }
        FetchOutcome::Running
    }
}

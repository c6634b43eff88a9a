//! Replication, replica side: the state of the link to our master and what
//! happens to the dataset (the event loop owns the socket; see
//! `server/replica.rs`).
//!
//! A replica keeps its master's replication id and offset as its own
//! (`Server::replid`, `repl.offset`), and a backlog of the master's stream
//! exactly as received, so that after a lost link it asks to continue
//! (PSYNC id offset+1), and after a promotion its own replicas can. It
//! never expires keys itself: a read of a logically expired key answers as
//! if it were missing, and the master's DEL removes it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use tracing::{info, warn};

use super::Server;
use crate::persistence::rdb;

/// Where the link to the master stands (Redis's repl_state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected: connect at the next opportunity.
    Connect,
    Connecting,
    ReceivePong,
    ReceiveAuth,
    ReceivePort,
    /// `replica-announce-ip` was sent (REPLCONF ip-address).
    ReceiveIp,
    ReceiveCapa,
    ReceivePsync,
    /// Receiving the dump.
    Transfer,
    /// Loading the received dump (clients get -LOADING).
    Loading,
    /// +CONTINUE: the link becomes the master client at once.
    Continued,
    /// The master client is in the slab.
    Connected,
}

/// The replica's side of replication.
#[derive(Debug)]
pub struct MasterState {
    /// REPLICAOF host port; `None` when this server is a master.
    pub target: Option<(String, u16)>,
    /// REPLICAOF changed the target: the loop drops the current link.
    pub changed: bool,
    pub state: LinkState,
    /// Id of the master client, once the link is established.
    pub client_id: Option<u64>,
    pub transfer: Option<Transfer>,
    /// Last time anything came from the master.
    pub last_io: Instant,
    /// No reconnection attempt before this.
    pub retry_at: Instant,
    /// Since when the link is down (INFO master_link_down_since_seconds).
    pub down_since: Option<Instant>,
    /// The +FULLRESYNC being served: the master's id and offset.
    pub full_sync_from: Option<(String, i64)>,
    /// The database the master's stream had selected when the link was
    /// lost (or when the dump we started from was taken): a continued
    /// stream goes on from there.
    pub stream_db: usize,
    /// The AOF was on before a full sync's load: start it again after.
    pub aof_to_restart: bool,
    /// The temporary dump being loaded as it is received; it becomes the
    /// dump file once loaded, and goes if the sync fails.
    pub streamed_dump: Option<PathBuf>,
}

impl Default for MasterState {
    fn default() -> Self {
        MasterState {
            target: None,
            changed: false,
            state: LinkState::Connect,
            client_id: None,
            transfer: None,
            last_io: Instant::now(),
            retry_at: Instant::now(),
            down_since: None,
            full_sync_from: None,
            stream_db: 0,
            aof_to_restart: false,
            streamed_dump: None,
        }
    }
}

impl MasterState {
    /// The link is gone (or never came up): try again in a second.
    pub fn link_lost(&mut self) {
        if self.state == LinkState::Connected || self.down_since.is_none() {
            self.down_since = Some(Instant::now());
        }
        self.state = LinkState::Connect;
        self.client_id = None;
        self.transfer = None;
        self.retry_at = Instant::now() + std::time::Duration::from_secs(1);
    }

    /// What PSYNC asks for: our history if we have one (a backlog: we
    /// were synchronised before, or were a master), else a full sync.
    pub fn psync_request(&self, replid: &str, offset: i64, history: bool) -> (String, i64) {
        if history {
            (replid.to_string(), offset + 1)
        } else {
            ("?".to_string(), -1)
        }
    }

    pub fn is_syncing(&self) -> bool {
        self.target.is_some() && self.state != LinkState::Connected
    }

    /// Is the dataset being loaded from the master (received, or still
    /// arriving)?
    pub fn loads_sync(&self) -> bool {
        self.state == LinkState::Loading || self.streamed_dump.is_some()
    }
}

/// The dump being received: into a temporary file, sized by the `$len`
/// line or ended by the `$EOF:` mark.
#[derive(Debug)]
pub struct Transfer {
    pub file: std::fs::File,
    pub tmp_path: PathBuf,
    /// The `$` line, until it is complete.
    header: Vec<u8>,
    /// Payload size (`$len`); `None` before the header or with a mark.
    pub size: Option<u64>,
    /// The 40-byte end mark of a diskless transfer.
    mark: Option<Vec<u8>>,
    pub received: u64,
    /// The last bytes written (to find the mark).
    tail: Vec<u8>,
    /// Bytes after the payload (the stream that follows).
    leftover: Vec<u8>,
    done: bool,
    /// The file is complete and on disk (`finish`).
    finished: bool,
    /// The `$` line just arrived: the loop decides whether to load the
    /// dump as it arrives.
    pub payload_begun: bool,
    /// The dump is loaded as it arrives.
    pub streamed: bool,
    /// The master offered the dump over RDMA (`+RDMAFULLSYNC`): the loop
    /// starts the fetch.
    pub rdma_offer: Option<crate::rdma::control::Offer>,
    /// The RDMA fetch in progress, and the key of the region it reads.
    pub rdma: Option<Box<super::rdma_sync::RdmaFetch>>,
    pub rdma_rkey: u32,
    /// The master sent the dump over TCP while a fetch was running (it
    /// gave up on RDMA first): the fetch was dropped.
    pub rdma_overtaken: bool,
    /// `+RDMAREADY`: the master's queue pair is up, reads may start.
    pub rdma_ready: bool,
    /// Our `rdma-done` for this many bytes is sent; the transfer is complete
    /// only when the master confirms with `+RDMAOK` (it may have given up
    /// on RDMA meanwhile, and then its `$<len>` comes instead).
    pub rdma_verified: Option<u64>,
    /// The fetch's size and duration, counted once `+RDMAOK` arrives.
    pub rdma_result: Option<(u64, u64)>,
}

/// The length of a diskless transfer's end mark.
const EOF_MARK_LEN: usize = 40;

impl Transfer {
    pub fn new(file: std::fs::File, tmp_path: PathBuf) -> Transfer {
        Transfer {
            file,
            tmp_path,
            header: Vec::new(),
            size: None,
            mark: None,
            received: 0,
            tail: Vec::new(),
            leftover: Vec::new(),
            done: false,
            finished: false,
            payload_begun: false,
            streamed: false,
            rdma_offer: None,
            rdma: None,
            rdma_rkey: 0,
            rdma_overtaken: false,
            rdma_ready: false,
            rdma_verified: None,
            rdma_result: None,
        }
    }

    /// An RDMA fetch brought the whole `len`-byte dump.
    pub fn complete(&mut self, len: u64) {
        self.size = Some(len);
        self.received = len;
        self.done = true;
    }

    /// Start over from an empty file, waiting for a `$` line (an RDMA
    /// fetch failed; the master sends the dump over TCP next).
    pub fn restart(&mut self) -> Result<(), String> {
        self.rdma = None;
        self.rdma_offer = None;
        self.rdma_ready = false;
        self.rdma_verified = None;
        self.rdma_result = None;
        self.size = None;
        self.mark = None;
        self.received = 0;
        self.header.clear();
        self.file
            .set_len(0)
            .map_err(|e| format!("Truncating the temp file after a failed RDMA fetch: {e}"))
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// How much of the dump the file holds (not counting what may be the
    /// end mark), and whether that is all of it.
    pub fn loadable(&self) -> (u64, bool) {
        if self.mark.is_some() && !self.finished {
            (self.received.saturating_sub(EOF_MARK_LEN as u64), false)
        } else {
            (self.received, self.finished)
        }
    }

    pub fn take_leftover(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.leftover)
    }

    /// Bytes from the master during the transfer.
    pub fn receive(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        if self.done {
            self.leftover.extend_from_slice(bytes);
            return Ok(());
        }
        if self.size.is_none() && self.mark.is_none() {
            // The `$` line, after any keepalive newlines.
            while let Some(&b) = bytes.first() {
                bytes = &bytes[1..];
                if b == b'\n' {
                    let line = String::from_utf8_lossy(&self.header).trim().to_string();
                    self.header.clear();
                    if line.is_empty() {
                        continue;
                    }
                    let rdma_running = self.rdma.is_some()
                        || self.rdma_offer.is_some()
                        || self.rdma_verified.is_some();
                    if line.starts_with('$') && rdma_running {
                        // The master went to TCP before our verdict reached
                        // it: its bytes win, the fetch goes.
                        self.rdma_overtaken = true;
                        self.restart()?;
                    }
                    if line.starts_with("+RDMAFULLSYNC") {
                        if rdma_running {
                            return Err("MASTER offered the dump over RDMA twice".into());
                        }
                        let offer = crate::rdma::control::Offer::parse(&line).ok_or_else(|| {
                            format!("Bad +RDMAFULLSYNC line from MASTER: '{line}'")
                        })?;
                        self.rdma_rkey = offer.region.rkey;
                        self.rdma_offer = Some(offer);
                        info!("MASTER <-> REPLICA sync: the master offers the dump over RDMA");
                        continue;
                    }
                    if line == "+RDMAREADY" {
                        // After a failure of ours it is stale: ignored.
                        self.rdma_ready = self.rdma.is_some();
                        continue;
                    }
                    if line == "+RDMAOK" {
                        let Some(len) = self.rdma_verified.take() else {
                            return Err("Unexpected +RDMAOK from MASTER".into());
                        };
                        // The command stream follows.
                        self.complete(len);
                        self.leftover.extend_from_slice(bytes);
                        return Ok(());
                    }
                    if let Some(mark) = line.strip_prefix("$EOF:") {
                        if mark.len() != EOF_MARK_LEN {
                            return Err(format!("Bad EOF mark from MASTER: '{line}'"));
                        }
                        self.mark = Some(mark.as_bytes().to_vec());
                        self.payload_begun = true;
                        info!("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk");
                    } else if let Some(n) = line.strip_prefix('$').and_then(|n| n.parse().ok()) {
                        self.size = Some(n);
                        self.payload_begun = true;
                        info!("MASTER <-> REPLICA sync: receiving {n} bytes from master to disk");
                    } else if line.starts_with('-') {
                        return Err(format!("MASTER aborted replication with an error: {line}"));
                    } else {
                        return Err(format!(
                            "Bad protocol from MASTER, the first byte is not '$' (we received '{line}'), are you sure the host and port are right?"
                        ));
                    }
                    break;
                }
                self.header.push(b);
                if self.header.len() > 1024 {
                    return Err("Bad protocol from MASTER: the payload header is too long".into());
                }
            }
            if self.size.is_none() && self.mark.is_none() {
                return Ok(());
            }
        }
        let take = match self.size {
            Some(size) => ((size - self.received) as usize).min(bytes.len()),
            None => bytes.len(),
        };
        self.file.write_all(&bytes[..take]).map_err(|e| {
            format!("Write error or short write writing to the DB dumped on disk: {e}")
        })?;
        self.received += take as u64;
        if let Some(size) = self.size {
            if self.received == size {
                self.done = true;
                self.leftover.extend_from_slice(&bytes[take..]);
            }
        } else if let Some(mark) = &self.mark {
            // Only the last bytes can hold the mark.
            let chunk = &bytes[..take];
            self.tail
                .extend_from_slice(&chunk[chunk.len().saturating_sub(EOF_MARK_LEN)..]);
            if self.tail.len() > EOF_MARK_LEN {
                self.tail.drain(..self.tail.len() - EOF_MARK_LEN);
            }
            if self.tail == *mark {
                self.done = true;
            }
        }
        Ok(())
    }

    /// Flush the file to disk, without the end mark if there was one.
    pub fn finish(&mut self) -> Result<(), String> {
        if self.mark.is_some() {
            self.received -= EOF_MARK_LEN as u64;
            self.file
                .set_len(self.received)
                .map_err(|e| format!("Truncating the received dump: {e}"))?;
        }
        self.file
            .sync_all()
            .map_err(|e| format!("Syncing the received dump to disk: {e}"))?;
        self.finished = true;
        Ok(())
    }
}

/// A complete dump from the master: it becomes the dump file and starts
/// loading in place of the dataset, in slices of the loop (clients get
/// `-LOADING`); `finish_synced_load` follows.
pub fn begin_synced_load(srv: &mut Server, tmp_path: &std::path::Path) -> Result<(), String> {
    let path = srv.config.dir.join(&srv.config.dbfilename);
    // The old dump (as big as the dataset) is freed on a thread, as Redis's
    // bio close job: freeing it here would hold the loop for as long as
    // truncating it takes.
    crate::util::rename_replacing_in_background(tmp_path, &path, "rdb-unlink").map_err(|e| {
        let _ = std::fs::remove_file(tmp_path);
        format!(
            "Failed trying to rename the temp DB into {}: {e}",
            path.display()
        )
    })?;
    prepare_synced_load(srv);
    srv.master.state = LinkState::Loading;
    if let Err(e) = super::snapshot::begin_rdb_load(srv, path) {
        // The failure is reported by the caller, from `e`.
        let _ = finish_synced_load(srv, Err(e.clone()));
        return Err(e);
    }
    Ok(())
}

/// Should the dump that begins to arrive be loaded as it arrives? Yes when
/// that costs the old dataset nothing: it is empty, or it goes on serving
/// while the new one is built aside (`repl-diskless-load swapdb`). The dump
/// is written to its temporary file all the same, and loaded from there.
pub fn streams_sync_load(srv: &Server) -> bool {
    srv.config.repl_diskless_load == "swapdb" || srv.dbs.iter().all(|db| db.main.is_empty())
}

/// The dump from the master begins to arrive: load it from its temporary
/// file as it grows (`streamed_load_progress` says how far), in place of
/// the dataset or aside; `finish_synced_load` follows once it is complete
/// and loaded, and renames it over the dump file.
pub fn begin_streamed_load(srv: &mut Server, tmp_path: &std::path::Path) -> Result<(), String> {
    prepare_synced_load(srv);
    srv.master.streamed_dump = Some(tmp_path.to_path_buf());
    if let Err(e) = super::snapshot::begin_growing_rdb_load(srv, tmp_path.to_path_buf()) {
        let _ = finish_synced_load(srv, Err(e.clone()));
        return Err(e);
    }
    Ok(())
}

/// More of a streamed dump arrived, or all of it: the load may go on.
pub fn streamed_load_progress(srv: &mut Server) {
    let Some(t) = srv.master.transfer.as_ref().filter(|t| t.streamed) else {
        return;
    };
    let (available, complete) = t.loadable();
    let size = t.size;
    if let Some(load) = srv.loading.as_mut() {
        load.grown(available, complete, size);
    }
}

/// Before a full sync's dump is loaded, as Redis's
/// replicationAttachToNewMaster and readSyncBulkPayload: our replicas and
/// our old history go (whatever happens to the load), no snapshot child of
/// the old dataset may publish it over the new dump, the AOF stops (and
/// starts again after, so that its first base is the new dataset, never the
/// old history followed by the new stream), and the old dataset is flushed
/// or set aside.
fn prepare_synced_load(srv: &mut Server) {
    srv.disconnect_replicas();
    srv.repl.backlog = None;
    srv.stop_replication_child();
    srv.master.stream_db = 0;
    srv.master.aof_to_restart = srv.aof.status != super::aof::AofStatus::Off;
    if srv.master.aof_to_restart {
        srv.stop_aof();
    }
    if srv.config.repl_diskless_load == "swapdb" {
        // The dump and its function libraries load aside; the old ones
        // stay until the new are complete and valid. They go on serving
        // reads only when they are an earlier point of the same history
        // (Redis's async loading); else clients get -LOADING meanwhile.
        let serving = srv
            .master
            .full_sync_from
            .as_ref()
            .is_some_and(|(id, _)| *id == srv.replid);
        let seed = crate::util::random_u64();
        srv.loading_aside = Some(super::LoadAside {
            dbs: (0..srv.dbs.len())
                .map(|i| crate::db::Db::new(i, seed))
                .collect(),
            functions: crate::scripting::functions::Functions::new(),
            serving,
        });
        if serving {
            info!("MASTER <-> REPLICA sync: Loading DB in memory, the old one serving meanwhile");
        } else {
            info!("MASTER <-> REPLICA sync: Loading DB in memory aside from the old one");
        }
    } else {
        // The master's function libraries come with its dump.
        srv.functions.flush();
        info!("MASTER <-> REPLICA sync: Flushing old data");
        let mode = crate::db::FreeMode::lazy_if(srv.config.replica_lazy_flush);
        for db in &mut srv.dbs {
            db.clear_with(mode);
        }
        srv.tracking_invalidate_all();
        srv.replica_keys_with_expire.clear();
        info!("MASTER <-> REPLICA sync: Loading DB in memory");
    }
}

/// The synchronised dump is loaded (or failed to): this server's history
/// is now the master's (id, offset, a fresh backlog), its own replicas,
/// whose history it was, resync, and the AOF starts again.
pub fn finish_synced_load(srv: &mut Server, result: Result<(), String>) -> Result<(), String> {
    let restart = std::mem::take(&mut srv.master.aof_to_restart);
    let aside = srv.loading_aside.take();
    // A dump received into the dump file (not one still being streamed,
    // whose failure leaves the old file there).
    let received_into_dump_file = srv.master.streamed_dump.is_none() || result.is_ok();
    // A dump loaded as it arrived becomes the dump file now it is whole
    // (where it cannot, the dataset is still good: the old dump stays, as
    // after Redis's diskless load).
    if let Some(tmp) = srv.master.streamed_dump.take() {
        let path = srv.config.dir.join(&srv.config.dbfilename);
        let renamed = result.is_ok() && {
            let r = crate::util::rename_replacing_in_background(&tmp, &path, "rdb-unlink");
            if let Err(e) = &r {
                warn!(
                    "Failed trying to rename the temp DB into {}: {e}",
                    path.display()
                );
            }
            r.is_ok()
        };
        if !renamed {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    // Without persistence, the dump from the master is not kept
    // (`rdb-del-sync-files`, Redis's readSyncBulkPayload cleanup).
    if received_into_dump_file && srv.config.rdb_del_sync_files && srv.persistence_disabled() {
        info!(
            "Removing the RDB file obtained from the master. This replica has persistence disabled"
        );
        let _ = std::fs::remove_file(srv.config.dir.join(&srv.config.dbfilename));
    }
    if let Err(e) = result {
        match aside {
            // The old dataset stays; what was built aside goes.
            Some(mut new) => {
                for db in &mut new.dbs {
                    db.clear_with(crate::db::FreeMode::Lazy);
                }
                info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
            }
            None => {
                for db in &mut srv.dbs {
                    db.clear();
                }
            }
        }
        // No history to continue from: the next attempt is a full sync.
        srv.repl.backlog = None;
        if restart {
            restart_aof(srv);
        }
        return Err(format!(
            "Failed trying to load the MASTER synchronization DB from disk, check server logs: {e}"
        ));
    }
    let (id, offset) = srv
        .master
        .full_sync_from
        .take()
        .unwrap_or_else(|| (srv.replid.clone(), 0));
    if let Some(new) = aside {
        // The new dataset takes the old one's place at once; the old one is
        // freed in the background. Watchers and caches see a flush.
        for db in 0..srv.dbs.len() {
            srv.touch_all_watched_keys_in_db(None, db, None);
        }
        srv.tracking_invalidate_all();
        srv.replica_keys_with_expire.clear();
        let mut old = std::mem::replace(&mut srv.dbs, new.dbs);
        for db in &mut old {
            db.clear_with(crate::db::FreeMode::Lazy);
        }
        srv.functions = new.functions;
        info!("MASTER <-> REPLICA sync: Swapped in the new dataset");
    }
    srv.replid = id;
    srv.repl.offset = offset;
    srv.repl.replid2 = "0".repeat(40);
    srv.repl.second_offset = -1;
    srv.reset_backlog();
    srv.disconnect_replicas();
    srv.dirty = 0;
    if restart {
        restart_aof(srv);
    }
    crate::process::notify_systemd(
        "STATUS=MASTER <-> REPLICA sync: Finished with success. Ready to accept connections in read-write mode.\n",
    );
    Ok(())
}

/// The AOF again after a synchronization: a rewrite makes its base from the
/// dataset as it now is (Redis's restartAOFAfterSYNC).
fn restart_aof(srv: &mut Server) {
    info!("Restarting the AOF after a full synchronization with the master");
    if let Err(e) = srv.start_aof() {
        warn!("Failed restarting the AOF after a full synchronization: {e}");
    }
}

impl Server {
    /// Are we a replica whose master client is running the current command?
    pub fn master_is_running(&self) -> bool {
        self.master
            .client_id
            .is_some_and(|id| id == self.current_client)
    }

    /// Commands from the master were applied (a transaction counts whole,
    /// at its EXEC): their bytes count in the offset and go, unchanged, to
    /// the backlog and our own replicas.
    pub fn master_stream_applied(&mut self, raw: &[u8]) {
        if self.repl.backlog.is_some() {
            self.append_to_replication(raw);
        } else {
            self.repl.offset += raw.len() as i64;
        }
    }

    /// `REPLCONF ACK <offset>` for the master, queued on its client.
    pub fn ack_bytes(&self) -> Vec<u8> {
        let off = self.repl.offset.to_string();
        let mut out = Vec::new();
        crate::state::feed::encode_command(&[b"REPLCONF", b"ACK", off.as_bytes()], &mut out);
        out
    }

    /// Once a second on a replica: acknowledge the offset, and drop a
    /// master that has been silent past `repl-timeout`.
    pub fn replica_cron(&mut self) {
        let Some(id) = self.master.client_id else {
            return;
        };
        let Some(slot) = self.client_index(id) else {
            return;
        };
        let ack = self.ack_bytes();
        let timeout = std::time::Duration::from_secs(self.config.repl_timeout.max(1) as u64);
        let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_deref_mut()) else {
            return;
        };
        if c.last_interaction.elapsed() > timeout {
            warn!("MASTER timeout: no data nor PING received...");
            c.close_asap = true;
            self.to_close.push((slot, id));
            return;
        }
        c.reply.raw(&ack);
        c.queue_write(&mut self.pending_writes);
    }

    /// REPLICAOF host port: follow a new master.
    pub fn replicate_from(&mut self, host: String, port: u16) {
        let was_master = self.master.target.is_none();
        if was_master {
            info!("Before turning into a replica, using my own master parameters to synthesize a cached master: I may be able to synchronize with the new master with just a partial transfer.");
            // This turn's writes reach the backlog and the replicas while
            // the feed still goes there.
            self.flush_feed();
        }
        self.config.replicaof = Some((host.clone(), port));
        // A replica's OOM score (Redis's replicationSetMaster).
        let _ = crate::process::set_oom_score_adj(&self.config, crate::config::OomClass::Replica);
        self.close_master_client();
        self.master.target = Some((host, port));
        if was_master {
            // A backlog stays, for a partial resync, but from now on it
            // holds the master's stream as received, no longer this
            // server's own feed (else a partial resync would count every
            // command twice in it and in the offset). None is made: a
            // replica gets one with its first synchronisation.
            self.feed_backlog_by_role();
        }
        self.master.changed = true;
        self.master.state = LinkState::Connect;
        self.master.retry_at = Instant::now();
        self.master.down_since = Some(Instant::now());
    }

    /// REPLICAOF NO ONE: become a master, keeping the history (the old id
    /// as second id, so our replicas can continue).
    pub fn promote_to_master(&mut self) {
        if self.master.target.take().is_none() {
            return;
        }
        // CONFIG REWRITE writes what the server is now.
        self.config.replicaof = None;
        let _ = crate::process::set_oom_score_adj(&self.config, crate::config::OomClass::Master);
        self.master.changed = true;
        self.close_master_client();
        self.repl.replid2 = std::mem::replace(&mut self.replid, crate::util::random_hex(40));
        self.repl.second_offset = self.repl.offset + 1;
        // A backlog (there is one once synchronised) takes our own writes
        // from now on; without one, the first replica brings one (as Redis
        // 7.0: a replica that never synchronised has no history to keep).
        self.feed_backlog_by_role();
        // As Redis's replicationUnsetMaster: the stream starts with a
        // SELECT, the backlog's time-to-live counts from now, and our
        // replicas reconnect to learn the new id (they continue with PSYNC).
        self.repl.cursor = super::feed::FeedCursor::default();
        self.repl.no_replicas_since = Some(Instant::now());
        self.disconnect_replicas();
        info!("MASTER MODE enabled (user request)");
    }

    /// The master client stops at once (it is closed on the loop's next
    /// turn): nothing more from it may run or be counted.
    fn close_master_client(&mut self) {
        if let Some(id) = self.master.client_id {
            self.close_client_asap(id);
        }
    }

    /// A dump loaded at startup said where in a replication history it was
    /// taken (Redis's loadDataFromDisk): a replica takes it as its own, to
    /// continue with PSYNC; a master keeps it as its second id, so that its
    /// former replicas can continue.
    pub fn restore_replication_history(&mut self, repl: rdb::ReplInfo) {
        // The fields come from a file (or a master's payload): a history
        // that cannot be real is not taken.
        if !crate::util::is_replication_id(&repl.id) || !(0..i64::MAX).contains(&repl.offset) {
            warn!("Ignoring the dump's replication history: id or offset out of range");
            return;
        }
        if self.master.target.is_some() {
            self.replid = repl.id;
            self.repl.offset = repl.offset;
            // A database this server does not have streams into database 0.
            self.master.stream_db = usize::try_from(repl.stream_db)
                .ok()
                .filter(|&db| db < self.dbs.len())
                .unwrap_or(0);
        } else {
            self.repl.replid2 = repl.id;
            self.repl.second_offset = repl.offset + 1;
            self.repl.offset = repl.offset;
        }
        self.reset_backlog();
        self.repl.no_replicas_since = Some(Instant::now());
        info!(
            "Replication history restored from the dump: offset {}",
            self.repl.offset
        );
    }

    /// A backlog exists, and (on a master) the feed feeds it.
    pub fn ensure_backlog(&mut self) {
        if self.repl.backlog.is_none() {
            self.repl.backlog = Some(super::replication::Backlog::new(self.repl.offset));
        }
        self.feed_backlog_by_role();
    }

    /// The feed feeds the backlog on a master that has one, and never on
    /// a replica (its backlog holds its master's stream as received).
    fn feed_backlog_by_role(&mut self) {
        let want_feed = self.master.target.is_none() && self.repl.backlog.is_some();
        if want_feed != self.repl.feeds_backlog {
            if want_feed {
                self.feed.attach();
            } else {
                self.feed.detach();
            }
            self.repl.feeds_backlog = want_feed;
        }
    }

    /// A fresh, empty backlog (a new history starts).
    pub fn reset_backlog(&mut self) {
        self.repl.backlog = None;
        self.repl.stream_holds.clear();
        self.ensure_backlog();
    }

    /// Close every replica (our history changed under them).
    pub fn disconnect_replicas(&mut self) {
        for id in self.repl.replicas.clone() {
            self.close_client_asap(id);
        }
    }
}

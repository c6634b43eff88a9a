//! Serving other clients while a script runs too long (Redis's
//! processEventsWhileBlocked during a busy script).
//!
//! A script past `busy-reply-threshold` calls back, every 100,000 Lua
//! instructions, into the [`Pump`] the loop set for the command that runs
//! it. The pump accepts new connections and reads what every other client
//! sent — straight from the sockets, without polling, so no readiness
//! event the loop is owed is consumed (with edge-triggered polling a read
//! that finds data early only makes a later wake-up find none); under the
//! io_uring engine it takes their input from the completion queue instead,
//! leaving the completions it cannot place (the caller's) in order for the
//! loop. Each
//! command gets `-BUSY`, unless it may run meanwhile (`allow-busy`: SCRIPT
//! KILL, FUNCTION KILL, FUNCTION STATS, SHUTDOWN, AUTH, HELLO, MULTI, …).
//! Then, as Redis's beforeSleep does while blocked, the writes of commands
//! that finished before the script go to the AOF and the replicas, and the
//! replies waiting to be written are written (those the AOF lets out): a
//! reply produced earlier in the turn must not wait for the script. The
//! caller of the script was taken out of the slots, so it is never read;
//! blocked, paused and closing clients are not served either.

use std::io;

use mio::Poll;

use super::client::Link;
use super::uring::{Op, UringNet};
use super::{
    absorb_received, accept_from, close_slot, write_reply, Listener, Received, MAX_READS_PER_TURN,
    OUTPUT_BYTES_PER_TURN,
};
use crate::commands;
use crate::protocol::ParseLimits;
use crate::state::{BusyPump, Server};

/// The loop's sockets, for the command running now (raw pointers to the
/// event loop's fields other than the server state, which the command
/// holds).
pub(super) struct Pump {
    pub links: *mut Vec<Option<Box<Link>>>,
    pub listeners: *const Vec<Listener>,
    pub poll: *const Poll,
    pub uring: *mut Option<UringNet>,
    /// The loop's clients to read (run) next turn.
    pub pending_reads: *mut Vec<usize>,
}

impl BusyPump for Pump {
    fn serve(&mut self, srv: &mut Server) {
        // SAFETY: the loop made these from its own fields just before it
        // ran the command that is calling back, and clears the pump when
        // that command returns; nothing else touches those fields meanwhile.
        let (links, listeners, poll, uring, pending_reads) = unsafe {
            (
                &mut *self.links,
                &*self.listeners,
                &*self.poll,
                &mut *self.uring,
                &mut *self.pending_reads,
            )
        };
        for listener in listeners {
            accept_from(listener, poll, uring.as_mut(), links, srv);
        }
        if let Some(u) = uring.as_mut() {
            take_received(srv, links, u);
        }
        for idx in 0..links.len() {
            let Some(link) = links[idx].as_mut() else {
                continue;
            };
            if !servable(srv, idx) {
                continue;
            }
            let open = match link.ring_receives() {
                true => !link.peer_closed,
                false => read_available(srv, link),
            };
            // (A big argument may have just been completed: the parser is
            // run whatever `unparsed` says.)
            if link.query.has_input() {
                serve_commands(srv, idx, link);
            }
            // A client (a replica) that went away is let go now: a script
            // waiting for it to leave (INFO's connected_slaves) sees it go.
            if !open {
                close_slot(srv, links, poll, uring.as_mut(), idx);
            }
        }
        // Input taken in here makes no event for the loop: what is left of
        // it (commands past a turn's output, a protocol error to answer,
        // the input of a blocked client, an end of stream) is the loop's
        // to run or close after the script, like any other read.
        for (idx, link) in links.iter().enumerate() {
            let Some(link) = link else {
                continue;
            };
            if (link.query.has_input() || link.peer_closed) && !pending_reads.contains(&idx) {
                pending_reads.push(idx);
            }
        }
        srv.flush_feed();
        write_pending(srv, links);
    }
}

/// May this client's input be read and run now? Not while it waits for a
/// blocking command or is being closed, and not our master's stream, which
/// is applied once the script is over (refused now, a write would be lost).
fn servable(srv: &Server, idx: usize) -> bool {
    let Some(st) = srv.clients.get(idx).and_then(|c| c.as_ref()) else {
        return false;
    };
    st.blocked.is_none()
        && !st.close_after_reply
        && !st.close_asap
        && st.kind != crate::state::ClientKind::Master
}

/// io_uring: what clients sent meanwhile goes into their query buffers;
/// completions that are the loop's to handle (the script's caller's input,
/// polls) are kept for it, in order. A client whose receive failed is
/// treated as gone.
fn take_received(srv: &mut Server, links: &mut [Option<Box<Link>>], u: &mut UringNet) {
    u.poll_now();
    let queue = std::mem::take(&mut u.queue);
    let mut keep = std::collections::VecDeque::with_capacity(queue.len());
    for mut c in queue {
        if c.op() != Some(Op::Recv) {
            keep.push_back(c);
            continue;
        }
        let slot = c.slot();
        let live = match srv.clients.get(slot).and_then(|s| s.as_ref()) {
            Some(st) if !c.is_for(st.id) => {
                u.discard(&c);
                continue;
            }
            Some(_) => true,
            None => false,
        };
        // The script's caller is out of its slots, as is a client closed
        // meanwhile (the loop tells them apart afterwards); a client past
        // its query buffer limit takes no more while the script runs (the
        // loop closes it after, as with epoll). Their input waits, out of
        // the ring's buffers (see `UringNet::park`).
        let limit = srv.config.client_query_buffer_limit;
        let link = links
            .get_mut(slot)
            .and_then(|l| l.as_mut())
            .filter(|l| live && l.query.len() as u64 <= limit);
        match link {
            Some(link) => {
                if let Received::Failed(_) = absorb_received(link, u, &c, &mut srv.stats) {
                    link.peer_closed = true;
                }
            }
            None => {
                u.park(&mut c);
                keep.push_back(c);
            }
        }
    }
    // What arrived meanwhile (absorbing re-arms receives) goes after.
    keep.append(&mut u.queue);
    u.queue = keep;
}

/// Read what the socket has, bounded per call and by the query buffer
/// limit (a client past it is closed by the loop later). False when the
/// peer has closed the connection or it failed.
fn read_available(srv: &mut Server, link: &mut Link) -> bool {
    for _ in 0..MAX_READS_PER_TURN {
        if link.query.len() as u64 > srv.config.client_query_buffer_limit {
            return true;
        }
        match link.query.read_with(|buf| link.conn.read_uninit(buf)) {
            Ok((0, _)) => {
                link.peer_closed = true;
                return false;
            }
            Ok((n, want)) => {
                srv.stats.total_reads_processed += 1;
                srv.stats.total_net_input_bytes += n as u64;
                if n < want {
                    return true;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
    true
}

/// Answer every complete command of client `idx` while the script runs.
fn serve_commands(srv: &mut Server, idx: usize, link: &mut Link) {
    let Some(mut st) = srv.clients.get_mut(idx).and_then(|c| c.take()) else {
        return;
    };
    // A turn's worth of output per call, as in the loop (see run_buffered).
    let output_limit = st.output_held() + OUTPUT_BYTES_PER_TURN;
    loop {
        let limits = ParseLimits {
            max_bulk_len: srv.config.proto_max_bulk_len,
            authenticated: st.authenticated || !srv.acl.auth_required(),
        };
        match link.query.parse(limits) {
            Ok(true) => {}
            // A protocol error is for the loop to answer (and close) later.
            Ok(false) | Err(_) => break,
        }
        let mut args = Vec::new();
        link.query.argv(&mut args);
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        link.query.consume();
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let allowed = commands::lookup_command(refs[0])
            .and_then(|base| base.resolve(&refs).ok())
            // An unknown command or subcommand gets its usual error.
            .is_none_or(|cmd| cmd.flags & commands::ALLOW_BUSY != 0);
        // What is not allowed while busy gets BUSY from the usual checks
        // (`serving_busy`), so that a transaction it was queued for fails.
        // A replica's other commands are dropped: nothing but the stream
        // goes back to it.
        if allowed || st.repl.is_none() {
            srv.serving_busy = true;
            commands::execute(srv, &mut st, &refs);
            srv.serving_busy = false;
        }
        if st.close_after_reply
            || st.close_asap
            || (st.repl.is_none() && st.output_held() >= output_limit)
        {
            break;
        }
    }
    link.query.compact();
    if st.pending_output() > 0 {
        st.queue_write(&mut srv.pending_writes);
    }
    srv.clients[idx] = Some(st);
}

/// Write the replies waiting to be written, as far as the AOF lets them
/// out. What the socket does not take now, replicas' streams and anything
/// that fails stay queued for the loop, which writes (or closes) after the
/// script.
fn write_pending(srv: &mut Server, links: &mut [Option<Box<Link>>]) {
    let appended = srv.aof.appended;
    let durable = srv.aof_durable();
    let mut keep = Vec::new();
    for (idx, id) in std::mem::take(&mut srv.pending_writes) {
        let link = links.get_mut(idx).and_then(|l| l.as_mut());
        let Some(st) = srv.clients.get_mut(idx).and_then(|c| c.as_mut()) else {
            // The caller of the script: written when it returns.
            keep.push((idx, id));
            continue;
        };
        // A send in flight owns the reply buffer until the loop handles its
        // completion.
        let Some(link) = link.filter(|l| st.id == id && st.repl.is_none() && !l.send_inflight)
        else {
            keep.push((idx, id));
            continue;
        };
        st.hold_until(appended, durable);
        let limit = st.write_limit(durable);
        let written = write_reply(&mut link.conn, st, limit, &mut srv.stats).is_ok();
        // TLS records the socket did not take are the loop's to send (it
        // waits for the writable event).
        if written && st.sent == st.reply.len() && !link.conn.pending() {
            st.reply.clear();
            st.sent = 0;
            st.pending_write = false;
        } else {
            keep.push((idx, id));
        }
    }
    // Anything queued meanwhile goes after.
    keep.append(&mut srv.pending_writes);
    srv.pending_writes = keep;
}

//! Client-side caching: CLIENT TRACKING's invalidation messages (Redis's
//! tracking.c).
//!
//! In the default mode the server remembers, for every key a tracking
//! client read, which clients may hold it (`table`: key → client ids; key
//! names only, as Redis, whatever the database). When the key changes, each
//! of them gets one `invalidate` message and the key is forgotten until
//! someone reads it again. In BCAST mode nothing is remembered per client:
//! every change to a key under a prefix a client subscribed to is collected
//! during the loop turn and sent before the loop sleeps, one message per
//! prefix with all its keys. A flush invalidates everything with a null.
//!
//! Messages are RESP3 pushes (`>2 invalidate [keys]`), or, for a RESP2
//! client, pub/sub messages on `__redis__:invalidate` delivered to the
//! client it redirects to. The client running the current command is out
//! of the slab: its own invalidations wait in `pending` and go out after
//! its reply, as Redis's trackingHandlePendingKeyInvalidations sends them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use foldhash::fast::RandomState;

use super::{ClientState, Server};

/// The pub/sub channel RESP2 clients receive invalidations on.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// A client's CLIENT TRACKING settings.
#[derive(Debug, Clone, Default)]
pub struct ClientTracking {
    /// Client id messages go to; 0 for this client itself.
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING was given for the next command.
    pub caching: bool,
    /// The redirect target went away.
    pub broken_redirect: bool,
    /// BCAST prefixes (empty string: every key).
    pub prefixes: BTreeSet<Vec<u8>>,
}

impl ClientTracking {
    /// Does a read by this client make it a holder of the keys read (the
    /// default mode: not BCAST, and OPTIN/OPTOUT with CLIENT CACHING
    /// allowing it)?
    pub fn remembers_reads(&self) -> bool {
        // OPTIN wants CACHING yes, OPTOUT wants it not given.
        !self.bcast && (!self.optin || self.caching) && (!self.optout || !self.caching)
    }
}

/// Keys changed under one BCAST prefix this loop turn, and its clients.
#[derive(Debug, Default)]
struct Bcast {
    /// Key → id of the client that changed it last (0: none), for NOLOOP.
    keys: BTreeMap<Vec<u8>, u64>,
    clients: BTreeSet<u64>,
}

/// The server's side of client tracking.
#[derive(Debug, Default)]
pub struct Tracking {
    /// Key → clients that may have it cached.
    table: HashMap<Vec<u8>, BTreeSet<u64>, RandomState>,
    /// Client ids across the whole table (INFO tracking_total_items).
    total_items: u64,
    prefixes: BTreeMap<Vec<u8>, Bcast>,
    /// Clients with tracking on (INFO tracking_clients).
    pub clients: usize,
    /// Invalidations for the client running the current command: a key, or
    /// `None` for a flush.
    pub pending: Vec<Option<Vec<u8>>>,
}

impl Tracking {
    pub fn total_keys(&self) -> usize {
        self.table.len()
    }

    pub fn total_items(&self) -> u64 {
        self.total_items
    }

    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }
}

/// The payload of an invalidation: one key, or already encoded RESP (a
/// BCAST key array, a flush's null).
enum Payload<'a> {
    Key(&'a [u8]),
    Proto(&'a [u8]),
}

impl Server {
    /// CLIENT TRACKING ON with checked options (`wanted`: redirect and
    /// mode flags) and BCAST prefixes (Redis's enableTracking).
    pub fn enable_tracking(
        &mut self,
        client: &mut ClientState,
        wanted: ClientTracking,
        prefixes: &[&[u8]],
    ) {
        let t = match client.tracking.as_mut() {
            Some(t) => t,
            None => {
                self.tracking.clients += 1;
                client.tracking.insert(ClientTracking::default())
            }
        };
        let bcast = wanted.bcast;
        t.redirect = wanted.redirect;
        t.broken_redirect = false;
        t.bcast = bcast;
        t.optin = wanted.optin;
        t.optout = wanted.optout;
        t.noloop = wanted.noloop;
        if bcast {
            let mut add = |prefix: &[u8]| {
                let state = self.tracking.prefixes.entry(prefix.to_vec()).or_default();
                if state.clients.insert(client.id) {
                    t.prefixes.insert(prefix.to_vec());
                }
            };
            if prefixes.is_empty() {
                add(b"");
            }
            for p in prefixes {
                add(p);
            }
        }
    }

    /// CLIENT TRACKING OFF, RESET, or the client going away.
    pub fn disable_tracking(&mut self, client: &mut ClientState) {
        let Some(t) = client.tracking.take() else {
            return;
        };
        for prefix in &t.prefixes {
            if let Some(state) = self.tracking.prefixes.get_mut(prefix) {
                state.clients.remove(&client.id);
                if state.clients.is_empty() {
                    self.tracking.prefixes.remove(prefix);
                }
            }
        }
        self.tracking.clients -= 1;
    }

    /// After a read-only command of a tracking client in the default mode:
    /// remember that it may now cache `keys` (Redis's trackingRememberKeys,
    /// with OPTIN/OPTOUT and CLIENT CACHING deciding).
    pub fn tracking_remember_keys<'k>(
        &mut self,
        client: &ClientState,
        keys: impl Iterator<Item = &'k [u8]>,
    ) {
        if !client
            .tracking
            .as_ref()
            .is_some_and(|t| t.remembers_reads())
        {
            return;
        }
        for key in keys {
            let added = match self.tracking.table.get_mut(key) {
                Some(ids) => ids.insert(client.id),
                None => {
                    self.tracking
                        .table
                        .insert(key.to_vec(), BTreeSet::from([client.id]));
                    true
                }
            };
            if added {
                self.tracking.total_items += 1;
            }
        }
    }

    /// A key changed (Redis's trackingInvalidateKey): tell every client that
    /// may cache it, and with `bcast` note it for the BCAST prefixes.
    pub fn tracking_invalidate_key(&mut self, key: &[u8], bcast: bool) {
        if self.tracking.clients == 0 && self.tracking.table.is_empty() {
            return;
        }
        let modifier = self.current_client;
        if bcast {
            for (prefix, state) in self.tracking.prefixes.iter_mut() {
                if key.starts_with(prefix) {
                    state.keys.insert(key.to_vec(), modifier);
                }
            }
        }
        let Some(ids) = self.tracking.table.remove(key) else {
            return;
        };
        self.tracking.total_items -= ids.len() as u64;
        for id in ids {
            if id == self.current_client {
                // Its own change: after its reply, unless NOLOOP (checked
                // when the pending list is flushed, with the client at hand).
                self.tracking.pending.push(Some(key.to_vec()));
                continue;
            }
            let Some(target) = self.client_by_id_mut(id) else {
                continue;
            };
            if target.tracking.as_ref().is_none_or(|t| t.bcast) {
                continue;
            }
            self.send_tracking_message(id, Payload::Key(key));
        }
    }

    /// A flush: every tracking client is told that all keys changed (a
    /// null), and the table is emptied (Redis's
    /// trackingInvalidateKeysOnFlush).
    pub fn tracking_invalidate_all(&mut self) {
        if self.tracking.clients > 0 {
            let ids: Vec<u64> = self
                .clients
                .iter()
                .flatten()
                .filter(|c| c.tracking.is_some())
                .map(|c| c.id)
                .collect();
            for id in ids {
                let null: &[u8] = match self.client_by_id_mut(id) {
                    Some(c) if c.reply.is_resp3() => b"_\r\n",
                    _ => b"$-1\r\n",
                };
                self.send_tracking_message(id, Payload::Proto(null));
            }
            if self.current_client != 0 {
                self.tracking.pending.push(None);
            }
        }
        self.tracking.table.clear();
        self.tracking.total_items = 0;
    }

    /// Send the running client's own invalidations, after its reply
    /// (Redis's trackingHandlePendingKeyInvalidations).
    #[inline]
    pub fn tracking_flush_pending(&mut self, client: &mut ClientState) {
        // After every command: the test alone stays on the command's path.
        if !self.tracking.pending.is_empty() {
            self.send_pending_invalidations(client);
        }
    }

    #[inline(never)]
    fn send_pending_invalidations(&mut self, client: &mut ClientState) {
        for item in std::mem::take(&mut self.tracking.pending) {
            let Some(t) = client.tracking.as_ref() else {
                continue;
            };
            match item {
                Some(key) if !t.bcast && !t.noloop => {
                    self.send_tracking_message_from(client, Payload::Key(&key))
                }
                Some(_) => {}
                None => {
                    let null: &[u8] = if client.reply.is_resp3() {
                        b"_\r\n"
                    } else {
                        b"$-1\r\n"
                    };
                    self.send_tracking_message_from(client, Payload::Proto(null));
                }
            }
        }
    }

    /// Before the loop sleeps: send each BCAST prefix's changed keys to its
    /// clients, leaving out a NOLOOP client's own changes (Redis's
    /// trackingBroadcastInvalidationMessages).
    pub fn tracking_broadcast(&mut self) {
        if self.tracking.clients == 0 || self.tracking.prefixes.is_empty() {
            return;
        }
        let mut messages: Vec<(u64, Vec<u8>)> = Vec::new();
        let clients = &self.clients;
        let slots = &self.client_slots;
        for state in self.tracking.prefixes.values_mut() {
            if state.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut state.keys);
            let all = key_array(keys.keys().map(|k| k.as_slice()));
            for &id in &state.clients {
                let noloop = slots
                    .get(&id)
                    .and_then(|&slot| clients.get(slot))
                    .and_then(|c| c.as_ref())
                    .and_then(|c| c.tracking.as_ref())
                    .is_some_and(|t| t.noloop);
                if noloop {
                    let own: Vec<&[u8]> = keys
                        .iter()
                        .filter(|(_, by)| **by != id)
                        .map(|(k, _)| k.as_slice())
                        .collect();
                    if !own.is_empty() {
                        messages.push((id, key_array(own.into_iter())));
                    }
                } else {
                    messages.push((id, all.clone()));
                }
            }
        }
        for (id, proto) in messages {
            self.send_tracking_message(id, Payload::Proto(&proto));
        }
    }

    /// Keep the table under `tracking-table-max-keys`: forget keys (telling
    /// their clients, as if they had changed), with more effort each time
    /// the table is still over (Redis's trackingLimitUsedSlots).
    pub fn tracking_limit_used_slots(&mut self) {
        let max = self.config.tracking_table_max_keys;
        if max == 0 || self.tracking.table.len() as u64 <= max {
            self.tracking_effort = 0;
            return;
        }
        let effort = 100 * (self.tracking_effort as usize + 1);
        let excess = (self.tracking.table.len() as u64 - max) as usize;
        // The victims in one pass over the table (picking them one at a
        // time would rescan the emptied front of the table for each).
        let victims: Vec<Vec<u8>> = self
            .tracking
            .table
            .keys()
            .take(effort.min(excess))
            .cloned()
            .collect();
        for key in victims {
            self.tracking_invalidate_key(&key, false);
        }
        if self.tracking.table.len() as u64 <= max {
            self.tracking_effort = 0;
        } else {
            self.tracking_effort += 1;
        }
    }

    /// Send an invalidation on behalf of tracking client `id` (in the
    /// slab).
    fn send_tracking_message(&mut self, id: u64, payload: Payload) {
        let Some(c) = self.client_by_id_mut(id) else {
            return;
        };
        let Some(redirect) = c.tracking.as_ref().map(|t| t.redirect) else {
            return;
        };
        let resp3 = c.reply.is_resp3();
        match self.route(redirect, resp3) {
            Route::Broken => {
                if let Some(t) = self.client_by_id_mut(id).and_then(|c| c.tracking.as_mut()) {
                    t.broken_redirect = true;
                }
                if resp3 {
                    self.deliver_to(id, &redir_broken(redirect));
                }
            }
            Route::To(to, header) => {
                let to = if to == 0 { id } else { to };
                self.deliver_to(to, &message(&header, &payload))
            }
            Route::Nowhere => {}
        }
    }

    /// The same for the running client (out of the slab).
    fn send_tracking_message_from(&mut self, client: &mut ClientState, payload: Payload) {
        let Some(redirect) = client.tracking.as_ref().map(|t| t.redirect) else {
            return;
        };
        let resp3 = client.reply.is_resp3();
        let route = if redirect == 0 {
            // To itself: `route` would look for it in the slab.
            if resp3 {
                Route::To(client.id, PUSH_HEADER.to_vec())
            } else {
                Route::Nowhere
            }
        } else {
            self.route(redirect, resp3)
        };
        match route {
            Route::Broken => {
                if let Some(t) = client.tracking.as_mut() {
                    t.broken_redirect = true;
                }
                if resp3 {
                    self.self_pushes.extend_from_slice(&redir_broken(redirect));
                }
            }
            Route::To(to, header) if to == client.id => self
                .self_pushes
                .extend_from_slice(&message(&header, &payload)),
            Route::To(to, header) => self.deliver_to(to, &message(&header, &payload)),
            Route::Nowhere => {}
        }
    }

    /// Where a tracking client's invalidation goes (Redis's
    /// sendTrackingMessage): to itself in RESP3, or to the client it
    /// redirects to (a push in RESP3, a pub/sub message on
    /// `__redis__:invalidate` to a RESP2 subscriber). `redirect` 0 means
    /// itself, and the caller knows who that is.
    fn route(&mut self, redirect: u64, own_resp3: bool) -> Route {
        if redirect == 0 {
            return if own_resp3 {
                Route::To(0, PUSH_HEADER.to_vec())
            } else {
                Route::Nowhere
            };
        }
        let target = if redirect == self.current_client {
            // The running client can only be here by running a write, so
            // it is not in RESP2 subscribed mode.
            Some((self.current_resp3, false))
        } else {
            self.client_by_id_mut(redirect)
                .map(|c| (c.reply.is_resp3(), c.subscriptions() > 0))
        };
        match target {
            None => Route::Broken,
            Some((true, _)) => Route::To(redirect, PUSH_HEADER.to_vec()),
            Some((false, true)) => {
                let mut h = b"*3\r\n$7\r\nmessage\r\n$20\r\n".to_vec();
                h.extend_from_slice(INVALIDATE_CHANNEL);
                h.extend_from_slice(b"\r\n");
                Route::To(redirect, h)
            }
            // RESP2 without pub/sub: nothing can carry the message.
            Some((false, false)) => Route::Nowhere,
        }
    }

    /// Append an encoded message to client `id`'s output: the running
    /// client's after its reply, any other's queued for writing and held
    /// to its output-buffer limit.
    fn deliver_to(&mut self, id: u64, msg: &[u8]) {
        if id == self.current_client {
            self.self_pushes.extend_from_slice(msg);
        } else if let Some(slot) = self.client_index(id) {
            self.push_output(slot, id, msg);
        }
    }
}

/// Where an invalidation goes: a client id (0: the tracking client itself)
/// and the message header for it.
enum Route {
    To(u64, Vec<u8>),
    Broken,
    Nowhere,
}

const PUSH_HEADER: &[u8] = b">2\r\n$10\r\ninvalidate\r\n";

/// A header followed by the invalidated keys (or the encoded payload).
fn message(header: &[u8], payload: &Payload) -> Vec<u8> {
    let mut msg = header.to_vec();
    match payload {
        Payload::Key(k) => msg.extend_from_slice(&key_array(std::iter::once(*k))),
        Payload::Proto(p) => msg.extend_from_slice(p),
    }
    msg
}

/// RESP3's notice that the redirect target is gone.
fn redir_broken(redirect: u64) -> Vec<u8> {
    format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{redirect}\r\n").into_bytes()
}

/// A RESP array of bulk strings.
fn key_array<'k>(keys: impl Iterator<Item = &'k [u8]>) -> Vec<u8> {
    let keys: Vec<&[u8]> = keys.collect();
    let mut out = Vec::new();
    super::feed::encode_command(&keys, &mut out);
    out
}

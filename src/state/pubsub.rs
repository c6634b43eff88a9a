//! Pub/Sub delivery and keyspace notifications (Redis's pubsub.c and
//! notify.c).
//!
//! The registry maps each channel (and each pattern, and each shard
//! channel) to its subscribers' client ids, in subscription order. A
//! message is encoded once per protocol (RESP2 array, RESP3 push) and the
//! bytes are appended to every subscriber's reply buffer; the subscriber is
//! queued for writing before the loop sleeps and checked against its
//! output-buffer class limit at once, so a subscriber that does not read
//! is disconnected instead of growing without bound.
//!
//! The client running the current command is not in the slab (the loop has
//! taken it out to serve it): messages for it go to `self_pushes` and the
//! dispatcher appends them after the command's reply.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;

use super::{ClientState, Server};
use crate::config::NotifyFlags;
use crate::util::glob_match;

/// A subscriber: client id and the slot it lives in (stable for the
/// client's lifetime; the id guards against a reused slot).
pub type Subscriber = (u64, usize);

/// Subscribers by channel name.
pub type ChannelMap = HashMap<Vec<u8>, Vec<Subscriber>, RandomState>;

/// Subscriptions of every client, by channel and pattern.
#[derive(Default, Debug)]
pub struct PubSub {
    pub channels: ChannelMap,
    /// Patterns in the order they were first subscribed.
    pub patterns: Vec<(Vec<u8>, Vec<Subscriber>)>,
    pub shard_channels: ChannelMap,
}

impl PubSub {
    /// Subscribe `who` to `channel` in `map`; false if it already was.
    pub fn add(map: &mut ChannelMap, channel: &[u8], who: Subscriber) -> bool {
        let subs = map.entry(channel.to_vec()).or_default();
        if subs.iter().any(|s| s.0 == who.0) {
            return false;
        }
        subs.push(who);
        true
    }

    /// Unsubscribe client `id` from `channel` in `map`; false if it was not.
    pub fn remove(map: &mut ChannelMap, channel: &[u8], id: u64) -> bool {
        let Some(subs) = map.get_mut(channel) else {
            return false;
        };
        let Some(pos) = subs.iter().position(|s| s.0 == id) else {
            return false;
        };
        subs.remove(pos);
        if subs.is_empty() {
            map.remove(channel);
        }
        true
    }

    pub fn add_pattern(&mut self, pattern: &[u8], who: Subscriber) -> bool {
        match self.patterns.iter_mut().find(|(p, _)| p == pattern) {
            Some((_, subs)) if subs.iter().any(|s| s.0 == who.0) => false,
            Some((_, subs)) => {
                subs.push(who);
                true
            }
            None => {
                self.patterns.push((pattern.to_vec(), vec![who]));
                true
            }
        }
    }

    pub fn remove_pattern(&mut self, pattern: &[u8], id: u64) -> bool {
        let Some(i) = self.patterns.iter().position(|(p, _)| p == pattern) else {
            return false;
        };
        let subs = &mut self.patterns[i].1;
        let Some(pos) = subs.iter().position(|s| s.0 == id) else {
            return false;
        };
        subs.remove(pos);
        if subs.is_empty() {
            self.patterns.remove(i);
        }
        true
    }

    /// Distinct patterns with at least one subscriber (PUBSUB NUMPAT).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }
}

/// A message at least this long is held by reference in each subscriber's
/// output (one copy for all of them) instead of copied into each.
const SHARE_FROM: usize = 16 * 1024;

/// One message encoded for both protocols, built on first use.
struct Encoded<'a> {
    parts: &'a [&'a [u8]],
    resp2: Option<Arc<Vec<u8>>>,
    resp3: Option<Arc<Vec<u8>>>,
}

impl<'a> Encoded<'a> {
    fn new(parts: &'a [&'a [u8]]) -> Encoded<'a> {
        Encoded {
            parts,
            resp2: None,
            resp3: None,
        }
    }

    fn bytes(&mut self, resp3: bool) -> &Arc<Vec<u8>> {
        let (slot, head) = if resp3 {
            (&mut self.resp3, b'>')
        } else {
            (&mut self.resp2, b'*')
        };
        slot.get_or_insert_with(|| {
            use crate::protocol::reply::{fmt_i64, itoa_buf};
            let mut num = itoa_buf();
            let mut out = Vec::with_capacity(self.parts.iter().map(|p| p.len() + 16).sum());
            out.push(head);
            out.extend_from_slice(fmt_i64(&mut num, self.parts.len() as i64));
            out.extend_from_slice(b"\r\n");
            for p in self.parts {
                out.push(b'$');
                out.extend_from_slice(fmt_i64(&mut num, p.len() as i64));
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(p);
                out.extend_from_slice(b"\r\n");
            }
            Arc::new(out)
        })
    }
}

impl Server {
    /// Append a push message to a subscriber's output (or, for the client
    /// running the current command, to `self_pushes`), queue it for
    /// writing and hold it to its output-buffer class limit.
    fn deliver(&mut self, (id, slot): Subscriber, msg: &mut Encoded) {
        let resp3 = match self.clients.get(slot) {
            Some(Some(c)) if c.id == id => c.reply.is_resp3(),
            Some(None) if id == self.current_client => {
                // The client being served: its reply buffer is not here.
                let bytes = msg.bytes(self.current_resp3);
                self.self_pushes.extend_from_slice(bytes);
                return;
            }
            _ => return,
        };
        let bytes = msg.bytes(resp3);
        if bytes.len() >= SHARE_FROM {
            self.push_output_with(slot, id, |r| r.raw_shared(bytes));
        } else {
            self.push_output_with(slot, id, |r| r.raw(bytes));
        }
    }

    /// Append bytes already encoded for client `id` at `slot` (a pub/sub
    /// message, a MONITOR line) to its output, queue it for writing and
    /// hold it to its class's output-buffer limit as each addition is made
    /// (Redis's closeClientOnOutputBufferLimitReached), so a receiver that
    /// does not read is cut off instead of growing without bound.
    pub fn push_output(&mut self, slot: usize, id: u64, bytes: &[u8]) {
        self.push_output_with(slot, id, |r| r.raw(bytes));
    }

    /// [`push_output`](Self::push_output) with the bytes added by `add`.
    fn push_output_with(
        &mut self,
        slot: usize,
        id: u64,
        add: impl FnOnce(&mut crate::protocol::Reply),
    ) {
        let Some(c) = open_client(&mut self.clients, slot, id) else {
            return;
        };
        add(&mut c.reply);
        c.queue_write(&mut self.pending_writes);
        self.enforce_output_limit(slot, id);
    }

    /// Output for client `id` (in the slab) grew: close it if that took it
    /// over its class's limit. Only a client near its limit pays for
    /// reading the clock.
    pub fn enforce_output_limit(&mut self, slot: usize, id: u64) {
        let Some(c) = open_client(&mut self.clients, slot, id) else {
            return;
        };
        let limit = c.output_limit(&self.config);
        let used = c.output_used();
        let near = |l: u64| l > 0 && used >= l;
        if !near(limit.hard) && !near(limit.soft) {
            c.obuf_soft_since = None;
            return;
        }
        if c.output_limit_reached(limit, std::time::Instant::now()) {
            let Some(mut c) = self.clients[slot].take() else {
                return;
            };
            self.close_for_output_limit(&mut c);
            self.to_close.push((slot, id));
            self.clients[slot] = Some(c);
        }
    }

    /// Deliver to every subscriber in `subs` (taken out of the registry
    /// meanwhile, so the registry needs no copy).
    fn deliver_all(&mut self, subs: &[Subscriber], msg: &mut Encoded) {
        for &who in subs {
            self.deliver(who, msg);
        }
    }

    /// PUBLISH: deliver `message` on `channel` to its subscribers and to
    /// every client with a matching pattern. Returns the number of
    /// deliveries (Redis's PUBLISH reply).
    pub fn publish(&mut self, channel: &[u8], message: &[u8]) -> usize {
        let mut receivers = 0;
        if let Some(subs) = self.pubsub.channels.get_mut(channel).map(std::mem::take) {
            let parts: [&[u8]; 3] = [b"message", channel, message];
            let mut msg = Encoded::new(&parts);
            self.deliver_all(&subs, &mut msg);
            receivers += subs.len();
            if let Some(slot) = self.pubsub.channels.get_mut(channel) {
                *slot = subs;
            }
        }
        for i in 0..self.pubsub.patterns.len() {
            if !glob_match(&self.pubsub.patterns[i].0, channel, false) {
                continue;
            }
            let pattern = std::mem::take(&mut self.pubsub.patterns[i].0);
            let subs = std::mem::take(&mut self.pubsub.patterns[i].1);
            {
                let parts: [&[u8]; 4] = [b"pmessage", &pattern, channel, message];
                let mut msg = Encoded::new(&parts);
                self.deliver_all(&subs, &mut msg);
            }
            receivers += subs.len();
            self.pubsub.patterns[i] = (pattern, subs);
        }
        receivers
    }

    /// SPUBLISH: deliver to the shard channel's subscribers.
    pub fn spublish(&mut self, channel: &[u8], message: &[u8]) -> usize {
        let Some(subs) = self
            .pubsub
            .shard_channels
            .get_mut(channel)
            .map(std::mem::take)
        else {
            return 0;
        };
        let parts: [&[u8]; 3] = [b"smessage", channel, message];
        let mut msg = Encoded::new(&parts);
        self.deliver_all(&subs, &mut msg);
        let n = subs.len();
        if let Some(slot) = self.pubsub.shard_channels.get_mut(channel) {
            *slot = subs;
        }
        n
    }

    /// Publish a keyspace event (Redis's notifyKeyspaceEvent): on
    /// `__keyspace@<db>__:<key>` with the event as message, then on
    /// `__keyevent@<db>__:<event>` with the key, as the configured classes
    /// allow.
    #[inline]
    pub fn notify_keyspace_event(&mut self, class: u32, event: &str, key: &[u8], db: usize) {
        if self.config.notify_keyspace_events.wants(class) {
            self.publish_keyspace_event(event, key, db);
        }
    }

    fn publish_keyspace_event(&mut self, event: &str, key: &[u8], db: usize) {
        let flags = self.config.notify_keyspace_events;
        if flags.0 & NotifyFlags::KEYSPACE != 0 {
            let mut chan = format!("__keyspace@{db}__:").into_bytes();
            chan.extend_from_slice(key);
            self.publish(&chan, event.as_bytes());
        }
        if flags.0 & NotifyFlags::KEYEVENT != 0 {
            let chan = format!("__keyevent@{db}__:{event}");
            self.publish(chan.as_bytes(), key);
        }
    }

    /// Queue a client whose output grew outside its own turn (a message,
    /// an unblocked reply, a released AOF hold) to be written before the
    /// loop sleeps; nothing when the slot now holds another client.
    pub fn queue_write_of(&mut self, slot: usize, id: u64) {
        // The slab and the queue are separate fields: borrowed apart.
        let c = self.clients.get_mut(slot).and_then(|c| c.as_deref_mut());
        if let Some(c) = c.filter(|c| c.id == id) {
            c.queue_write(&mut self.pending_writes);
        }
    }

    /// Client `id`, if slot `slot` still holds it (a slot is reused once
    /// its client is gone).
    pub fn client_at(&mut self, slot: usize, id: u64) -> Option<&mut ClientState> {
        self.clients
            .get_mut(slot)?
            .as_deref_mut()
            .filter(|c| c.id == id)
    }
}

/// Client `id` at `slot` of the slab, unless it is gone or closing (a free
/// function, so the slab is borrowed apart from the server's other fields).
fn open_client(
    clients: &mut [Option<Box<ClientState>>],
    slot: usize,
    id: u64,
) -> Option<&mut ClientState> {
    clients
        .get_mut(slot)?
        .as_deref_mut()
        .filter(|c| c.id == id && !c.close_asap)
}

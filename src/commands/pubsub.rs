//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB (Redis's
//! pubsub.c). Delivery itself lives in `state::pubsub`.
//!
//! Confirmations are push messages (`>3` in RESP3, a 3-element array in
//! RESP2) carrying the client's subscription count afterwards: channels plus
//! patterns for the classic kinds, shard channels alone for the shard kind.

use super::*;
use crate::state::pubsub::PubSub;

/// Which registry a (un)subscription goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn verbs(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }
}

/// The count a confirmation carries.
fn count(client: &ClientState, kind: Kind) -> usize {
    match kind {
        Kind::Shard => client.shard_channels.len(),
        _ => client.channels.len() + client.patterns.len(),
    }
}

/// One confirmation push: `[verb, channel or nil, count]`. It is a push
/// as Redis sends it, so CLIENT REPLY OFF/SKIP does not drop it: while
/// replies are dropped it goes out with the client's other pushes.
fn confirm(
    srv: &mut Server,
    client: &mut ClientState,
    verb: &str,
    channel: Option<&[u8]>,
    n: usize,
) {
    let dropped = client.reply_off || client.reply_skip;
    let mut aside = crate::protocol::Reply::new(client.reply.proto);
    let out = if dropped {
        &mut aside
    } else {
        &mut client.reply
    };
    out.push(3);
    out.bulk_str(verb);
    match channel {
        Some(ch) => out.bulk(ch),
        None => out.null(),
    }
    out.int(n as i64);
    if dropped {
        srv.self_pushes.extend_from_slice(&aside.take_bytes());
    }
}

fn subscribe_one(srv: &mut Server, client: &mut ClientState, kind: Kind, ch: &[u8]) {
    let id = client.id;
    let who = (id, client.slot);
    match kind {
        Kind::Channel => {
            if client.channels.insert(ch.to_vec()) {
                PubSub::add(&mut srv.pubsub.channels, ch, who);
            }
        }
        Kind::Shard => {
            if client.shard_channels.insert(ch.to_vec()) {
                PubSub::add(&mut srv.pubsub.shard_channels, ch, who);
            }
        }
        Kind::Pattern => {
            if !client.patterns.iter().any(|p| p == ch) {
                client.patterns.push(ch.to_vec());
                srv.pubsub.add_pattern(ch, who);
            }
        }
    }
    let n = count(client, kind);
    confirm(srv, client, kind.verbs().0, Some(ch), n);
}

/// Unsubscribe from one channel; `notify` sends the confirmation.
fn unsubscribe_one(
    srv: &mut Server,
    client: &mut ClientState,
    kind: Kind,
    ch: &[u8],
    notify: bool,
) {
    let id = client.id;
    match kind {
        Kind::Channel => {
            if client.channels.remove(ch) {
                PubSub::remove(&mut srv.pubsub.channels, ch, id);
            }
        }
        Kind::Shard => {
            if client.shard_channels.remove(ch) {
                PubSub::remove(&mut srv.pubsub.shard_channels, ch, id);
            }
        }
        Kind::Pattern => {
            if let Some(pos) = client.patterns.iter().position(|p| p == ch) {
                client.patterns.remove(pos);
                srv.pubsub.remove_pattern(ch, id);
            }
        }
    }
    if notify {
        let n = count(client, kind);
        confirm(srv, client, kind.verbs().1, Some(ch), n);
    }
}

/// Unsubscribe from everything of one kind (UNSUBSCRIBE with no channel).
/// With nothing to unsubscribe from, one confirmation with a nil channel.
fn unsubscribe_all(srv: &mut Server, client: &mut ClientState, kind: Kind, notify: bool) {
    let names: Vec<Vec<u8>> = match kind {
        Kind::Channel => client.channels.iter().cloned().collect(),
        Kind::Shard => client.shard_channels.iter().cloned().collect(),
        Kind::Pattern => client.patterns.clone(),
    };
    if names.is_empty() {
        if notify {
            let n = count(client, kind);
            confirm(srv, client, kind.verbs().1, None, n);
        }
        return;
    }
    for ch in names {
        unsubscribe_one(srv, client, kind, &ch, notify);
    }
}

/// Drop every subscription silently (disconnect, RESET).
pub fn unsubscribe_everything(srv: &mut Server, client: &mut ClientState) {
    for kind in [Kind::Channel, Kind::Shard, Kind::Pattern] {
        unsubscribe_all(srv, client, kind, false);
    }
}

fn subscribe_generic(c: &mut Ctx, argv: &[&[u8]], kind: Kind) {
    // A client that expects one reply per command (a transaction's, a
    // script's) cannot subscribe; MULTI may still SUBSCRIBE and PSUBSCRIBE,
    // as Redis keeps for compatibility, but not SSUBSCRIBE (Redis 7.0).
    if c.cl.deny_blocking && (kind == Kind::Shard || c.cl.multi.is_none()) {
        return c.cl.reply.error(&format!(
            "ERR {} isn't allowed for a DENY BLOCKING client",
            kind.verbs().0.to_ascii_uppercase()
        ));
    }
    for ch in &argv[1..] {
        subscribe_one(c.srv, c.cl, kind, ch);
    }
}

fn unsubscribe_generic(c: &mut Ctx, argv: &[&[u8]], kind: Kind) {
    if argv.len() == 1 {
        unsubscribe_all(c.srv, c.cl, kind, true);
    } else {
        for ch in &argv[1..] {
            unsubscribe_one(c.srv, c.cl, kind, ch, true);
        }
    }
}

/// `SUBSCRIBE channel [channel ...]`
pub fn subscribe(c: &mut Ctx, argv: &[&[u8]]) {
    subscribe_generic(c, argv, Kind::Channel);
}

/// `UNSUBSCRIBE [channel ...]`
pub fn unsubscribe(c: &mut Ctx, argv: &[&[u8]]) {
    unsubscribe_generic(c, argv, Kind::Channel);
}

/// `PSUBSCRIBE pattern [pattern ...]`
pub fn psubscribe(c: &mut Ctx, argv: &[&[u8]]) {
    subscribe_generic(c, argv, Kind::Pattern);
}

/// `PUNSUBSCRIBE [pattern ...]`
pub fn punsubscribe(c: &mut Ctx, argv: &[&[u8]]) {
    unsubscribe_generic(c, argv, Kind::Pattern);
}

/// `SSUBSCRIBE shardchannel [shardchannel ...]`
pub fn ssubscribe(c: &mut Ctx, argv: &[&[u8]]) {
    subscribe_generic(c, argv, Kind::Shard);
}

/// `SUNSUBSCRIBE [shardchannel ...]`
pub fn sunsubscribe(c: &mut Ctx, argv: &[&[u8]]) {
    unsubscribe_generic(c, argv, Kind::Shard);
}

/// `PUBLISH channel message` — the number of clients that received it.
pub fn publish(c: &mut Ctx, argv: &[&[u8]]) {
    let n = c.srv.publish(argv[1], argv[2]);
    // Replicas publish it to their own subscribers (not the AOF: a message
    // is not data), as Redis outside cluster mode.
    c.force_propagation_to_replicas();
    c.cl.reply.int(n as i64);
}

/// `SPUBLISH shardchannel message`
pub fn spublish(c: &mut Ctx, argv: &[&[u8]]) {
    let n = c.srv.spublish(argv[1], argv[2]);
    c.force_propagation_to_replicas();
    c.cl.reply.int(n as i64);
}

const PUBSUB_HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

/// `PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP`
pub fn pubsub(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
    match sub {
        "help" => reply_help(c, PUBSUB_HELP),
        "channels" | "shardchannels" => {
            if argv.len() > 3 {
                return subcommand_syntax_error(c, argv, "PUBSUB");
            }
            let map = if sub == "channels" {
                &c.srv.pubsub.channels
            } else {
                &c.srv.pubsub.shard_channels
            };
            let pattern = argv.get(2).copied();
            let names: Vec<Vec<u8>> = map
                .keys()
                .filter(|ch| pattern.is_none_or(|p| glob_match(p, ch, false)))
                .cloned()
                .collect();
            c.cl.reply.array(names.len());
            for n in names {
                c.cl.reply.bulk(&n);
            }
        }
        "numsub" | "shardnumsub" => {
            let map = if sub == "numsub" {
                &c.srv.pubsub.channels
            } else {
                &c.srv.pubsub.shard_channels
            };
            let counts: Vec<usize> = argv[2..]
                .iter()
                .map(|ch| map.get(*ch).map_or(0, |s| s.len()))
                .collect();
            // A flat array in RESP3 too: Redis 7.0 replies so (7.2 made it a map).
            c.cl.reply.array(counts.len() * 2);
            for (ch, n) in argv[2..].iter().zip(counts) {
                c.cl.reply.bulk(ch);
                c.cl.reply.int(n as i64);
            }
        }
        "numpat" => {
            let n = c.srv.pubsub.pattern_count();
            c.cl.reply.int(n as i64);
        }
        _ => c.cl.reply.error(ERR_SYNTAX),
    }
}

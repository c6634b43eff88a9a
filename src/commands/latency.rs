//! LATENCY (Redis's latencyCommand): the latency monitor's events
//! (LATEST, HISTORY, GRAPH, DOCTOR, RESET; see `state::latency`) and the
//! per-command latency histograms of `latency-tracking` (HISTOGRAM).

use super::*;
use crate::state::latency;
use crate::util::hdr::HdrHistogram;

/// The first level of a HISTOGRAM reply, in nanoseconds; each next level
/// doubles (so the buckets run from about 1 µs to about 1 s).
const CDF_FIRST_BUCKET_NS: i64 = 1024;
const CDF_LOG_BASE: f64 = 2.0;

const LATENCY_HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

/// Unix time in seconds, as Redis's `time(NULL)`.
fn unix_now() -> i64 {
    crate::util::unix_time_ms() / 1000
}

/// ```text
/// LATENCY LATEST                  [[event, time, latest ms, max ms], …]
/// LATENCY HISTORY <event>         [[time, ms], …] oldest first
/// LATENCY GRAPH <event>           verbatim text, or an error if no samples
/// LATENCY DOCTOR                  verbatim text
/// LATENCY RESET [<event> …]       integer: events reset
/// LATENCY HISTOGRAM [<command> …] map of command → {calls, histogram_usec}
/// LATENCY HELP
/// ```
pub fn latency_cmd(c: &mut Ctx, argv: &[&[u8]]) {
    match subcommand(c) {
        "history" => match c.srv.latency.get(argv[2]) {
            None => c.cl.reply.array(0),
            Some((_, ts)) => {
                let samples: Vec<latency::Sample> = ts.history().collect();
                c.cl.reply.array(samples.len());
                for s in samples {
                    c.cl.reply.array(2);
                    c.cl.reply.int(i64::from(s.time));
                    c.cl.reply.int(i64::from(s.latency));
                }
            }
        },
        "graph" => match c.srv.latency.get(argv[2]) {
            None => c.cl.reply.error(&format!(
                "ERR No samples available for event '{}'",
                c_str(argv[2])
            )),
            Some((event, ts)) => {
                let text = latency::graph(event, ts, unix_now());
                c.cl.reply.verbatim(&text);
            }
        },
        "latest" => {
            c.cl.reply.array(c.srv.latency.len());
            for (event, ts) in c.srv.latency.events() {
                let last = ts.latest();
                c.cl.reply.array(4);
                c.cl.reply.bulk(event.as_bytes());
                c.cl.reply.int(i64::from(last.time));
                c.cl.reply.int(i64::from(last.latency));
                c.cl.reply.int(i64::from(ts.max));
            }
        }
        "doctor" => {
            let thp = crate::memory::smap_bytes_by_field("AnonHugePages:");
            let report = latency::doctor_report(c.srv, unix_now(), thp);
            c.cl.reply.verbatim(report.as_bytes());
        }
        "reset" => {
            let resets = if argv.len() == 2 {
                c.srv.latency.reset(None)
            } else {
                argv[2..]
                    .iter()
                    .map(|event| c.srv.latency.reset(Some(event)))
                    .sum()
            };
            c.cl.reply.int(resets as i64);
        }
        "histogram" => reply_histograms(c, &argv[2..]),
        _ => reply_help(c, LATENCY_HELP),
    }
}

/// HISTOGRAM: every command with a histogram, or those named (a container
/// standing for its subcommands; unknown names skipped).
fn reply_histograms(c: &mut Ctx, names: &[&[u8]]) {
    let mut found: Vec<(&'static str, &HdrHistogram)> = Vec::new();
    if names.is_empty() {
        for (name, st) in all_command_stats(c.srv) {
            if let Some(h) = &st.latency_histogram {
                found.push((name, h));
            }
        }
    } else {
        for name in names {
            let Some(cmd) = lookup_command_by_full_name(name) else {
                continue;
            };
            for spec in std::iter::once(cmd).chain(cmd.subcommands.iter()) {
                if let Some(h) =
                    command_stats_of(c.srv, spec).and_then(|st| st.latency_histogram.as_deref())
                {
                    found.push((spec.name, h));
                }
            }
        }
    }
    let reply = &mut c.cl.reply;
    reply.map(found.len());
    for (name, h) in found {
        reply.bulk(name.as_bytes());
        reply_cdf(reply, h);
    }
}

/// One command's cumulative distribution (Redis's fillCommandCDF): its call
/// count, and for each doubling latency level where the count grew, the
/// level's upper bound in microseconds and the calls up to it.
fn reply_cdf(reply: &mut crate::protocol::reply::Reply, h: &HdrHistogram) {
    let mut buckets = Vec::new();
    let mut previous = 0;
    for step in h.iter_log(CDF_FIRST_BUCKET_NS, CDF_LOG_BASE) {
        if step.cumulative_count > previous {
            buckets.push((step.highest_equivalent_value / 1000, step.cumulative_count));
        }
        previous = step.cumulative_count;
    }
    reply.map(2);
    reply.bulk(b"calls");
    reply.int(h.total_count());
    reply.bulk(b"histogram_usec");
    reply.map(buckets.len());
    for (usec, count) in buckets {
        reply.int(usec);
        reply.int(count);
    }
}

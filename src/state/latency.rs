//! The latency monitor (Redis's latency.c): named events (`command`,
//! `fork`, `expire-cycle`, `aof-write`, …) whose duration reached
//! `latency-monitor-threshold` milliseconds are kept as a time series per
//! event, one sample per second, for LATENCY LATEST/HISTORY/GRAPH/DOCTOR.
//!
//! Each series is a ring of the last [`LATENCY_TS_LEN`] seconds that had
//! a spike, plus the all-time maximum; a second spike within the same
//! second keeps the larger of the two. Series are made on their first
//! sample, so there is no list of events to maintain: wherever the server
//! times something Redis times, it calls
//! [`Server::latency_add_sample_if_needed`] with the event's name.
//!
//! Also here: the per-command latency histograms of `latency-tracking`
//! (what a call costs, in nanoseconds, for INFO latencystats and LATENCY
//! HISTOGRAM) and the DOCTOR report, whose wording is Redis's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use super::Server;
use crate::config::FsyncPolicy;
use crate::util::hdr::HdrHistogram;
use crate::util::sparkline;

/// Samples kept per event (seconds with a spike).
pub const LATENCY_TS_LEN: usize = 160;

/// Columns of a LATENCY GRAPH (samples per graph before it wraps).
const LATENCY_GRAPH_COLS: usize = 80;
/// Rows of characters of a LATENCY GRAPH.
const LATENCY_GRAPH_ROWS: usize = 4;

/// Range and precision of the command latency histograms: 1 ns to 1 s,
/// two significant digits (Redis's LATENCY_HISTOGRAM_*).
pub const LATENCY_HISTOGRAM_MIN_VALUE: i64 = 1;
pub const LATENCY_HISTOGRAM_MAX_VALUE: i64 = 1_000_000_000;
pub const LATENCY_HISTOGRAM_PRECISION: u32 = 2;

/// One second's worst latency: Unix time (0: an unused slot) and
/// milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    pub time: i32,
    pub latency: u32,
}

/// The history of one event (Redis's latencyTimeSeries).
#[derive(Debug, Clone)]
pub struct TimeSeries {
    /// Slot of the next sample.
    idx: usize,
    /// Worst latency seen since the series was made (or reset).
    pub max: u32,
    samples: [Sample; LATENCY_TS_LEN],
}

impl Default for TimeSeries {
    fn default() -> Self {
        TimeSeries {
            idx: 0,
            max: 0,
            samples: [Sample::default(); LATENCY_TS_LEN],
        }
    }
}

impl TimeSeries {
    /// Add a spike of `latency` ms seen at Unix time `now` (Redis's
    /// latencyAddSample): within the second of the previous sample only
    /// a larger latency replaces it; otherwise it takes the next slot,
    /// overwriting the oldest once the ring is full.
    pub fn add(&mut self, latency: u32, now: i32) {
        if latency > self.max {
            self.max = latency;
        }
        let prev = (self.idx + LATENCY_TS_LEN - 1) % LATENCY_TS_LEN;
        if self.samples[prev].time == now {
            if latency > self.samples[prev].latency {
                self.samples[prev].latency = latency;
            }
            return;
        }
        self.samples[self.idx] = Sample { time: now, latency };
        self.idx = (self.idx + 1) % LATENCY_TS_LEN;
    }

    /// The samples taken, oldest first.
    pub fn history(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..LATENCY_TS_LEN)
            .map(|j| self.samples[(self.idx + j) % LATENCY_TS_LEN])
            .filter(|s| s.time != 0)
    }

    /// The newest sample.
    pub fn latest(&self) -> Sample {
        self.samples[(self.idx + LATENCY_TS_LEN - 1) % LATENCY_TS_LEN]
    }

    /// Figures over the samples kept (Redis's analyzeLatencyForEvent);
    /// `now` is the Unix time the period is measured to.
    pub fn analyze(&self, now: i64) -> LatencyStats {
        let mut ls = LatencyStats {
            all_time_high: self.max,
            ..Default::default()
        };
        let mut sum: u64 = 0;
        let mut oldest: i64 = 0;
        for s in self.samples.iter().filter(|s| s.time != 0) {
            ls.samples += 1;
            if ls.samples == 1 {
                ls.min = s.latency;
                ls.max = s.latency;
            } else {
                ls.min = ls.min.min(s.latency);
                ls.max = ls.max.max(s.latency);
            }
            sum += u64::from(s.latency);
            if oldest == 0 || i64::from(s.time) < oldest {
                oldest = i64::from(s.time);
            }
        }
        if ls.samples == 0 {
            return ls;
        }
        ls.avg = (sum / u64::from(ls.samples)) as u32;
        ls.period = now - oldest;
        if ls.period == 0 {
            ls.period = 1;
        }
        // Mean absolute deviation from the (integer) average.
        let deviation: u64 = self
            .samples
            .iter()
            .filter(|s| s.time != 0)
            .map(|s| (i64::from(ls.avg) - i64::from(s.latency)).unsigned_abs())
            .sum();
        ls.mad = (deviation / u64::from(ls.samples)) as u32;
        ls
    }
}

/// What DOCTOR says about one event (Redis's latencyStats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencyStats {
    pub all_time_high: u32,
    pub avg: u32,
    pub min: u32,
    pub max: u32,
    /// Mean absolute deviation.
    pub mad: u32,
    /// Samples kept.
    pub samples: u32,
    /// Seconds from the oldest sample to now (at least 1).
    pub period: i64,
}

/// Every event's time series, by name.
#[derive(Debug, Default)]
pub struct LatencyMonitor {
    /// Kept in name order, so that LATEST and DOCTOR list events the same
    /// way every time (Redis's order is its dict's). A series is boxed: a
    /// map node holds eleven values, and eleven 1.3 KB series inline made
    /// the first event cost 14 KB of `used_memory` (Redis's costs one
    /// series), enough to evict keys under a tight `maxmemory`.
    events: BTreeMap<String, Box<TimeSeries>>,
}

impl LatencyMonitor {
    /// Record a spike of `latency_ms` for `event` at Unix time `now`.
    pub fn add_sample(&mut self, event: &str, latency_ms: u64, now: i64) {
        let latency = u32::try_from(latency_ms).unwrap_or(u32::MAX);
        let now = i32::try_from(now).unwrap_or(i32::MAX);
        match self.events.get_mut(event) {
            Some(ts) => ts.add(latency, now),
            None => {
                let mut ts = Box::<TimeSeries>::default();
                ts.add(latency, now);
                self.events.insert(event.to_string(), ts);
            }
        }
    }

    /// The series of `event` (named exactly).
    pub fn get(&self, event: &[u8]) -> Option<(&str, &TimeSeries)> {
        let name = std::str::from_utf8(event).ok()?;
        self.events
            .get_key_value(name)
            .map(|(k, v)| (k.as_str(), &**v))
    }

    /// Every event, in name order.
    pub fn events(&self) -> impl Iterator<Item = (&str, &TimeSeries)> {
        self.events.iter().map(|(k, v)| (k.as_str(), &**v))
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Drop the series of `event` (matched case-insensitively), or all of
    /// them; how many were dropped.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        match event {
            None => self.events.clear(),
            Some(e) => self
                .events
                .retain(|name, _| !name.as_bytes().eq_ignore_ascii_case(e)),
        }
        before - self.events.len()
    }
}

/// A latency measurement in progress (Redis's latencyStartMonitor): only
/// taken while the monitor is on, so a disabled monitor costs no clock
/// reads.
#[derive(Debug, Clone, Copy)]
pub struct LatencyTimer(Option<Instant>);

impl Server {
    /// Start timing something the monitor may record.
    pub fn latency_start(&self) -> LatencyTimer {
        LatencyTimer((self.config.latency_monitor_threshold > 0).then(Instant::now))
    }

    /// Finish a timing and record it under `event` if it was slow enough
    /// (Redis's latencyEndMonitor and latencyAddSampleIfNeeded).
    pub fn latency_end(&mut self, event: &str, timer: LatencyTimer) {
        if let LatencyTimer(Some(started)) = timer {
            self.latency_add_sample_if_needed(event, started.elapsed().as_millis() as u64);
        }
    }

    /// Record a spike of `latency_ms` for `event` when the monitor is on and
    /// it reaches `latency-monitor-threshold`. Anything that measures its
    /// own duration (eviction, for one) reports through here.
    pub fn latency_add_sample_if_needed(&mut self, event: &str, latency_ms: u64) {
        let threshold = self.config.latency_monitor_threshold;
        if threshold > 0 && latency_ms >= threshold as u64 {
            let now = crate::util::unix_time_ms() / 1000;
            self.latency.add_sample(event, latency_ms, now);
        }
    }
}

/// A command's latency histogram, made on its first call (Redis's
/// updateCommandLatencyHistogram): `duration_ns` is clamped into the
/// histogram's range.
pub fn record_command_latency(histogram: &mut Option<Box<HdrHistogram>>, duration_ns: i64) {
    let value = duration_ns.clamp(LATENCY_HISTOGRAM_MIN_VALUE, LATENCY_HISTOGRAM_MAX_VALUE);
    let h = histogram.get_or_insert_with(|| {
        Box::new(
            HdrHistogram::new(
                LATENCY_HISTOGRAM_MIN_VALUE,
                LATENCY_HISTOGRAM_MAX_VALUE,
                LATENCY_HISTOGRAM_PRECISION,
            )
            .expect("the latency histogram range is valid"),
        )
    });
    h.record(value);
}

/// INFO latencystats's line for one command (Redis's
/// fillPercentileDistributionLatencies): each configured percentile, in
/// microseconds with three decimals.
pub fn percentiles_line(name: &str, histogram: &HdrHistogram, percentiles: &[f64]) -> String {
    let mut line = format!("latency_percentiles_usec_{name}:");
    for (j, &p) in percentiles.iter().enumerate() {
        if j > 0 {
            line.push(',');
        }
        let usec = histogram.value_at_percentile(p) as f64 / 1000.0;
        let _ = write!(line, "p{}={usec:.3}", crate::util::format_percentile(p));
    }
    line.push_str("\r\n");
    line
}

/// LATENCY GRAPH's text for an event (Redis's latencyCommandGenSparkeline):
/// a header with the range, a rule, and the sparkline of its samples,
/// each labelled with how long ago it was taken.
pub fn graph(event: &str, ts: &TimeSeries, now: i64) -> Vec<u8> {
    let mut seq = sparkline::Sequence::new();
    let (mut min, mut max) = (0u32, 0u32);
    for s in ts.history() {
        if seq.is_empty() {
            min = s.latency;
            max = s.latency;
        } else {
            max = max.max(s.latency);
            min = min.min(s.latency);
        }
        let elapsed = now - i64::from(s.time);
        let label = if elapsed < 60 {
            format!("{elapsed}s")
        } else if elapsed < 3600 {
            format!("{}m", elapsed / 60)
        } else if elapsed < 3600 * 24 {
            format!("{}h", elapsed / 3600)
        } else {
            format!("{}d", elapsed / (3600 * 24))
        };
        seq.add(f64::from(s.latency), &label);
    }
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n{}\n",
        ts.max,
        "-".repeat(LATENCY_GRAPH_COLS)
    )
    .into_bytes();
    let style = sparkline::Style {
        fill: true,
        log_scale: false,
    };
    seq.render(&mut out, LATENCY_GRAPH_COLS, LATENCY_GRAPH_ROWS, style);
    out
}

/// Advice DOCTOR may give, in the order it gives them.
#[derive(Default)]
struct Advice {
    better_vm: bool,
    slowlog_enabled: bool,
    slowlog_tuning: bool,
    slowlog_inspect: bool,
    disk_contention: bool,
    scheduler: bool,
    data_writeback: bool,
    no_appendfsync: bool,
    local_disk: bool,
    ssd: bool,
    write_load_info: bool,
    hz: bool,
    large_objects: bool,
    mass_eviction: bool,
    relax_fsync_policy: bool,
    disable_thp: bool,
    count: u32,
}

/// LATENCY DOCTOR's report (Redis's createLatencyReport, word for word):
/// each event's figures with a comment, then advice. `thp_bytes` is the
/// process's AnonHugePages (transparent huge pages hurt latency).
pub fn doctor_report(srv: &Server, now: i64, thp_bytes: usize) -> String {
    let mut report = String::new();
    let threshold = srv.config.latency_monitor_threshold;
    if srv.latency.is_empty() && threshold == 0 {
        report.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n");
        return report;
    }
    let mut a = Advice::default();
    let mut eventnum = 0;
    for (event, ts) in srv.latency.events() {
        eventnum += 1;
        if eventnum == 1 {
            report.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let ls = ts.analyze(now);
        let _ = write!(
            report,
            "{eventnum}. {event}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
            ls.samples,
            ls.avg,
            ls.mad,
            ls.period as f64 / f64::from(ls.samples),
            ts.max
        );
        let is = |name: &str| event.eq_ignore_ascii_case(name);
        if is("fork") {
            let rate = srv.snapshot.fork_rate_gb_per_sec;
            let quality = if rate < 10.0 {
                a.better_vm = true;
                a.count += 1;
                "terrible"
            } else if rate < 25.0 {
                a.better_vm = true;
                a.count += 1;
                "poor"
            } else if rate < 100.0 {
                "good"
            } else {
                "excellent"
            };
            let _ = write!(report, " Fork rate is {rate:.2} GB/sec ({quality}).");
        }
        if is("command") {
            let slower_than = srv.config.slowlog_log_slower_than;
            if slower_than < 0 {
                a.slowlog_enabled = true;
                a.count += 1;
            } else if slower_than / 1000 > threshold {
                a.slowlog_tuning = true;
                a.count += 1;
            }
            a.slowlog_inspect = true;
            a.large_objects = true;
            a.count += 2;
        }
        if is("fast-command") {
            a.scheduler = true;
            a.count += 1;
        }
        if is("aof-write-pending-fsync") {
            a.local_disk = true;
            a.disk_contention = true;
            a.ssd = true;
            a.data_writeback = true;
            a.count += 4;
        }
        if is("aof-write-active-child") {
            a.no_appendfsync = true;
            a.data_writeback = true;
            a.ssd = true;
            a.count += 3;
        }
        if is("aof-write-alone") {
            a.local_disk = true;
            a.data_writeback = true;
            a.ssd = true;
            a.count += 3;
        }
        if is("aof-fsync-always") {
            a.relax_fsync_policy = true;
            a.count += 1;
        }
        if is("aof-fstat") || is("rdb-unlink-temp-file") {
            a.disk_contention = true;
            a.local_disk = true;
            a.count += 2;
        }
        if is("aof-rewrite-diff-write") || is("aof-rename") {
            a.write_load_info = true;
            a.data_writeback = true;
            a.ssd = true;
            a.local_disk = true;
            a.count += 4;
        }
        if is("expire-cycle") {
            a.hz = true;
            a.large_objects = true;
            a.count += 2;
        }
        if is("eviction-del") {
            a.large_objects = true;
            a.count += 1;
        }
        if is("eviction-cycle") {
            a.mass_eviction = true;
            a.count += 1;
        }
        report.push('\n');
    }
    if thp_bytes > 0 {
        a.disable_thp = true;
        a.count += 1;
    }
    if eventnum == 0 && a.count == 0 {
        report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
    } else if eventnum > 0 && a.count == 0 {
        report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
    } else {
        write_advice(&mut report, &a, srv);
    }
    report
}

/// The advice section of the DOCTOR report.
fn write_advice(report: &mut String, a: &Advice, srv: &Server) {
    let threshold_us = (srv.config.latency_monitor_threshold as u64).wrapping_mul(1000);
    report.push_str("\nI have a few advices for you:\n\n");
    if a.better_vm {
        report.push_str("- If you are using a virtual machine, consider upgrading it with a faster one using a hypervisior that provides less latency during fork() calls. Xen is known to have poor fork() performance. Even in the context of the same VM provider, certain kinds of instances can execute fork faster than others.\n");
    }
    if a.slowlog_enabled {
        let _ = writeln!(report, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {threshold_us}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
    }
    if a.slowlog_tuning {
        let _ = writeln!(report, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_us}'.");
    }
    if a.slowlog_inspect {
        report.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if a.scheduler {
        report.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if a.local_disk {
        report.push_str("- It is strongly advised to use local disks for persistence, especially if you are using AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n");
    }
    if a.ssd {
        report.push_str("- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF log rewriting (resulting in smaller memory usage). With extremely high write load SSD disks can be a good option. However Redis should perform reasonably with high load using normal disks. Use this advice as a last resort.\n");
    }
    if a.data_writeback {
        report.push_str("- Mounting ext3/4 filesystems with data=writeback can provide a performance boost compared to data=ordered, however this mode of operation provides less guarantees, and sometimes it can happen that after a hard crash the AOF file will have a half-written command at the end and will require to be repaired before Redis restarts.\n");
    }
    if a.disk_contention {
        report.push_str("- Try to lower the disk contention. This is often caused by other disk intensive processes running in the same computer (including other Redis instances).\n");
    }
    if a.no_appendfsync {
        report.push_str("- Assuming from the point of view of data safety this is viable in your environment, you could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be performed while there is a child rewriting the AOF file or producing an RDB file (the moment where there is high disk contention).\n");
    }
    if a.relax_fsync_policy && srv.config.appendfsync == FsyncPolicy::Always {
        report.push_str("- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n");
    }
    if a.write_load_info {
        report.push_str("- Latency during the AOF atomic rename operation or when the final difference is flushed to the AOF file at the end of the rewrite, sometimes is caused by very high write load, causing the AOF buffer to get very large. If possible try to send less commands to accomplish the same work, or use Lua scripts to group multiple operations into a single EVALSHA call.\n");
    }
    if a.hz && srv.hz < 100 {
        report.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
    }
    if a.large_objects {
        report.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if a.mass_eviction {
        report.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
    }
    if a.disable_thp {
        report.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_costs_about_one_series_of_memory() {
        // Redis's latency monitor costs one series (1.3 KB) an event; a
        // tight `maxmemory` evicts keys for whatever more it costs here
        // (Redis's maxmemory test "client tracking don't cause eviction
        // feedback loop" counts them).
        // This thread's own allocations: `used_memory` also counts bucket
        // arrays and lazyfree frees that tests running beside this one
        // change meanwhile.
        let mut monitor = LatencyMonitor::default();
        let before = crate::memory::thread_allocated();
        monitor.add_sample("command", 5, 1000);
        monitor.add_sample("eviction-cycle", 2, 1000);
        let cost = crate::memory::thread_allocated().saturating_sub(before);
        let series = std::mem::size_of::<TimeSeries>();
        assert!(cost < 2 * series + 1024, "two events cost {cost} bytes");
    }

    #[test]
    fn same_second_keeps_the_larger_latency() {
        let mut ts = TimeSeries::default();
        ts.add(10, 1000);
        ts.add(5, 1000);
        ts.add(30, 1000);
        ts.add(20, 1000);
        let h: Vec<Sample> = ts.history().collect();
        assert_eq!(
            h,
            vec![Sample {
                time: 1000,
                latency: 30
            }]
        );
        assert_eq!(ts.max, 30);
    }

    #[test]
    fn each_second_takes_a_slot_oldest_first() {
        let mut ts = TimeSeries::default();
        ts.add(7, 100);
        ts.add(3, 101);
        ts.add(9, 105);
        let h: Vec<(i32, u32)> = ts.history().map(|s| (s.time, s.latency)).collect();
        assert_eq!(h, vec![(100, 7), (101, 3), (105, 9)]);
        assert_eq!(
            ts.latest(),
            Sample {
                time: 105,
                latency: 9
            }
        );
    }

    #[test]
    fn ring_wraps_after_160_seconds() {
        let mut ts = TimeSeries::default();
        for t in 1..=(LATENCY_TS_LEN as i32 + 5) {
            ts.add(t as u32, t);
        }
        let h: Vec<i32> = ts.history().map(|s| s.time).collect();
        assert_eq!(h.len(), LATENCY_TS_LEN);
        // The five oldest were overwritten.
        assert_eq!(h[0], 6);
        assert_eq!(*h.last().unwrap(), LATENCY_TS_LEN as i32 + 5);
        assert!(h.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ts.max, LATENCY_TS_LEN as u32 + 5);
        assert_eq!(ts.latest().time, LATENCY_TS_LEN as i32 + 5);
    }

    #[test]
    fn all_time_max_outlives_the_ring() {
        let mut ts = TimeSeries::default();
        ts.add(500, 1);
        for t in 2..=(LATENCY_TS_LEN as i32 + 1) {
            ts.add(1, t);
        }
        assert!(ts.history().all(|s| s.latency == 1));
        assert_eq!(ts.max, 500);
    }

    #[test]
    fn analyze_computes_average_deviation_and_period() {
        let mut ts = TimeSeries::default();
        ts.add(10, 100);
        ts.add(20, 110);
        ts.add(60, 120);
        let ls = ts.analyze(130);
        assert_eq!(
            ls,
            LatencyStats {
                all_time_high: 60,
                avg: 30,
                min: 10,
                max: 60,
                // |30-10| + |30-20| + |30-60| = 60, / 3.
                mad: 20,
                samples: 3,
                period: 30,
            }
        );
        // A period of 0 seconds counts as one.
        let mut one = TimeSeries::default();
        one.add(5, 200);
        assert_eq!(one.analyze(200).period, 1);
        assert_eq!(TimeSeries::default().analyze(5), LatencyStats::default());
    }

    #[test]
    fn reset_matches_names_case_insensitively() {
        let mut m = LatencyMonitor::default();
        m.add_sample("command", 5, 10);
        m.add_sample("fork", 5, 10);
        assert_eq!(m.reset(Some(b"nothing")), 0);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert!(m.get(b"command").is_none());
        assert!(m.get(b"fork").is_some());
        m.add_sample("expire-cycle", 5, 10);
        assert_eq!(m.reset(None), 2);
        assert!(m.is_empty());
    }

    #[test]
    fn graph_labels_samples_by_age() {
        let mut ts = TimeSeries::default();
        ts.add(10, 1000);
        ts.add(20, 1001);
        ts.add(30, 1002);
        ts.add(60, 1003);
        let text = String::from_utf8(graph("command", &ts, 1003)).unwrap();
        let expected = format!(
            "command - high 60 ms, low 10 ms (all time high 60 ms)\n{}\n   #\n   |\n  o|\n_#||\n    \n3210\nssss\n",
            "-".repeat(80)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn graph_labels_in_minutes_hours_and_days() {
        let mut ts = TimeSeries::default();
        ts.add(1, 1);
        ts.add(1, 100_000 - 7200);
        ts.add(1, 100_000 - 120);
        ts.add(1, 100_000);
        let text = String::from_utf8(graph("e", &ts, 100_000)).unwrap();
        let labels: Vec<&str> = text.lines().skip(7).collect();
        assert_eq!(labels, vec!["1220", "dhms"]);
    }

    #[test]
    fn percentile_lines_use_trimmed_labels() {
        let mut h = HdrHistogram::new(1, 1_000_000_000, 2).unwrap();
        h.record(1000);
        h.record(2000);
        h.record(3000);
        let line = percentiles_line("set", &h, &[50.0, 99.0, 99.9]);
        assert_eq!(
            line,
            "latency_percentiles_usec_set:p50=2.007,p99=3.007,p99.9=3.007\r\n"
        );
        assert_eq!(
            percentiles_line("get", &h, &[]),
            "latency_percentiles_usec_get:\r\n"
        );
    }

    #[test]
    fn command_latency_is_clamped_into_range() {
        let mut h = None;
        record_command_latency(&mut h, 0);
        record_command_latency(&mut h, 5_000_000_000);
        let h = h.unwrap();
        assert_eq!(h.total_count(), 2);
        assert_eq!(h.value_at_percentile(0.0), 1);
        assert!(h.max() >= 1_000_000_000);
    }
}

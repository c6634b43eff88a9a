//! Logging through `tracing`, with Redis's `loglevel` and `logfile` options.
//!
//! The level can change at run time (CONFIG SET loglevel), so filtering is
//! done by the writer factory against a global level rather than fixed when
//! the subscriber is built.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// 0 = nothing, 1 = warning, 2 = notice, 3 = verbose, 4 = debug.
static LEVEL: AtomicU8 = AtomicU8::new(2);

fn level_rank(name: &str) -> u8 {
    match name {
        "debug" => 4,
        "verbose" => 3,
        "notice" => 2,
        "warning" => 1,
        _ => 0,
    }
}

fn event_rank(level: &Level) -> u8 {
    match *level {
        Level::ERROR | Level::WARN => 1,
        Level::INFO => 2,
        Level::DEBUG => 3,
        Level::TRACE => 4,
    }
}

/// Change the log level (`loglevel` option).
pub fn set_level(name: &str) {
    LEVEL.store(level_rank(name), Ordering::Relaxed);
}

#[derive(Clone)]
enum Target {
    Stdout,
    File(Arc<Mutex<File>>),
}

#[derive(Clone)]
struct Writer {
    target: Target,
    enabled: bool,
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.enabled {
            return Ok(buf.len());
        }
        match &self.target {
            Target::Stdout => io::stdout().write(buf),
            Target::File(f) => f
                .lock()
                .map_err(|_| io::Error::other("log file lock poisoned"))?
                .write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &self.target {
            Target::Stdout => io::stdout().flush(),
            Target::File(f) => f
                .lock()
                .map_err(|_| io::Error::other("log file lock poisoned"))?
                .flush(),
        }
    }
}

struct Factory {
    target: Target,
}

impl<'a> MakeWriter<'a> for Factory {
    type Writer = Writer;

    fn make_writer(&'a self) -> Writer {
        Writer {
            target: self.target.clone(),
            enabled: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Writer {
        let enabled = event_rank(meta.level()) <= LEVEL.load(Ordering::Relaxed);
        Writer {
            target: self.target.clone(),
            enabled,
        }
    }
}

/// Install the global subscriber. `logfile` empty means standard output.
pub fn init(loglevel: &str, logfile: &str) -> io::Result<()> {
    set_level(loglevel);
    let target = if logfile.is_empty() {
        Target::Stdout
    } else {
        let f = OpenOptions::new().create(true).append(true).open(logfile)?;
        Target::File(Arc::new(Mutex::new(f)))
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(Level::DEBUG)
        .with_ansi(false)
        .with_target(false)
        .with_writer(Factory { target })
        .try_init();
    Ok(())
}

/// A budget of log lines for one kind of event that a peer can trigger at
/// will (failed AUTH, protocol errors, refused connections): at most `burst`
/// lines per `period`, so one client sending garbage cannot fill the disk.
/// The next line allowed after a quiet spell says how many were left out.
#[derive(Debug)]
pub struct RateLimit {
    burst: u32,
    period: std::time::Duration,
    window_start: Option<std::time::Instant>,
    in_window: u32,
    suppressed: u64,
}

impl RateLimit {
    pub const fn new(burst: u32, period: std::time::Duration) -> RateLimit {
        RateLimit {
            burst,
            period,
            window_start: None,
            in_window: 0,
            suppressed: 0,
        }
    }

    /// May a line be logged now? When it may, returns the number of lines
    /// suppressed since the last one that was logged.
    pub fn allow(&mut self, now: std::time::Instant) -> Option<u64> {
        let fresh = self
            .window_start
            .is_none_or(|t| now.duration_since(t) >= self.period);
        if fresh {
            self.window_start = Some(now);
            self.in_window = 0;
        }
        if self.in_window >= self.burst {
            self.suppressed += 1;
            return None;
        }
        self.in_window += 1;
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// " (N similar lines suppressed)" when N > 0, for the end of a log line.
pub fn suppressed_note(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} similar messages suppressed)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn rate_limit_allows_a_burst_per_period_and_counts_the_rest() {
        let mut r = RateLimit::new(2, Duration::from_secs(1));
        let t = Instant::now();
        assert_eq!(r.allow(t), Some(0));
        assert_eq!(r.allow(t), Some(0));
        assert_eq!(r.allow(t), None);
        assert_eq!(r.allow(t + Duration::from_millis(500)), None);
        assert_eq!(r.allow(t + Duration::from_secs(1)), Some(2));
        assert_eq!(r.allow(t + Duration::from_secs(1)), Some(0));
    }
}

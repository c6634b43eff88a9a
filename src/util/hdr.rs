//! An HdrHistogram (High Dynamic Range histogram) with the arithmetic of the
//! C library Redis vendors in `deps/hdr_histogram`: per-command latency
//! histograms (`latency-tracking`) are read back through it by INFO
//! latencystats (`value_at_percentile`) and LATENCY HISTOGRAM (the
//! logarithmic iterator), and both must land on the very same bucket
//! boundaries as Redis's for the numbers to agree.
//!
//! The layout: values are grouped in buckets of doubling magnitude; each
//! bucket holds `sub_bucket_count` linear sub-buckets, whose width is the
//! bucket's power of two. The first bucket uses all its sub-buckets; every
//! later one only its upper half (the lower half would repeat the previous
//! bucket's range), so the counts array has `(bucket_count + 1) *
//! sub_bucket_half_count` slots. Two significant digits give 256
//! sub-buckets: a value is known to within 1/128 of itself.
//!
//! Only what Redis uses is here: recording, percentiles, and the
//! logarithmic iterator. Redis never shifts or normalises its histograms
//! (`normalizing_index_offset` is always 0), so that is left out.

/// Why a histogram cannot be made with the asked-for range and precision
/// (the C library's `EINVAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidConfig;

/// A histogram of non-negative 64-bit values.
#[derive(Debug, Clone)]
pub struct HdrHistogram {
    unit_magnitude: u32,
    sub_bucket_half_count_magnitude: u32,
    sub_bucket_count: i64,
    sub_bucket_half_count: i64,
    sub_bucket_mask: i64,
    counts: Box<[i64]>,
    total_count: i64,
    min_value: i64,
    max_value: i64,
}

impl HdrHistogram {
    /// A histogram tracking values in `[lowest, highest]` with
    /// `significant_figures` (1..=5) decimal digits of precision (the C
    /// library's `hdr_init` and `hdr_calculate_bucket_config`).
    pub fn new(
        lowest: i64,
        highest: i64,
        significant_figures: u32,
    ) -> Result<HdrHistogram, InvalidConfig> {
        if lowest < 1 || !(1..=5).contains(&significant_figures) || lowest * 2 > highest {
            return Err(InvalidConfig);
        }
        // The smallest power of two holding 2 * 10^figures values at unit
        // resolution (computed, as the C code does, through logarithms).
        let largest_single_unit = 2 * 10i64.pow(significant_figures);
        let count_magnitude = ((largest_single_unit as f64).ln() / 2f64.ln()).ceil() as u32;
        let sub_bucket_half_count_magnitude = count_magnitude.max(1) - 1;
        let unit_magnitude = ((lowest as f64).ln() / 2f64.ln()) as u32;
        if unit_magnitude + sub_bucket_half_count_magnitude > 61 {
            return Err(InvalidConfig);
        }
        let sub_bucket_count = 1i64 << (sub_bucket_half_count_magnitude + 1);
        let sub_bucket_half_count = sub_bucket_count / 2;
        let sub_bucket_mask = (sub_bucket_count - 1) << unit_magnitude;
        let bucket_count = buckets_needed_to_cover(highest, sub_bucket_count, unit_magnitude);
        let counts_len = (bucket_count + 1) as usize * sub_bucket_half_count as usize;
        Ok(HdrHistogram {
            unit_magnitude,
            sub_bucket_half_count_magnitude,
            sub_bucket_count,
            sub_bucket_half_count,
            sub_bucket_mask,
            counts: vec![0; counts_len].into_boxed_slice(),
            total_count: 0,
            min_value: i64::MAX,
            max_value: 0,
        })
    }

    /// Values recorded so far.
    pub fn total_count(&self) -> i64 {
        self.total_count
    }

    /// Slots in the counts array (for tests and memory accounting).
    pub fn counts_len(&self) -> usize {
        self.counts.len()
    }

    /// Count one occurrence of `value`; false (and nothing counted) when it
    /// is negative or beyond the trackable range.
    pub fn record(&mut self, value: i64) -> bool {
        if value < 0 {
            return false;
        }
        let index = self.counts_index_for(value);
        let Some(slot) = usize::try_from(index)
            .ok()
            .and_then(|i| self.counts.get_mut(i))
        else {
            return false;
        };
        *slot += 1;
        self.total_count += 1;
        if value < self.min_value && value != 0 {
            self.min_value = value;
        }
        if value > self.max_value {
            self.max_value = value;
        }
        true
    }

    /// Forget everything recorded.
    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.total_count = 0;
        self.min_value = i64::MAX;
        self.max_value = 0;
    }

    fn bucket_index(&self, value: i64) -> i32 {
        // The smallest power of two containing the value.
        let pow2ceiling = 64 - (value | self.sub_bucket_mask).leading_zeros() as i32;
        pow2ceiling - self.unit_magnitude as i32 - (self.sub_bucket_half_count_magnitude as i32 + 1)
    }

    fn sub_bucket_index(&self, value: i64, bucket_index: i32) -> i64 {
        value >> (bucket_index + self.unit_magnitude as i32)
    }

    fn counts_index(&self, bucket_index: i32, sub_bucket_index: i64) -> i64 {
        let bucket_base_index = ((bucket_index + 1) as i64) << self.sub_bucket_half_count_magnitude;
        bucket_base_index + sub_bucket_index - self.sub_bucket_half_count
    }

    fn counts_index_for(&self, value: i64) -> i64 {
        let bucket = self.bucket_index(value);
        self.counts_index(bucket, self.sub_bucket_index(value, bucket))
    }

    fn value_from_index(&self, bucket_index: i32, sub_bucket_index: i64) -> i64 {
        sub_bucket_index << (bucket_index + self.unit_magnitude as i32)
    }

    /// The lowest value the counts slot `index` stands for.
    pub fn value_at_index(&self, index: i64) -> i64 {
        let mut bucket_index = (index >> self.sub_bucket_half_count_magnitude) as i32 - 1;
        let mut sub_bucket_index =
            (index & (self.sub_bucket_half_count - 1)) + self.sub_bucket_half_count;
        if bucket_index < 0 {
            sub_bucket_index -= self.sub_bucket_half_count;
            bucket_index = 0;
        }
        self.value_from_index(bucket_index, sub_bucket_index)
    }

    fn size_of_range(&self, bucket_index: i32, sub_bucket_index: i64) -> i64 {
        let adjusted = if sub_bucket_index >= self.sub_bucket_count {
            bucket_index + 1
        } else {
            bucket_index
        };
        1i64 << (self.unit_magnitude as i32 + adjusted)
    }

    /// The width of the range of values counted together with `value`.
    pub fn size_of_equivalent_value_range(&self, value: i64) -> i64 {
        let bucket = self.bucket_index(value);
        self.size_of_range(bucket, self.sub_bucket_index(value, bucket))
    }

    /// The lowest value counted together with `value`.
    pub fn lowest_equivalent_value(&self, value: i64) -> i64 {
        let bucket = self.bucket_index(value);
        self.value_from_index(bucket, self.sub_bucket_index(value, bucket))
    }

    /// The highest value counted together with `value`.
    pub fn highest_equivalent_value(&self, value: i64) -> i64 {
        self.lowest_equivalent_value(value) + self.size_of_equivalent_value_range(value) - 1
    }

    /// The largest value recorded, to the histogram's precision.
    pub fn max(&self) -> i64 {
        if self.max_value == 0 {
            0
        } else {
            self.highest_equivalent_value(self.max_value)
        }
    }

    /// The smallest value recorded, to the histogram's precision.
    pub fn min(&self) -> i64 {
        if self.counts.first().is_some_and(|&c| c > 0) {
            0
        } else if self.min_value == i64::MAX {
            i64::MAX
        } else {
            self.lowest_equivalent_value(self.min_value)
        }
    }

    /// The value below which `percentile` percent of the recorded values
    /// fall (`hdr_value_at_percentile`): the rank is rounded half up, as
    /// `(int64_t)((p / 100) * total + 0.5)`, and the answer is the highest
    /// value of the slot that rank falls in (the lowest, for p = 0).
    pub fn value_at_percentile(&self, percentile: f64) -> i64 {
        let requested = if percentile < 100.0 {
            percentile
        } else {
            100.0
        };
        let count_at_percentile = ((requested / 100.0) * self.total_count as f64 + 0.5) as i64;
        let value = self.value_up_to_count(count_at_percentile.max(1));
        if percentile == 0.0 {
            self.lowest_equivalent_value(value)
        } else {
            self.highest_equivalent_value(value)
        }
    }

    fn value_up_to_count(&self, count: i64) -> i64 {
        let mut seen = 0;
        for (index, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= count {
                return self.value_at_index(index as i64);
            }
        }
        0
    }

    /// Walk the histogram in logarithmically growing steps: the first
    /// reporting level is `first_bucket`, each next one `log_base` times the
    /// previous (`hdr_iter_log_init`).
    pub fn iter_log(&self, first_bucket: i64, log_base: f64) -> LogIter<'_> {
        LogIter {
            h: self,
            counts_index: -1,
            total_count: self.total_count,
            count: 0,
            cumulative_count: 0,
            value: 0,
            highest_equivalent_value: 0,
            log_base,
            next_level: first_bucket,
            next_level_lowest_equivalent: self.lowest_equivalent_value(first_bucket),
        }
    }
}

/// Buckets needed for `value` to be trackable.
fn buckets_needed_to_cover(value: i64, sub_bucket_count: i64, unit_magnitude: u32) -> i32 {
    let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
    let mut needed = 1;
    while smallest_untrackable <= value {
        if smallest_untrackable > i64::MAX / 2 {
            return needed + 1;
        }
        smallest_untrackable <<= 1;
        needed += 1;
    }
    needed
}

/// One step of a [`LogIter`]: where the walk stands when it reaches a
/// reporting level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStep {
    /// The highest value of the slot the walk stopped on.
    pub highest_equivalent_value: i64,
    /// Values counted in every slot up to and including that one.
    pub cumulative_count: i64,
}

/// The C library's logarithmic iterator (`log_iter_next` over
/// `move_next`), step for step: the walk moves slot by slot and stops each
/// time the current slot's value reaches the next reporting level. A slot
/// that passes several levels at once is reported once per level (with an
/// unchanged cumulative count); after the last recorded value the walk
/// goes on while the following slot's value is above the level.
pub struct LogIter<'a> {
    h: &'a HdrHistogram,
    counts_index: i64,
    total_count: i64,
    count: i64,
    cumulative_count: i64,
    value: i64,
    highest_equivalent_value: i64,
    log_base: f64,
    next_level: i64,
    next_level_lowest_equivalent: i64,
}

impl LogIter<'_> {
    fn counts_len(&self) -> i64 {
        self.h.counts.len() as i64
    }

    fn move_next(&mut self) -> bool {
        self.counts_index += 1;
        if self.counts_index >= self.counts_len() {
            return false;
        }
        self.count = self.h.counts[self.counts_index as usize];
        self.cumulative_count += self.count;
        let value = self.h.value_at_index(self.counts_index);
        let bucket = self.h.bucket_index(value);
        let sub_bucket = self.h.sub_bucket_index(value, bucket);
        let lowest = self.h.value_from_index(bucket, sub_bucket);
        self.value = value;
        self.highest_equivalent_value = lowest + self.h.size_of_range(bucket, sub_bucket) - 1;
        true
    }

    fn next_value_above(&self, bound: i64) -> bool {
        self.counts_index < self.counts_len()
            && self.h.value_at_index(self.counts_index + 1) > bound
    }

    fn step(&self) -> LogStep {
        LogStep {
            highest_equivalent_value: self.highest_equivalent_value,
            cumulative_count: self.cumulative_count,
        }
    }
}

impl Iterator for LogIter<'_> {
    type Item = LogStep;

    fn next(&mut self) -> Option<LogStep> {
        if !(self.cumulative_count < self.total_count
            || self.next_value_above(self.next_level_lowest_equivalent))
        {
            return None;
        }
        loop {
            if self.value >= self.next_level_lowest_equivalent {
                self.next_level = self.next_level.saturating_mul(self.log_base as i64);
                self.next_level_lowest_equivalent = self.h.lowest_equivalent_value(self.next_level);
                return Some(self.step());
            }
            if !self.move_next() {
                return Some(self.step());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's command latency histograms: 1 ns to 1 s, 2 digits.
    fn redis_histogram() -> HdrHistogram {
        HdrHistogram::new(1, 1_000_000_000, 2).unwrap()
    }

    #[test]
    fn two_digit_layout_matches_the_c_library() {
        let h = redis_histogram();
        assert_eq!(h.sub_bucket_count, 256);
        assert_eq!(h.sub_bucket_half_count, 128);
        assert_eq!(h.unit_magnitude, 0);
        assert_eq!(h.sub_bucket_mask, 255);
        // 23 buckets: 256 << 22 is the first power past 1e9.
        assert_eq!(h.counts_len(), 24 * 128);
    }

    #[test]
    fn bad_ranges_are_refused() {
        assert!(HdrHistogram::new(0, 100, 2).is_err());
        assert!(HdrHistogram::new(1, 100, 0).is_err());
        assert!(HdrHistogram::new(1, 100, 6).is_err());
        assert!(HdrHistogram::new(60, 100, 2).is_err());
    }

    #[test]
    fn index_math_at_bucket_edges() {
        let h = redis_histogram();
        // Below 256 every value has its own slot.
        for v in [0, 1, 127, 128, 255] {
            assert_eq!(h.counts_index_for(v), v);
            assert_eq!(h.lowest_equivalent_value(v), v);
            assert_eq!(h.highest_equivalent_value(v), v);
        }
        // 256..511: slots of width 2.
        assert_eq!(h.counts_index_for(256), 256);
        assert_eq!(h.counts_index_for(257), 256);
        assert_eq!(h.lowest_equivalent_value(257), 256);
        assert_eq!(h.highest_equivalent_value(256), 257);
        // 1000 ns (1 µs): width 4, so 1000..=1003.
        assert_eq!(h.bucket_index(1000), 2);
        assert_eq!(h.sub_bucket_index(1000, 2), 250);
        assert_eq!(h.highest_equivalent_value(1000), 1003);
        // 1 s: bucket 22, width 2^22.
        assert_eq!(h.bucket_index(1_000_000_000), 22);
        assert_eq!(h.size_of_equivalent_value_range(1_000_000_000), 1 << 22);
        for index in [0i64, 1, 255, 256, 300, 383, 384, 3071] {
            let v = h.value_at_index(index);
            assert_eq!(h.counts_index_for(v), index, "index {index}");
        }
    }

    #[test]
    fn records_out_of_range_values_nowhere() {
        let mut h = redis_histogram();
        assert!(!h.record(-1));
        assert!(!h.record(1 << 40));
        assert_eq!(h.total_count(), 0);
        assert!(h.record(1_000_000_000));
        assert_eq!(h.total_count(), 1);
    }

    #[test]
    fn percentiles_of_one_to_a_thousand_microseconds() {
        let mut h = redis_histogram();
        for us in 1..=1000i64 {
            h.record(us * 1000);
        }
        // Rank 500 is 500 µs = 500000 ns, in a slot of width 2^11 starting
        // at 499712: its highest value is 501759.
        assert_eq!(h.value_at_percentile(50.0), 501_759);
        // Rank 990 (990000 ns) lies in 989184..=991231.
        assert_eq!(h.value_at_percentile(99.0), 991_231);
        // p99.9: rank (0.999 * 1000 + 0.5) = 999.
        assert_eq!(h.value_at_percentile(99.9), 999_423);
        assert_eq!(h.value_at_percentile(100.0), 1_003_519);
        assert_eq!(h.value_at_percentile(150.0), 1_003_519);
        // p0 answers the lowest value of the first slot.
        assert_eq!(h.value_at_percentile(0.0), 1000);
        assert_eq!(h.min(), 1000);
        assert_eq!(h.max(), 1_003_519);
    }

    #[test]
    fn percentile_rank_rounds_half_up() {
        let mut h = redis_histogram();
        h.record(10);
        h.record(20);
        // 0.25 * 2 + 0.5 = 1.0 -> rank 1; 0.75 * 2 + 0.5 = 2.0 -> rank 2.
        assert_eq!(h.value_at_percentile(25.0), 10);
        assert_eq!(h.value_at_percentile(75.0), 20);
        // 0.5 * 2 + 0.5 = 1.5 -> 1.
        assert_eq!(h.value_at_percentile(50.0), 10);
    }

    #[test]
    fn empty_histogram_percentile_is_zero() {
        let h = redis_histogram();
        assert_eq!(h.value_at_percentile(50.0), 0);
        assert_eq!(h.iter_log(1024, 2.0).count(), 0);
    }

    /// fillCommandCDF's view: (µs, cumulative) where the count grew.
    fn cdf(h: &HdrHistogram) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let mut previous = 0;
        for step in h.iter_log(1024, 2.0) {
            if step.cumulative_count > previous {
                out.push((step.highest_equivalent_value / 1000, step.cumulative_count));
            }
            previous = step.cumulative_count;
        }
        out
    }

    // The expected figures below were printed by Redis's hdr_histogram.c.

    #[test]
    fn log_iterator_reports_doubling_levels() {
        let mut h = redis_histogram();
        h.record(1000);
        // The walk stops on the slot holding 1024 (1024..=1031, in the
        // bucket of width 8): the value recorded at 1000 is counted there.
        let steps: Vec<LogStep> = h.iter_log(1024, 2.0).collect();
        assert_eq!(
            steps,
            vec![LogStep {
                highest_equivalent_value: 1031,
                cumulative_count: 1
            }]
        );
        assert_eq!(cdf(&h), vec![(1, 1)]);
    }

    #[test]
    fn log_iterator_cumulates_across_levels() {
        let mut h = redis_histogram();
        for us in [1, 1, 3, 10, 50_000] {
            h.record(us * 1000);
        }
        assert_eq!(cdf(&h), vec![(1, 2), (4, 3), (16, 4), (67_633, 5)]);
    }

    #[test]
    fn log_iterator_over_one_to_a_thousand_microseconds() {
        let mut h = redis_histogram();
        for us in 1..=1000i64 {
            h.record(us * 1000);
        }
        assert_eq!(
            cdf(&h),
            vec![
                (1, 1),
                (2, 2),
                (4, 4),
                (8, 8),
                (16, 16),
                (33, 33),
                (66, 66),
                (132, 132),
                (264, 264),
                (528, 528),
                (1056, 1000)
            ]
        );
    }

    #[test]
    fn log_iterator_walks_to_the_end_for_the_largest_value() {
        let mut h = redis_histogram();
        h.record(1_000_000_000);
        let steps: Vec<LogStep> = h.iter_log(1024, 2.0).collect();
        // One step per level up to 2^30; the last one runs off the counts
        // array and reports its final slot, as the C iterator does.
        assert_eq!(steps.len(), 21);
        assert_eq!(steps[0].highest_equivalent_value, 1031);
        assert_eq!(steps[0].cumulative_count, 0);
        assert_eq!(
            steps[20],
            LogStep {
                highest_equivalent_value: (1 << 30) - 1,
                cumulative_count: 1
            }
        );
        assert_eq!(cdf(&h), vec![(1_073_741, 1)]);
    }

    #[test]
    fn reset_clears_counts() {
        let mut h = redis_histogram();
        h.record(5);
        h.reset();
        assert_eq!(h.total_count(), 0);
        assert_eq!(h.value_at_percentile(50.0), 0);
        assert_eq!(h.min(), i64::MAX);
    }
}

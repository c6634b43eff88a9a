//! ASCII sparklines (Redis's sparkline.c), as LATENCY GRAPH draws them:
//! a sequence of samples becomes `rows` lines of characters, each row
//! resolving three levels (`_-\`` or, filled, `_o#` with `|` below the
//! curve), followed by the samples' labels written vertically, one
//! character per line. Sequences longer than the width wrap into several
//! graphs separated by an empty line.

/// The characters of one row, from low to high.
const CHARSET: &[u8] = b"_-`";
/// The same when the area under the curve is filled.
const CHARSET_FILL: &[u8] = b"_o#";
/// Empty lines between the graph and its labels.
const LABEL_MARGIN_TOP: usize = 1;

/// How a sequence is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// Fill the area under the curve (`SPARKLINE_FILL`).
    pub fill: bool,
    /// Scale the values logarithmically (`SPARKLINE_LOG_SCALE`).
    pub log_scale: bool,
}

struct Sample {
    value: f64,
    label: Option<Vec<u8>>,
}

/// Samples to draw, with their range.
#[derive(Default)]
pub struct Sequence {
    samples: Vec<Sample>,
    min: f64,
    max: f64,
    labels: usize,
}

impl Sequence {
    pub fn new() -> Sequence {
        Sequence::default()
    }

    /// Append a sample; an empty label is no label.
    pub fn add(&mut self, value: f64, label: &str) {
        if self.samples.is_empty() {
            self.min = value;
            self.max = value;
        } else if value < self.min {
            self.min = value;
        } else if value > self.max {
            self.max = value;
        }
        let label = (!label.is_empty()).then(|| label.as_bytes().to_vec());
        if label.is_some() {
            self.labels += 1;
        }
        self.samples.push(Sample { value, label });
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Append the drawing of the sequence to `out`, `columns` samples per
    /// graph and `rows` rows of characters per graph (`sparklineRender`).
    pub fn render(&self, out: &mut Vec<u8>, columns: usize, rows: usize, style: Style) {
        let columns = columns.max(1);
        let mut offset = 0;
        while offset < self.samples.len() {
            let len = (self.samples.len() - offset).min(columns);
            if offset != 0 {
                out.push(b'\n');
            }
            self.render_range(out, rows, offset, len, style);
            offset += columns;
        }
    }

    /// One graph: samples `offset..offset+len` (`sparklineRenderRange`).
    fn render_range(
        &self,
        out: &mut Vec<u8>,
        rows: usize,
        offset: usize,
        len: usize,
        style: Style,
    ) {
        let charset = if style.fill { CHARSET_FILL } else { CHARSET };
        let charset_len = CHARSET.len() as i64;
        let mut relmax = self.max - self.min;
        if style.log_scale {
            relmax = (relmax + 1.0).ln();
        } else if relmax == 0.0 {
            relmax = 1.0;
        }
        let steps = charset_len * rows as i64;
        let mut chars = vec![b' '; len];
        let mut row = 0usize;
        loop {
            let mut more = false;
            chars.fill(b' ');
            for (j, sample) in self.samples[offset..offset + len].iter().enumerate() {
                if row < rows {
                    let mut relval = sample.value - self.min;
                    if style.log_scale {
                        relval = (relval + 1.0).ln();
                    }
                    // C's `(int)(relval*steps)/relmax`, stored in an int.
                    let step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
                    let step = step.clamp(0, steps - 1);
                    let charidx = step - (rows - row - 1) as i64 * charset_len;
                    more = true;
                    if (0..charset_len).contains(&charidx) {
                        chars[j] = charset[charidx as usize];
                    } else if style.fill && charidx >= charset_len {
                        chars[j] = b'|';
                    }
                } else {
                    // The empty line between the graph and the labels.
                    if self.labels > 0 && row - rows < LABEL_MARGIN_TOP {
                        more = true;
                        break;
                    }
                    if let Some(label) = &sample.label {
                        let label_char = row - rows - LABEL_MARGIN_TOP;
                        if let Some(&ch) = label.get(label_char) {
                            more = true;
                            chars[j] = ch;
                        }
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.extend_from_slice(&chars);
            out.push(b'\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(seq: &Sequence, columns: usize, style: Style) -> String {
        let mut out = Vec::new();
        seq.render(&mut out, columns, 4, style);
        String::from_utf8(out).unwrap()
    }

    const FILL: Style = Style {
        fill: true,
        log_scale: false,
    };

    // Expected drawings were printed by Redis's sparkline.c.

    #[test]
    fn filled_graph_with_labels() {
        let mut seq = Sequence::new();
        for (v, l) in [(10.0, "3s"), (20.0, "2s"), (30.0, "1s"), (60.0, "0s")] {
            seq.add(v, l);
        }
        assert_eq!(
            draw(&seq, 80, FILL),
            "   #\n   |\n  o|\n_#||\n    \n3210\nssss\n"
        );
    }

    #[test]
    fn unfilled_graph_without_labels() {
        let mut seq = Sequence::new();
        for v in [1.0, 5.0, 2.0, 9.0, 4.0] {
            seq.add(v, "");
        }
        assert_eq!(
            draw(&seq, 80, Style::default()),
            "   ` \n _   \n    -\n_ -  \n"
        );
    }

    #[test]
    fn equal_values_sit_at_the_bottom() {
        let mut seq = Sequence::new();
        seq.add(7.0, "a");
        seq.add(7.0, "bc");
        assert_eq!(draw(&seq, 80, FILL), "  \n  \n  \n__\n  \nab\n c\n");
    }

    #[test]
    fn long_sequences_wrap() {
        let mut seq = Sequence::new();
        for v in 0..5 {
            seq.add(v as f64, "");
        }
        assert_eq!(
            draw(&seq, 3, FILL),
            "   \n  _\n _|\n_||\n\n_#\n||\n||\n||\n"
        );
    }

    #[test]
    fn log_scale() {
        let mut seq = Sequence::new();
        for v in [0.0, 10.0, 100.0, 1000.0] {
            seq.add(v, "");
        }
        let style = Style {
            fill: false,
            log_scale: true,
        };
        assert_eq!(draw(&seq, 80, style), "   `\n  - \n -  \n_   \n");
    }
}

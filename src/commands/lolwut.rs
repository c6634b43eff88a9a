//! LOLWUT: the version line and the computer art of Redis's lolwut.c,
//! lolwut5.c and lolwut6.c, drawn the same way (the same canvas, the same
//! single- and double-precision steps, the same Braille and ANSI output),
//! so every picture that does not depend on the random generator is
//! byte-identical to Redis's, and the random ones are drawn from the same
//! distributions.

use super::*;

/// A random integer in Redis's `rand()` range, 0..=RAND_MAX (2^31 - 1).
fn rand31(c: &mut Ctx) -> i32 {
    (c.srv.rng.next_u64() >> 33) as i32
}

const RAND_MAX: f32 = i32::MAX as f32;

/// `LOLWUT [VERSION version] [art arguments…]`
pub fn lolwut(c: &mut Ctx, argv: &[&[u8]]) {
    let mut args = &argv[1..];
    // Redis formats the asked version as "%u.0.0" of the number cast to
    // unsigned int and picks the art by its first characters: only 5 and 6
    // have one; any other version (and the default, this server's own)
    // gets the version line.
    let mut version = crate::REDIS_VERSION.split('.').next().unwrap_or("");
    let asked;
    if args.len() >= 2 && eq_ic(args[0], "version") {
        let v = match arg_i64(args[1]) {
            Ok(v) => v,
            Err(e) => return c.cl.reply.error(e),
        };
        asked = (v as u32).to_string();
        version = &asked;
        args = &args[2..];
    }
    match version {
        "5" => schotter(c, args),
        "6" => skyline(c, args),
        _ => {
            let text = format!("Redis ver. {}\n", crate::REDIS_VERSION);
            c.cl.reply.verbatim(text.as_bytes());
        }
    }
}

/// The art's numeric arguments in order, each replacing its default, as
/// Redis's getLongFromObjectOrReply reads them (extra arguments ignored).
fn numeric_args(args: &[&[u8]], defaults: &mut [i64]) -> Result<(), &'static str> {
    for (d, a) in defaults.iter_mut().zip(args) {
        *d = arg_i64(a)?;
    }
    Ok(())
}

/// Redis's lwCanvas: one byte per pixel, its colour.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, bg: u8) -> Canvas {
        let len = width.max(0) as usize * height.max(0) as usize;
        Canvas {
            width,
            height,
            pixels: vec![bg; len],
        }
    }

    fn draw(&mut self, x: i32, y: i32, color: u8) {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return;
        }
        self.pixels[(x + y * self.width) as usize] = color;
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return 0;
        }
        self.pixels[(x + y * self.width) as usize]
    }

    /// Bresenham's line, as lwDrawLine.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.draw(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred on (x, y), turned by `angle`, as
    /// lwDrawSquare computes it (float variables, double arithmetic).
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // lolwut5.c's truncated constant, kept so the rounding matches.
        #[allow(clippy::approx_constant)]
        let size = (size as f64 / 1.4142135623) as f32;
        let size = (size as f64).round() as f32;
        let mut px = [0i32; 4];
        let mut py = [0i32; 4];
        let mut k = (std::f64::consts::PI / 4.0 + angle as f64) as f32;
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

/// `LOLWUT VERSION 5 [columns] [squares per row] [squares per column]`:
/// Georg Nees's "Schotter" in Braille characters.
fn schotter(c: &mut Ctx, args: &[&[u8]]) {
    let mut n = [66, 8, 12];
    if let Err(e) = numeric_args(args, &mut n) {
        return c.cl.reply.error(e);
    }
    let cols = n[0].clamp(1, 1000) as i32;
    let per_row = n[1].clamp(1, 200) as i32;
    let per_col = n[2].clamp(1, 200) as i32;

    let canvas_width = cols * 2;
    let padding = if canvas_width > 4 { 2 } else { 0 };
    let side = (canvas_width - padding * 2) as f32 / per_row as f32;
    let canvas_height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(canvas_width, canvas_height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            // Lower rows are turned and moved more and more at random.
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [0.0f32; 3];
                for v in r.iter_mut() {
                    *v = rand31(c) as f32 / RAND_MAX / per_col as f32 * y as f32;
                }
                for v in r.iter_mut() {
                    if rand31(c) % 2 == 1 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }

    // Each character is a Braille cell of 2×4 pixels (U+2800 + the dots).
    let mut text = Vec::new();
    let mut y = 0;
    while y < canvas.height {
        let mut x = 0;
        while x < canvas.width {
            let dots = [
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 1),
                (1, 2),
                (0, 3),
                (1, 3),
            ];
            let mut byte = 0u32;
            for (bit, (dx, dy)) in dots.iter().enumerate() {
                if canvas.get(x + dx, y + dy) != 0 {
                    byte |= 1 << bit;
                }
            }
            let code = 0x2800 + byte;
            text.push(0xE0 | (code >> 12) as u8);
            text.push(0x80 | ((code >> 6) & 0x3F) as u8);
            text.push(0x80 | (code & 0x3F) as u8);
            x += 2;
        }
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
        y += 4;
    }
    text.extend_from_slice(b"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.extend_from_slice(crate::REDIS_VERSION.as_bytes());
    text.push(b'\n');
    c.cl.reply.verbatim(&text);
}

/// One building of the skyline (Redis's struct skyscraper).
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

fn draw_skyscraper(c: &mut Ctx, canvas: &mut Canvas, s: &Skyscraper) {
    let starty = canvas.height - 1;
    let endy = starty - s.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in s.xoff..s.xoff + s.width {
            // The roof is four pixels narrower.
            if y == endy && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            if s.windows
                && x > s.xoff + 1
                && x < s.xoff + s.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (s.xoff + 1);
                let rely = y - (endy + 1);
                // Windows two pixels wide, one tall, lit at random; both
                // pixels of a window share a colour.
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (rand31(c) % 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.draw(x, y, color);
        }
        y -= 1;
    }
}

/// `LOLWUT VERSION 6 [columns] [rows]`: a city skyline in ANSI colours.
fn skyline(c: &mut Ctx, args: &[&[u8]]) {
    let mut n = [80, 20];
    if let Err(e) = numeric_args(args, &mut n) {
        return c.cl.reply.error(e);
    }
    let cols = n[0].clamp(1, 1000) as i32;
    let rows = n[1].clamp(1, 1000) as i32;
    let mut canvas = Canvas::new(cols, rows, 3);
    let h = canvas.height;

    // The background buildings, without windows, lighter ones behind.
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += rand31(c) % 8;
            let width = 10 + rand31(c) % 9;
            // C's precedence: (rand() % height) / 2, not rand() % (height / 2).
            let height = if color == 2 {
                h / 2 + (rand31(c) % h) / 2
            } else {
                h / 2 + (rand31(c) % h) / 3
            };
            let s = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            draw_skyscraper(c, &mut canvas, &s);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    // The foreground, black with lit windows.
    let mut offset = -10;
    while offset < canvas.width {
        offset += rand31(c) % 8;
        let mut width = 5 + rand31(c) % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + (rand31(c) % h) / 2;
        let s = Skyscraper {
            xoff: offset,
            width,
            height,
            windows: true,
            color: 0,
        };
        draw_skyscraper(c, &mut canvas, &s);
        offset += width + 5;
    }

    let mut text = Vec::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            // Foreground and background both set, for the same look on
            // every terminal.
            let escape: &[u8] = match canvas.get(x, y) {
                1 => b"0;90;100m",
                2 => b"0;37;47m",
                3 => b"0;97;107m",
                _ => b"0;30;40m",
            };
            text.extend_from_slice(b"\x1b[");
            text.extend_from_slice(escape);
            text.extend_from_slice(b" \x1b[0m");
        }
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
    }
    text.extend_from_slice(
        b"\nDedicated to the 8 bit game developers of past and present.\n\
          Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    text.extend_from_slice(crate::REDIS_VERSION.as_bytes());
    text.push(b'\n');
    c.cl.reply.verbatim(&text);
}

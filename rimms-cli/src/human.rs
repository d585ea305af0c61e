//! Figures for people: times in the unit that suits them with four significant digits
//! ("510 µs", not "509.99999999999994 µs"), and counts with the right plural ("1 frame").
//!
//! Every line the command prints for a person goes through here, so that the same figure
//! reads the same everywhere; JSON output keeps the exact numbers.

/// `value` with at most `digits` significant digits, trailing zeros dropped: 509.99999 → "510".
pub fn significant(value: f64, digits: u32) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    // Digits before the point; a value that rounds up to the next power of ten (999.96 at
    // four digits) is formatted with one decimal fewer, which `format!` then rounds right.
    let magnitude = value.abs().log10().floor() as i32 + 1;
    let decimals = (digits as i32 - magnitude).max(0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A duration in seconds, in s, ms, µs or ns as suits it: "74 µs", "1.018 ms", "0 s".
pub fn seconds(s: f64) -> String {
    let abs = s.abs();
    let (scale, unit) = if abs == 0.0 || abs >= 1.0 || !abs.is_finite() {
        (1.0, "s")
    } else if abs >= 1e-3 {
        (1e3, "ms")
    } else if abs >= 1e-6 {
        (1e6, "µs")
    } else {
        (1e9, "ns")
    };
    format!("{} {unit}", significant(s * scale, 4))
}

/// "1 frame", "2 frames", "0 frames".
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A byte count exactly, and in binary units where it is large: "512 bytes", "8192 bytes
/// (8 KiB)", "104857606144 bytes (97.66 GiB)". The exact figure stays first, for scripts and
/// for sums a reader checks; the units are for reading.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let exact = count(n, "byte", "bytes");
    if n < 1024 {
        return exact;
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{exact} ({} {})", significant(value, 4), UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_a_person_writes_them() {
        assert_eq!(seconds(240.0 * 512e-6 / 256.0), "480 µs");
        assert_eq!(seconds(255.0 * 512e-6 / 256.0), "510 µs");
        assert_eq!(seconds(74e-6), "74 µs");
        assert_eq!(seconds(1.018e-3), "1.018 ms");
        assert_eq!(seconds(3.8302e-5), "38.3 µs");
        assert_eq!(seconds(0.0), "0 s");
        assert_eq!(seconds(2.5), "2.5 s");
        assert_eq!(seconds(-1.5e-4), "-150 µs");
        assert_eq!(seconds(12e-9), "12 ns");
        assert_eq!(significant(62.0, 4), "62");
        assert_eq!(significant(0.123456, 3), "0.123");
        assert_eq!(significant(12345.6, 4), "12346");
    }

    #[test]
    fn byte_counts_keep_the_exact_figure_and_add_binary_units() {
        assert_eq!(bytes(0), "0 bytes");
        assert_eq!(bytes(1), "1 byte");
        assert_eq!(bytes(1023), "1023 bytes");
        assert_eq!(bytes(8192), "8192 bytes (8 KiB)");
        assert_eq!(bytes(1536), "1536 bytes (1.5 KiB)");
        assert_eq!(bytes(3 << 20), "3145728 bytes (3 MiB)");
        assert_eq!(bytes(104_857_606_144), "104857606144 bytes (97.66 GiB)");
    }

    #[test]
    fn counts_take_the_right_plural() {
        assert_eq!(count(1, "frame", "frames"), "1 frame");
        assert_eq!(count(0, "frame", "frames"), "0 frames");
        assert_eq!(count(2, "copy", "copies"), "2 copies");
    }
}

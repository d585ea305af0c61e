//! Inputs: CEDR's text files, and the seeded generator the apps use when no files are given.
//!
//! CEDR stores complex data as plain text, one matrix row a line, whitespace-separated decimal
//! numbers with each complex value as a `re im` pair. [`read_complex_rows`] reads exactly that
//! and nothing looser: the wrong number of lines or of numbers on a line, a token that is not a
//! number, or a number that is not finite is an error naming the file, the line and (for a bad
//! token) the column, because a silently short or garbled radar input gives a plausible but
//! wrong answer.
//!
//! A CEDR file is opened without blocking and read only if it is a regular file of at most
//! [`MAX_CEDR_INPUT_BYTES`] (see `rimms::drivers::input_file`): a FIFO or `/dev/zero` in the
//! input folder is an error naming it, not a hang or a process that eats all memory.
//!
//! Generated inputs use [`Rng`], a xorshift64* seeded through splitmix64, with Box–Muller for
//! Gaussian noise: a dozen lines that make every run reproducible from its seed, which is all
//! the apps need from a random number generator.

use super::error::{AppError, Place};
use rimms::drivers::input_file::read_text_capped;
use rimms::Complex32;
use std::f64::consts::PI;
use std::path::Path;

/// The most bytes a CEDR input file may have: 256 MiB, 256 times the largest of CEDR's
/// inputs (`SAR_rawdata_rda.txt`, 1 MB; the pulse-Doppler pulses are 152 KiB), so that inputs
/// written with many more digits still fit and a runaway file is refused before it is read.
pub const MAX_CEDR_INPUT_BYTES: u64 = 256 << 20;

/// Reads `path` as `rows` lines of `cols` complex values each (`2 * cols` numbers, re im
/// interleaved), row-major. Blank lines are skipped; anything else that does not fit is an
/// error that says where.
pub fn read_complex_rows(
    path: &Path,
    rows: usize,
    cols: usize,
) -> Result<Vec<Complex32>, AppError> {
    let text = read_text_capped(path, MAX_CEDR_INPUT_BYTES, "CEDR input file")?;
    parse_complex_rows(path, &text, rows, cols)
}

/// [`read_complex_rows`] on text already in memory; `path` is only used in messages.
pub fn parse_complex_rows(
    path: &Path,
    text: &str,
    rows: usize,
    cols: usize,
) -> Result<Vec<Complex32>, AppError> {
    let at = |line: Option<usize>, column: Option<usize>, what: String| AppError::Malformed {
        place: Place {
            path: path.to_path_buf(),
            line,
            column,
        },
        what,
    };
    let numbers_per_row = 2 * cols;
    let mut values = Vec::with_capacity(rows * cols);
    let mut data_lines = 0;
    let mut numbers = Vec::with_capacity(numbers_per_row);
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        if data_lines == rows {
            return Err(at(
                Some(line_no),
                None,
                format!("expected {rows} lines of data, found more"),
            ));
        }
        data_lines += 1;
        numbers.clear();
        for token in line.split_whitespace() {
            let number = token.parse::<f32>().ok().filter(|v| v.is_finite());
            match number {
                Some(v) => numbers.push(v),
                None => {
                    // `token` is a sub-slice of `line`, so the offset is its byte position;
                    // the column counts characters up to it (computed only on error).
                    let byte = token.as_ptr() as usize - line.as_ptr() as usize;
                    let column = line[..byte].chars().count() + 1;
                    let what = if token.parse::<f32>().is_ok() {
                        format!("`{token}` is not a finite number")
                    } else {
                        format!("`{token}` is not a number")
                    };
                    return Err(at(Some(line_no), Some(column), what));
                }
            }
        }
        if numbers.len() != numbers_per_row {
            return Err(at(
                Some(line_no),
                None,
                format!(
                    "expected {numbers_per_row} numbers ({cols} complex values as re im pairs), found {}",
                    numbers.len()
                ),
            ));
        }
        values.extend(
            numbers
                .chunks_exact(2)
                .map(|pair| Complex32::new(pair[0], pair[1])),
        );
    }
    if data_lines != rows {
        return Err(at(
            None,
            None,
            format!("expected {rows} lines of data, found {data_lines}"),
        ));
    }
    Ok(values)
}

/// A small seeded generator: xorshift64* over a splitmix64-scrambled seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`; every seed, zero included, gives a different usable stream.
    pub fn new(seed: u64) -> Rng {
        // splitmix64: spreads similar seeds apart and never yields the all-zero state twice in
        // a row; `| 1` keeps xorshift away from its fixed point at zero.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in (0, 1]: never zero, so its logarithm is finite.
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A complex Gaussian sample with standard deviation `sigma` in each component
    /// (Box–Muller: both outputs of one pair are used).
    pub fn complex_gaussian(&mut self, sigma: f64) -> (f64, f64) {
        let radius = sigma * (-2.0 * self.uniform().ln()).sqrt();
        let angle = 2.0 * PI * self.uniform();
        (radius * angle.cos(), radius * angle.sin())
    }
}

/// `e^{iφ}` in f64, rounded to complex f32 only at the end.
pub(crate) fn cis(phase: f64) -> Complex32 {
    Complex32::new(phase.cos() as f32, phase.sin() as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, rows: usize, cols: usize) -> Result<Vec<Complex32>, AppError> {
        parse_complex_rows(Path::new("in.txt"), text, rows, cols)
    }

    #[test]
    fn reads_pairs_row_by_row_and_skips_blank_lines() {
        let v = parse("1 2 3 4\n\n\t5 6\t7 8  \n\n", 2, 2).expect("valid");
        let want: Vec<Complex32> = [(1., 2.), (3., 4.), (5., 6.), (7., 8.)]
            .iter()
            .map(|&(r, i)| Complex32::new(r, i))
            .collect();
        assert_eq!(v, want);
    }

    #[test]
    fn a_bad_token_is_named_with_its_line_and_column() {
        let err = parse("1 2 3 4\n1 2 x3 4\n", 2, 2).unwrap_err();
        assert_eq!(err.to_string(), "in.txt:2:5: `x3` is not a number");
        let err = parse("1 2 3 4\n1 NaN 3 4\n", 2, 2).unwrap_err();
        assert_eq!(err.to_string(), "in.txt:2:3: `NaN` is not a finite number");
    }

    #[test]
    fn wrong_counts_name_the_line_or_the_file() {
        let err = parse("1 2 3 4\n1 2 3\n", 2, 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "in.txt:2: expected 4 numbers (2 complex values as re im pairs), found 3"
        );
        let err = parse("1 2 3 4\n", 2, 2).unwrap_err();
        assert_eq!(err.to_string(), "in.txt: expected 2 lines of data, found 1");
        let err = parse("1 2 3 4\n1 2 3 4\n\n1 2 3 4\n", 2, 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "in.txt:4: expected 2 lines of data, found more"
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let err = read_complex_rows(Path::new("/nonexistent/rimms/x.txt"), 1, 1).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot read /nonexistent/rimms/x.txt: "),
            "{err}"
        );
    }

    #[test]
    fn a_file_past_the_cap_is_refused_unread() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("huge.txt");
        // Sparse: no disk used, and refused by its size before a byte is read.
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(MAX_CEDR_INPUT_BYTES + 1))
            .expect("sparse file");
        let err = read_complex_rows(&path, 1, 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is larger than the 256 MiB a CEDR input file may be",
                path.display()
            )
        );
    }

    #[test]
    fn gaussian_noise_has_the_asked_spread_and_seeds_differ() {
        let mut rng = Rng::new(7);
        let n = 20_000;
        let samples: Vec<(f64, f64)> = (0..n).map(|_| rng.complex_gaussian(0.5)).collect();
        let mean = samples.iter().map(|s| s.0 + s.1).sum::<f64>() / (2 * n) as f64;
        let var = samples.iter().map(|s| s.0 * s.0 + s.1 * s.1).sum::<f64>() / (2 * n) as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.02, "sigma {}", var.sqrt());
        assert_ne!(Rng::new(0).next_u64(), Rng::new(1).next_u64());
        assert_eq!(Rng::new(3).next_u64(), Rng::new(3).next_u64());
    }
}

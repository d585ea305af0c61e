//! What each device of a runtime can run: which APIs have an implementation for it, which
//! FFT sizes it transforms and which ZIP operations it does, up to what length.
//!
//! `of_devices` makes that report for `Runtime::capabilities`: it walks the devices and the
//! registry; each built-in's limits come from the probe in its home (`builtins::fft`,
//! `builtins::fft_in_place`, `builtins::zip`).
//!
//! Nothing here is a second description of the devices: APIs come from the kernel registry
//! (the same lookup a call makes), and limits from the `accepts` checks of the device's `fft`,
//! `fft_in_place` and `zip` implementations (the same checks a call passes before anything
//! moves), probed over the sizes a call could ask for. So the report cannot drift from what
//! calls do, which a test checks.

use super::builtins;
use super::registry::registry;
use super::{Refusal, ZipOp};
use crate::hal::Device;
use crate::machine::Shared;
use std::fmt;

/// The largest FFT size probed: 2^24 points.
pub const FFT_PROBE_MAX_LOG2: u32 = 24;

/// ZIP lengths are probed up to this many elements; a device that takes this many has no
/// limit worth reporting (it splits longer calls itself).
pub const ZIP_PROBE_MAX: usize = 1 << 30;

/// What one device can run. [`Runtime::capabilities`](crate::Runtime::capabilities) gives one per device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The device.
    pub device: Device,
    /// The memory space its kernels use.
    pub space: String,
    /// The APIs implemented for it (built-in and user-declared), by name, sorted.
    pub apis: Vec<&'static str>,
    /// The FFT sizes it transforms (powers of two from 2 to 2^[`FFT_PROBE_MAX_LOG2`]); empty
    /// when it has no `fft`.
    pub fft_points: Vec<usize>,
    /// Per ZIP operation, what it does with it; empty when it has no `zip`.
    pub zip: Vec<(ZipOp, ZipSupport)>,
}

/// How a device takes one ZIP operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZipSupport {
    /// Runs it on up to `max_elements` elements per call (`None`: no limit).
    Yes {
        /// The longest call it takes, if it has a limit below [`ZIP_PROBE_MAX`].
        max_elements: Option<usize>,
    },
    /// Refuses it, saying why (the core lacks the operation).
    No(String),
}

impl Capabilities {
    /// Whether the API named `api` runs on this device.
    pub fn has(&self, api: &str) -> bool {
        self.apis.contains(&api)
    }
}

/// What each device of `shared` can run: `Runtime::capabilities`.
pub(crate) fn of_devices(shared: &Shared) -> Vec<Capabilities> {
    let reg = registry();
    shared
        .device_entries()
        .iter()
        .map(|entry| {
            let (kind, forms) = (entry.device().kind(), entry.forms());
            let mut apis: Vec<&'static str> = reg
                .apis()
                .iter()
                .enumerate()
                .filter(|(i, _)| reg.implementation(*i, kind, forms).is_some())
                .map(|(_, a)| a.name())
                .collect();
            apis.sort_unstable();
            // Each built-in's home probes its own limits.
            let fft_points = builtins::fft::sizes_taken(entry, &apis);
            let in_place_points = builtins::fft_in_place::sizes_taken(entry, &apis);
            let mut zip = builtins::zip::support(entry, &apis);
            // An implementation the device's checks refuse whatever the size or
            // operation (an FPGA's FFT core asked for a ZIP) does not run there.
            if fft_points.is_empty() {
                apis.retain(|a| *a != "fft");
            }
            if in_place_points.is_empty() {
                apis.retain(|a| *a != "fft_in_place");
            }
            if !zip.iter().any(|(_, s)| matches!(s, ZipSupport::Yes { .. })) {
                // `zip_rows` is a ZIP row by row: where no ZIP runs, neither does it (an
                // FPGA's FFT core).
                apis.retain(|a| *a != "zip" && *a != "zip_rows");
                zip.clear();
            }
            Capabilities {
                device: entry.device(),
                space: shared.memory().space_name(entry.space()).to_string(),
                apis,
                fft_points,
                zip,
            }
        })
        .collect()
}

/// The support a `check` of lengths reports: refused at one element, or the longest length
/// it takes (found by bisection, since every check accepts all lengths up to its limit).
pub(crate) fn zip_support(check: impl Fn(usize) -> Result<(), Refusal>) -> ZipSupport {
    if let Err(why) = check(1) {
        return ZipSupport::No(why.to_string());
    }
    if check(ZIP_PROBE_MAX).is_ok() {
        return ZipSupport::Yes { max_elements: None };
    }
    // check(lo) holds, check(hi) does not.
    let (mut lo, mut hi) = (1, ZIP_PROBE_MAX);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if check(mid).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    ZipSupport::Yes {
        max_elements: Some(lo),
    }
}

/// Sizes as ranges of consecutive powers of two: `2..=2048`, or a list where there are gaps.
fn fft_sizes(points: &[usize]) -> String {
    let consecutive = points.windows(2).all(|w| w[1] == 2 * w[0]);
    match (points.first(), points.last()) {
        (None, _) | (_, None) => "none".to_string(),
        (Some(a), Some(b)) if consecutive && *b == 1 << FFT_PROBE_MAX_LOG2 => {
            format!("any power of two from {a} points")
        }
        (Some(a), Some(b)) if consecutive && a != b => format!("{a}..={b} points (powers of two)"),
        _ => points
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

impl fmt::Display for Capabilities {
    /// Three lines per device: its APIs, its FFT sizes and its ZIP operations.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} (memory: {})", self.device, self.space)?;
        writeln!(f, "  apis: {}", self.apis.join(", "))?;
        if self.has("fft") {
            writeln!(f, "  fft:  {}", fft_sizes(&self.fft_points))?;
        }
        if self.has("zip") {
            let ops: Vec<String> = self
                .zip
                .iter()
                .map(|(op, support)| match support {
                    ZipSupport::Yes { max_elements: None } => format!("{op:?}"),
                    ZipSupport::Yes {
                        max_elements: Some(max),
                    } => format!("{op:?} (≤ {max} elements)"),
                    ZipSupport::No(_) => format!("no {op:?}"),
                })
                .collect();
            writeln!(f, "  zip:  {}", ops.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zip_support_finds_the_exact_limit() {
        for limit in [1, 2, 1000, 65_536, ZIP_PROBE_MAX - 1] {
            let got = zip_support(|n| {
                if n <= limit {
                    Ok(())
                } else {
                    Err(Refusal::new("long"))
                }
            });
            assert_eq!(
                got,
                ZipSupport::Yes {
                    max_elements: Some(limit)
                }
            );
        }
        assert_eq!(
            zip_support(|_| Ok(())),
            ZipSupport::Yes { max_elements: None }
        );
        assert_eq!(
            zip_support(|_| Err(Refusal::new("no such op"))),
            ZipSupport::No("no such op".into())
        );
    }

    #[test]
    fn fft_sizes_read_as_ranges_or_lists() {
        assert_eq!(fft_sizes(&[2, 4, 8]), "2..=8 points (powers of two)");
        assert_eq!(fft_sizes(&[64]), "64");
        assert_eq!(fft_sizes(&[2, 8]), "2, 8");
        assert_eq!(fft_sizes(&[]), "none");
        let all: Vec<usize> = (1..=FFT_PROBE_MAX_LOG2).map(|l| 1 << l).collect();
        assert_eq!(fft_sizes(&all), "any power of two from 2 points");
    }
}

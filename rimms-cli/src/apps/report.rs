//! What a run of an app reports: its result, the frame times, and the bytes, copies and
//! allocations it cost, in one shape for every app and mode so that a table or a JSON line
//! can be made from any of them.
//!
//! The apps depend on this module and it on none of them: a [`Run`] is generic over the
//! result, and the one type that names every app's result, [`AppResult`](super::AppResult),
//! lives with the dispatch over apps in the parent module.

use super::mapping::Mapping;
use super::{App, Mode};
use serde::Serialize;
use std::time::Duration;

/// Copies over one link (one direction between two memory spaces).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Link {
    /// Source space ("host", "sim0", …).
    pub from: String,
    /// Destination space.
    pub to: String,
    /// Number of copies.
    pub copies: u64,
    /// Bytes copied.
    pub bytes: u64,
}

/// What eviction did in one memory space whose pool ran full.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Eviction {
    /// The space ("sim0", "fpga0", …).
    pub space: String,
    /// Blocks evicted.
    pub evictions: u64,
    /// Bytes of valid copies dropped (another space held them too).
    pub dropped_bytes: u64,
    /// Bytes of last copies written back before their block was freed.
    pub written_back_bytes: u64,
}

/// Copies made into one memory space ahead of the calls that needed them
/// (`RuntimeBuilder::prefetch`), and what became of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Prefetched {
    /// The space ("sim0", "host", …).
    pub space: String,
    /// Bytes copied ahead.
    pub bytes: u64,
    /// Of those, bytes a read there used.
    pub used_bytes: u64,
    /// Of those, bytes overwritten, evicted or freed before any read there.
    pub wasted_bytes: u64,
}

/// One run of an app: `frames` frames in one mode on one mapping.
#[derive(Clone, Debug)]
pub struct Run<R> {
    /// The app.
    pub app: App,
    /// Baseline, rimms or native.
    pub mode: Mode,
    /// Where the steps ran.
    pub mapping: Mapping,
    /// Wall time of each frame, in order: host input, kernels, result on the host.
    pub frame_times: Vec<Duration>,
    /// Links that carried anything over the whole run (setup and every frame).
    pub links: Vec<Link>,
    /// Memory blocks allocated over the whole run, in every space.
    pub allocations: u64,
    /// Spaces that evicted blocks over the run (a pool too small for the working set).
    pub evictions: Vec<Eviction>,
    /// Modelled time over the timed frames, by term of the virtual clock (all zero where
    /// nothing is modelled): where an FPGA row's modelled time goes.
    pub modelled: [Duration; rimms::drivers::vclock::TERMS],
    /// Merged calls that did not fit (memory pressure) and ran again one call a row.
    pub merge_retries: u64,
    /// Spaces that received copies ahead of their calls over the run.
    pub prefetches: Vec<Prefetched>,
    /// The last frame's result.
    pub result: R,
}

impl<R> Run<R> {
    /// Frames run.
    pub fn frames(&self) -> usize {
        self.frame_times.len()
    }

    /// The median frame time (the mean of the middle two for an even count).
    pub fn median(&self) -> Duration {
        let mut times = self.frame_times.clone();
        times.sort();
        let n = times.len();
        match n {
            0 => Duration::ZERO,
            _ if n % 2 == 1 => times[n / 2],
            _ => (times[n / 2 - 1] + times[n / 2]) / 2,
        }
    }

    /// Bytes copied from space `from` to space `to` (0 if none).
    pub fn bytes(&self, from: &str, to: &str) -> u64 {
        self.links
            .iter()
            .filter(|l| l.from == from && l.to == to)
            .map(|l| l.bytes)
            .sum()
    }

    /// Bytes copied over every link.
    pub fn total_bytes(&self) -> u64 {
        self.links.iter().map(|l| l.bytes).sum()
    }

    /// The same run with its result changed by `f`.
    pub fn map<S>(self, f: impl FnOnce(R) -> S) -> Run<S> {
        Run {
            app: self.app,
            mode: self.mode,
            mapping: self.mapping,
            frame_times: self.frame_times,
            links: self.links,
            allocations: self.allocations,
            evictions: self.evictions,
            modelled: self.modelled,
            merge_retries: self.merge_retries,
            prefetches: self.prefetches,
            result: f(self.result),
        }
    }
}

#[derive(Serialize)]
struct RunJson<'a, R> {
    app: &'static str,
    mode: &'static str,
    map: &'static str,
    frames: usize,
    median_ms: f64,
    links: &'a [Link],
    allocations: u64,
    evictions: &'a [Eviction],
    #[serde(skip_serializing_if = "is_zero")]
    merge_retries: u64,
    #[serde(skip_serializing_if = "<[Prefetched]>::is_empty")]
    prefetches: &'a [Prefetched],
    result: &'a R,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl<R: Serialize> Run<R> {
    /// The run as one JSON object: `app`, `mode`, `map`, `frames`, `median_ms`, `links`
    /// (`{from, to, copies, bytes}`), `allocations`, `evictions` (`{space, evictions,
    /// dropped_bytes, written_back_bytes}` for each space that evicted), `merge_retries` (merged
    /// calls run again one call a row, where any were), `prefetches` (`{space, bytes,
    /// used_bytes, wasted_bytes}` for each space that received copies ahead of their calls,
    /// where any did) and `result`.
    pub fn to_json(&self) -> String {
        let json = RunJson {
            app: self.app.name(),
            mode: self.mode.name(),
            map: self.mapping.name(),
            frames: self.frames(),
            median_ms: self.median().as_secs_f64() * 1e3,
            links: &self.links,
            allocations: self.allocations,
            evictions: &self.evictions,
            merge_retries: self.merge_retries,
            prefetches: &self.prefetches,
            result: &self.result,
        };
        // Every field is a string, a number or a list of plain structs, all of which
        // serde_json writes without fail (a non-finite float becomes `null`); the fallback
        // would only stand for a bug in a result type.
        serde_json::to_string(&json)
            .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string())
    }
}

/// The result of the small chains (2FFT, FZF, zip3x): a checksum of the output, Σ|y|, so the
/// modes can be compared.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Checksum {
    /// Σ|y| over the last frame's output, in f64.
    pub checksum: f64,
}

//! One `tracing` event per transfer, with its reason, when `RIMMS_TRACE=1` (or the builder's
//! `trace(true)`) is set. Off, it costs one branch on a flag in the slow path.

use std::fmt;
use std::ops::Range;

/// Why bytes moved.
#[derive(Clone, Debug)]
pub(crate) enum Reason {
    /// Argument `arg` of a kernel call of `api`.
    Kernel {
        api: &'static str,
        arg: &'static str,
    },
    /// Baseline mode's staging of a kernel argument in or out of the device.
    Baseline {
        api: &'static str,
        arg: &'static str,
    },
    /// A host view (`host()`, `host_mut()`, `host_write()`).
    Host,
    /// `prefetch()`.
    Prefetch,
    /// Gathering before a change of fragment size.
    Refragment,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Kernel { api, arg } => write!(f, "kernel {api}, argument {arg}"),
            Reason::Baseline { api, arg } => write!(f, "baseline staging of {api}, argument {arg}"),
            Reason::Host => f.write_str("host view"),
            Reason::Prefetch => f.write_str("prefetch"),
            Reason::Refragment => f.write_str("fragment size change"),
        }
    }
}

pub(crate) fn trace_transfer(
    from: &str,
    to: &str,
    bytes: usize,
    frags: &Range<usize>,
    reason: &Reason,
) {
    tracing::info!(
        target: "rimms::transfer",
        from,
        to,
        bytes,
        first_fragment = frags.start,
        fragments = frags.end - frags.start,
        reason = %reason,
        "transfer"
    );
}

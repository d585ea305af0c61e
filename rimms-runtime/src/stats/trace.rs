//! One `tracing` event per transfer, with its reason, when `RIMMS_TRACE=1` (or the builder's
//! `trace(true)`) is set. Off, it costs one branch on a flag in the slow path.
//!
//! The variable takes the usual spellings of a switch (`1`, `true`, `yes`, `on` and their
//! opposites, any case); anything else is an error, because a switch that silently stays off
//! for `RIMMS_TRACE=ture` looks exactly like a program that moves nothing.

use super::after_locks;
use crate::hal::{env_switch, NotASwitch};
use std::fmt;
use std::ops::Range;

/// The environment variable that turns the transfer events on.
pub const TRACE_ENV: &str = "RIMMS_TRACE";

/// Whether `RIMMS_TRACE` asks for transfer events: `Ok(false)` when unset, an error naming
/// the variable and the accepted values when it holds something else.
pub(crate) fn enabled_from_env() -> Result<bool, NotASwitch> {
    env_switch(TRACE_ENV)
}

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
    /// Writing back the last valid copy held by a block evicted from a full pool.
    WriteBack {
        /// Bytes the allocation that did not fit asked for.
        needed: usize,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Kernel { api, arg } => write!(f, "kernel {api}, argument {arg}"),
            Reason::Baseline { api, arg } => write!(f, "baseline staging of {api}, argument {arg}"),
            Reason::Host => f.write_str("host view"),
            Reason::Prefetch => f.write_str("prefetch"),
            Reason::Refragment => f.write_str("fragment size change"),
            Reason::WriteBack { needed } => write!(
                f,
                "write-back before eviction (pool full: {needed} bytes needed)"
            ),
        }
    }
}

/// One event per transfer; under a buffer's lock it waits until the lock is released
/// (`after_locks`).
pub(crate) fn trace_transfer(
    from: &str,
    to: &str,
    bytes: usize,
    frags: &Range<usize>,
    reason: &Reason,
) {
    let (from, to, frags, reason) = (
        from.to_owned(),
        to.to_owned(),
        frags.clone(),
        reason.clone(),
    );
    after_locks::emit(move || {
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
    });
}

/// One event per evicted block: where from, what was dropped and written back, and why.
/// Emitted once the evicting thread holds no buffer's lock (`after_locks`).
pub(crate) fn trace_eviction(
    space: &str,
    dropped: usize,
    written_back: usize,
    to: Option<&str>,
    needed: usize,
) {
    let (space, to) = (space.to_owned(), to.unwrap_or("-").to_owned());
    after_locks::emit(move || {
        tracing::info!(
            target: "rimms::evict",
            space,
            dropped_bytes = dropped,
            written_back_bytes = written_back,
            written_back_to = to,
            reason = %format_args!("pool full: {needed} bytes needed"),
            "evict"
        );
    });
}

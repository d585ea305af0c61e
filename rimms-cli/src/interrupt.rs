//! Ctrl-C (SIGINT) and SIGTERM end `rimms run` and `rimms bench` between frames, so that
//! their runtimes are dropped and take their files with them (the stats page
//! `$TMPDIR/rimms-stats-<pid>`, the FPGA emulator's `$TMPDIR/rimms-fpga-emu…` folder) rather
//! than the signal ending the process where it stands. The process then ends by the same
//! signal, so a shell sees what it always saw (status 130 or 143). A second signal ends it
//! at once, as before.

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked the command to stop, or 0.
static REQUESTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(number: std::ffi::c_int) {
    // Only an atomic store: all a signal handler may safely do.
    REQUESTED.store(number, Ordering::Relaxed);
}

/// Catches SIGINT and SIGTERM from now on, each once (`SA_RESETHAND`: the next one has its
/// default effect). A signal the process was started ignoring (SIGINT under `nohup` or `cmd
/// &`) stays ignored.
pub fn install() -> Result<(), String> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESETHAND | SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: `on_signal` only stores to an atomic, which is async-signal-safe, and the
        // action replaced is the default or an ignored disposition, no other handler.
        let old = unsafe { signal::sigaction(sig, &action) }
            .map_err(|e| format!("cannot catch {sig}: {e}"))?;
        if matches!(old.handler(), SigHandler::SigIgn) {
            // SAFETY: puts back the disposition the process started with.
            unsafe { signal::sigaction(sig, &old) }
                .map_err(|e| format!("cannot restore {sig}: {e}"))?;
        }
    }
    Ok(())
}

/// The signal that asked the command to stop, if one did.
pub fn requested() -> Option<Signal> {
    Signal::try_from(REQUESTED.load(Ordering::Relaxed)).ok()
}

/// Ends the process by `sig`, whose default effect its handler restored when it ran.
pub fn end_by(sig: Signal) -> ! {
    let _ = signal::raise(sig);
    // Not reached for SIGINT and SIGTERM, whose default ends the process; the exit status
    // a shell would give for a death by the signal, in case it is.
    std::process::exit(128 + sig as i32)
}

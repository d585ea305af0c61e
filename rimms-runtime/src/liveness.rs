//! For unit tests that prove a wait makes progress: the scenario runs on a thread of its own
//! and a deadlock fails the test by name instead of hanging the whole run.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

/// A liveness bound, far above any thread hand-off: a deadlock fails the test with this
/// instead of hanging it. Not a speed assertion.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// Runs `scenario` on a thread of its own and returns its value, or fails naming `deadlock`
/// when it has not finished within [`PATIENCE`] (the stuck thread is leaked).
pub(crate) fn finishes<T: Send + 'static>(
    deadlock: &str,
    scenario: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, outcome) = channel();
    std::thread::spawn(move || {
        let _ = done.send(catch_unwind(AssertUnwindSafe(scenario)));
    });
    match outcome.recv_timeout(PATIENCE) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => resume_unwind(payload),
        Err(RecvTimeoutError::Timeout) => panic!("deadlock: {deadlock}"),
        Err(RecvTimeoutError::Disconnected) => unreachable!("the scenario always sends"),
    }
}

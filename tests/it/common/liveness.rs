//! Liveness bounds: a scenario that might deadlock runs on a thread of its own, and the test
//! waits for it with a timeout, so a deadlock fails the test with its name instead of hanging
//! the suite (the stuck thread is leaked).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

/// How long a scenario may take: a liveness bound far above any scheduling delay, not a
/// speed assertion.
pub const LIVENESS: Duration = Duration::from_secs(60);

/// Runs `scenario` on a thread of its own and returns its value, resumes its panic, or fails
/// naming `deadlock` if it has not finished within [`LIVENESS`].
pub fn finishes<T: Send + 'static>(
    deadlock: &str,
    scenario: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, outcome) = channel();
    std::thread::Builder::new()
        .name(format!("scenario: {deadlock}"))
        .spawn(move || {
            // The receiver is gone only once the test gave up on this thread.
            let _ = done.send(catch_unwind(AssertUnwindSafe(scenario)));
        })
        .expect("the scenario's thread");
    match outcome.recv_timeout(LIVENESS) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => resume_unwind(payload),
        Err(RecvTimeoutError::Timeout) => {
            panic!("deadlock: {deadlock} did not finish within {LIVENESS:?}")
        }
        Err(RecvTimeoutError::Disconnected) => unreachable!("the scenario always sends"),
    }
}

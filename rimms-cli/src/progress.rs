//! The progress bar of `rimms run` and `rimms bench`: frames done of frames to run, their
//! rate and the time left, on standard error.
//!
//! A run of many frames, or a bench of minutes, printed nothing until it ended; a bar that
//! ticked once per bench row froze its clock for seconds. This one moves once a frame and
//! redraws its clock on its own. indicatif draws it only where standard error is a terminal,
//! so pipes, files and the tests see none of it; `-q` ([`quiet`]) hides it on a terminal too.

use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by `-q`: no bar at all.
static QUIET: AtomicBool = AtomicBool::new(false);

/// No bar from now on (`-q`: only errors on standard error).
pub fn quiet() {
    QUIET.store(true, Ordering::Relaxed);
}

/// A bar for `frames` frames, already drawing on a terminal (hidden anywhere else).
pub fn frames(frames: u64) -> ProgressBar {
    if QUIET.load(Ordering::Relaxed) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(frames);
    // The template is a constant; the default style is only a fallback that never runs.
    let style = ProgressStyle::with_template(
        "{elapsed:>4} [{bar:30}] {human_pos}/{human_len} frames, {rate}, {eta} left {msg}",
    )
    .map(|s| {
        s.progress_chars("=> ").with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1} frames/s", state.per_sec());
            },
        )
    })
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    if !bar.is_hidden() {
        bar.enable_steady_tick(Duration::from_millis(250));
    }
    bar
}

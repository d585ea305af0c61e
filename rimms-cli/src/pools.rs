//! `rimms run --pool`: the smallest device pool each app runs in, for the error of a pool too
//! small.
//!
//! "memory space sim0 cannot fit 1048576 bytes" says the pool is too small but not how large
//! a pool would do, and a user trying sizes one by one should not have to bisect. The figures
//! are measured (one frame, `--map sim` and `--map fpga`, baseline and rimms mode, pools in
//! powers of two), and a test runs every app at its figure, so they cannot drift unnoticed.

use crate::apps::App;

/// The smallest device pool (`sim0=…`, `udmabuf0=…`) in which each app runs on `sim` and
/// `fpga` in baseline and rimms mode, in bytes.
pub const SMALLEST: [(App, usize); 6] = [
    (App::TwoFft, 4 << 20),
    (App::Fzf, 4 << 20),
    (App::Zip3x, 256 << 10),
    (App::Correlator, 64 << 10),
    (App::PulseDoppler, 512 << 10),
    (App::Sar, 4 << 20),
];

/// The smallest pool `app` runs in.
pub fn smallest(app: App) -> usize {
    SMALLEST
        .iter()
        .find(|(a, _)| *a == app)
        .map_or(4 << 20, |&(_, size)| size)
}

/// What to add to a pool's "cannot fit" error: the size that runs `app`, and every app's.
pub fn hint(app: App) -> String {
    let all: Vec<String> = SMALLEST
        .iter()
        .map(|&(a, size)| format!("{} {}", a.name(), unit(size)))
        .collect();
    format!(
        "{} runs with a device pool of {} or more; smallest pools per app: {}",
        app.name(),
        unit(smallest(app)),
        all.join(", ")
    )
}

/// A size as `--pool` takes it: 4MiB, 256KiB.
fn unit(size: usize) -> String {
    if size % (1 << 20) == 0 {
        format!("{}MiB", size >> 20)
    } else {
        format!("{}KiB", size >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_the_app_and_every_size_as_pool_takes_it() {
        let h = hint(App::Zip3x);
        assert!(
            h.starts_with("zip3x runs with a device pool of 256KiB or more"),
            "{h}"
        );
        assert!(
            h.contains("fzf 4MiB") && h.contains("correlator 64KiB"),
            "{h}"
        );
    }
}

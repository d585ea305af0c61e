//! The command's log on standard error: the level `-q` / `-v` ask for (`RUST_LOG` overrides),
//! without the runtime's warning per merged call that failed and ran again one by one.
//!
//! Under memory pressure (`--pool`) a merged call over many rows can fail to fit where its
//! rows one at a time do; the runtime warns and runs them singly. A run that succeeds printed
//! one warning of some 400 characters per such call, tens of them; the run's output now says
//! how many in one line (the runtime counts them: `ApiStats::merge_retries`), and `-v` still
//! shows each with its reason.

use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer;

/// Where the runtime warns of a merged call run again one by one.
const MERGE_TARGET: &str = "rimms_runtime::kernel::merge";

/// The filter for `-q` / `-v` (`verbose` counts the v's): the retries' warnings are left to
/// the run's count of them unless asked for with `-v` or more.
pub fn default_filter(quiet: bool, verbose: u8) -> String {
    match (quiet, verbose) {
        (true, _) => "error".to_string(),
        (false, 0) => format!("warn,rimms::transfer=info,{MERGE_TARGET}=error"),
        (false, 1) => "info".to_string(),
        (false, 2) => "debug".to_string(),
        (false, _) => "trace".to_string(),
    }
}

/// Sets up the log: `RUST_LOG` if set, else `default`; colour codes only where `colour`.
pub fn init(default: &str, colour: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .with_filter(filter);
    // A second subscriber (none is set elsewhere) would only lose the log, never the run.
    let _ = tracing_subscriber::registry().with(log).try_init();
}

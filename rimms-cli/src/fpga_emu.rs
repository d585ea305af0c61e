//! `rimms fpga-emu`: the register-level FPGA emulator as a process of its own, so another
//! process can drive it through its files exactly as it would drive a board.

use rimms::drivers::fpga::emulator::{config_file, run_standalone};
use rimms::drivers::fpga::{EmulatorLayout, MAX_BOARD_FILE_BYTES};
use rimms::drivers::input_file::read_text_capped;
use rimms::FpgaSource;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the emulator over files in `dir` until a file named `stop` appears there (or
/// `seconds` pass). `layout` is an emulator layout TOML; without one, the default 2-FFT +
/// 2-ZIP board with a 64 MiB u-dma-buf.
pub fn run(dir: &Path, layout: Option<&Path>, seconds: Option<u64>) -> Result<(), String> {
    let layout = match layout {
        Some(path) => {
            // A layout is a board file of the emulator's, and bounded like one.
            let text = read_text_capped(path, MAX_BOARD_FILE_BYTES, "layout file")
                .map_err(|e| e.to_string())?;
            EmulatorLayout::from_toml_str(&text, &path.display().to_string())
                .map_err(|e| e.to_string())?
        }
        None => FpgaSource::default_layout(),
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, stop_file) = (Arc::clone(&stop), dir.join("stop"));
        let limit = seconds.map(Duration::from_secs);
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop_file.exists() && limit.is_none_or(|l| started.elapsed() < l) {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::Release);
        })
    };
    // A closed stderr is no reason not to run.
    let _ = writeln!(
        std::io::stderr(),
        "FPGA emulator running; board configuration: {} (RIMMS_FPGA_BOARD={0}); create {} to stop",
        config_file(dir).display(),
        dir.join("stop").display()
    );
    let outcome = run_standalone(dir, &layout, &stop).map_err(|e| e.to_string());
    stop.store(true, Ordering::Release);
    let _ = watcher.join();
    outcome
}

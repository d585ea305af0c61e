//! `rimms fpga-emu`: the register-level FPGA emulator as a process of its own, so another
//! process can drive it through its files exactly as it would drive a board.

use crate::out_file::is_same_file;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use rimms::drivers::fpga::emulator::{config_file, run_standalone};
use rimms::drivers::fpga::{EmulatorLayout, MAX_BOARD_FILE_BYTES};
use rimms::drivers::input_file::read_text_capped;
use rimms::FpgaSource;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The file in the emulator's folder whose lock marks it as taken by a running emulator.
pub const LOCK_FILE: &str = "emulator.lock";

/// The file whose appearance stops the emulator; it is removed once the emulator has stopped,
/// so that the next one on the folder runs.
pub const STOP_FILE: &str = "stop";

/// Runs the emulator over files in `dir` until a file named `stop` appears there (or
/// `seconds` pass). `layout` is an emulator layout TOML; without one, the default 2-FFT +
/// 2-ZIP board with a 64 MiB u-dma-buf. Refuses a folder another emulator runs on.
/// `real_time` waits a timing model's modelled time out in wall time (see
/// [`EmulatorLayout::real_time`]); a layout can ask for it too.
pub fn run(
    dir: &Path,
    layout: Option<&Path>,
    seconds: Option<u64>,
    real_time: bool,
) -> Result<(), String> {
    let layout_path = layout;
    let mut layout = match layout {
        Some(path) => {
            // A layout is a board file of the emulator's, and bounded like one.
            let text = read_text_capped(path, MAX_BOARD_FILE_BYTES, "layout file")
                .map_err(|e| e.to_string())?;
            EmulatorLayout::from_toml_str(&text, &path.display().to_string())
                .map_err(|e| e.to_string())?
        }
        None => {
            let mut layout = FpgaSource::default_layout();
            layout.strict = FpgaSource::strict_from_env().map_err(|e| e.to_string())?;
            layout
        }
    };
    layout.real_time |= real_time;
    // The emulator writes its board file into `dir`; a layout that is that file (by its name
    // or a link) would be replaced by it, and the user's layout lost.
    if let Some(path) = layout_path {
        let board = config_file(dir);
        if is_same_file(path, &board) {
            return Err(format!(
                "--config {}: is the board file {} the emulator writes, which would \
                 replace it; keep the layout outside --dir or under another name",
                path.display(),
                board.display()
            ));
        }
    }
    // The emulator makes files named for the layout's buffers and cores under `dir`, and
    // creates them before the board configuration is checked: a name that is not a plain
    // file name would have it write outside `dir` first.
    if let Some(path) = layout_path {
        (layout.check_names()).map_err(|e| format!("--config {}: {e}", path.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // The board file names the device files by this folder, and its readers resolve a
    // relative path against the board file's own folder, not the directory this ran in.
    let dir = &std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    check_folder(dir)?;
    let _lock = lock(dir)?;
    let stop_file = dir.join(STOP_FILE);
    // Under the lock no emulator runs here, so a stop file is a request to one that is gone:
    // left, it would stop this one at once.
    if stop_file.exists() {
        std::fs::remove_file(&stop_file).map_err(|e| {
            format!(
                "cannot remove the old stop file {}: {e}",
                stop_file.display()
            )
        })?;
        let _ = writeln!(
            std::io::stderr(),
            "removed {}, left by an emulator that has stopped",
            stop_file.display()
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, stop_file) = (Arc::clone(&stop), stop_file.clone());
        let limit = seconds.map(Duration::from_secs);
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop.load(Ordering::Acquire)
                && !stop_file.exists()
                && limit.is_none_or(|l| started.elapsed() < l)
            {
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
        stop_file.display()
    );
    let outcome = run_standalone(dir, &layout, &stop).map_err(|e| e.to_string());
    stop.store(true, Ordering::Release);
    let _ = watcher.join();
    // The request is served; the emulator that reads it next is a new one.
    if stop_file.exists() {
        std::fs::remove_file(&stop_file)
            .map_err(|e| format!("cannot remove the stop file {}: {e}", stop_file.display()))?;
    }
    outcome
}

/// What the emulator replaces in its folder, beside its lock file: the board file (and the
/// temporary one it is written through), the stop file, and the folders of the device,
/// sysfs and register files.
const EMULATOR_ENTRIES: [&str; 6] = [
    "board.toml",
    "board.toml.tmp",
    STOP_FILE,
    "dev",
    "regs",
    "sys",
];

/// How deep below the folder the emulator writes (`sys/class/u-dma-buf/NAME/ATTR`).
const EMULATOR_DEPTH: usize = 5;

/// Refuses a folder whose files the emulator would replace but did not make, and symbolic
/// links where it writes, which would carry its writes to the files they point at.
///
/// A folder an emulator ran on holds its lock file, [`LOCK_FILE`]: there the emulator's own
/// files are replaced, as each run does. In any other folder (`--dir ~`, a project folder)
/// a `board.toml`, `stop`, `dev`, `regs` or `sys` is the user's, and is kept.
fn check_folder(dir: &Path) -> Result<(), String> {
    let lock = dir.join(LOCK_FILE);
    let ours =
        refuse_links(&lock, 0)? && std::fs::symlink_metadata(&lock).is_ok_and(|m| m.is_file());
    for entry in EMULATOR_ENTRIES {
        let path = dir.join(entry);
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        if !ours {
            return Err(format!(
                "--dir {}: holds {}, which the emulator would replace and did not make (no \
                 {LOCK_FILE} beside it); give a new or empty folder, or one an emulator ran on",
                dir.display(),
                path.display()
            ));
        }
        refuse_links(&path, 1)?;
    }
    Ok(())
}

/// Fails on a symbolic link at `path` or below it (down to [`EMULATOR_DEPTH`]); whether
/// anything is there.
fn refuse_links(path: &Path, depth: usize) -> Result<bool, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("--dir: cannot look at {}: {e}", path.display())),
    };
    if meta.is_symlink() {
        return Err(format!(
            "--dir: {} is a symbolic link; the emulator would write through it to the file it \
             points at, so it writes only to files of its own: remove the link",
            path.display()
        ));
    }
    if meta.is_dir() && depth < EMULATOR_DEPTH {
        let entries = std::fs::read_dir(path)
            .map_err(|e| format!("--dir: cannot read {}: {e}", path.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("--dir: cannot read {}: {e}", path.display()))?;
            refuse_links(&entry.path(), depth + 1)?;
        }
    }
    Ok(true)
}

/// Takes the folder's lock, held until the returned value is dropped (or the process ends,
/// however it ends): two emulators on one folder would serve the same registers.
fn lock(dir: &Path) -> Result<Flock<File>, String> {
    let path = dir.join(LOCK_FILE);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot create the lock file {}: {e}", path.display()))?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        if errno == Errno::EWOULDBLOCK {
            format!(
                "another emulator runs on {} (it holds {}); stop it first (create {}) or give another --dir",
                dir.display(),
                path.display(),
                dir.join(STOP_FILE).display()
            )
        } else {
            format!("cannot lock {}: {errno}", path.display())
        }
    })
}

//! The FPGA emulator: a register-level model of the AXI DMA and the FFT and ZIP cores.
//!
//! Machines without a board run the real driver against this model. It speaks the driver's
//! protocol through the same kinds of files a board has, laid out under one folder:
//!
//! ```text
//! <dir>/dev/<udmabuf>                        the buffer: a plain file of `size` bytes
//! <dir>/sys/class/u-dma-buf/<udmabuf>/       size, phys_addr, sync_mode, dma_coherent,
//!                                            sync_offset, sync_size, sync_direction, sync_owner
//!                                            (plain files), sync_for_cpu, sync_for_device (FIFOs)
//! <dir>/regs/<accel>.dma, <accel>.ctrl       one 4 KiB page per control block
//! <dir>/board.toml                           the BoardConfig pointing at all of the above
//! ```
//!
//! A thread (or, with [`run_standalone`], a whole process) polls the register pages. When a
//! LENGTH register is written it moves bytes as the DMA would: MM2S reads `LENGTH` bytes at SA,
//! translated from the buffer's physical address into the buffer file, and feeds them to the
//! core; the core's output goes to DA through S2MM; then Idle and IOC rise and S2MM LENGTH
//! reads the bytes received. The FFT core reads its configuration word and the ZIP core its
//! size and operation registers from the control page when a packet arrives. Soft reset,
//! halted channels (a LENGTH write while halted does nothing), zero lengths, write-1-to-clear
//! interrupt bits, error bits that only a reset clears, decode errors for addresses outside
//! every buffer, and an S2MM buffer too small for the packet (internal error) are modelled.
//!
//! Faults can be injected at run time, each for the next transfer of one accelerator
//! ([`InjectedFault`]): an error bit on either channel, a core that swallows its input and never
//! answers, a wrong received length. Writes to the sync attributes are accepted and logged
//! ([`SyncRecord`]); the trigger attributes are FIFOs, so every write is seen once, in order.
//!
//! Differences from hardware that a driver could notice, all forced by the registers being
//! ordinary shared memory (a write that stores the value already there is invisible):
//!
//! - MM2S LENGTH reads 0 once the emulator has seen the write (PG021: the written value); a
//!   halted-channel S2MM LENGTH write also reads back 0.
//! - S2MM's DA and LENGTH are taken as they stand when the MM2S transfer starts, unless a new
//!   S2MM LENGTH write was seen before; so the S2MM registers must be programmed before MM2S (the
//!   driver does; on hardware the other order works too).
//! - A write-1-to-clear store to DMASR is visible, until the emulator answers it, as the value
//!   written (e.g. `0x1000`); the driver only acts on Idle and IOC seen together, which such a
//!   value never shows.
//! - A soft reset also drops a packet the core holds (a hung core recovers).
//!
//! The emulator polls with atomic loads; when nothing happens it spins briefly, then sleeps
//! ~20 µs between polls, so an idle emulator does not hold a core.

mod cores;
mod files;
mod model;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::axi_dma::{Channel, DmaErrorBit};
use super::config::{AccelKind, BoardConfig};
use super::udmabuf::{CacheMode, SyncDirection, SyncFor, SyncMethod};
use crate::{Error, Result};

fn default_timeout_ms() -> u64 {
    200
}

/// What the emulator builds: its buffers and accelerator instances.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmulatorLayout {
    /// Poll timeout written into the generated board configuration.
    #[serde(default = "default_timeout_ms")]
    pub poll_timeout_ms: u64,
    /// The u-dma-buf devices (`[[udmabuf]]`).
    #[serde(rename = "udmabuf")]
    pub udmabufs: Vec<EmuUdmabuf>,
    /// The accelerator instances (`[[accelerator]]`).
    #[serde(rename = "accelerator", default)]
    pub accelerators: Vec<EmuAccelerator>,
}

/// One emulated u-dma-buf.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmuUdmabuf {
    /// Device name.
    pub name: String,
    /// Bytes (a multiple of 4096).
    pub size: usize,
    /// The physical address its sysfs `phys_addr` reports (4 KiB aligned).
    pub phys_addr: u64,
    /// The sync method the generated configuration asks for.
    #[serde(default)]
    pub sync: SyncMethod,
    /// The cache mode the generated configuration asks for.
    #[serde(default)]
    pub cache: CacheMode,
    /// Put the sysfs folder under the old `class/udmabuf` instead of `class/u-dma-buf`.
    #[serde(default)]
    pub old_class_path: bool,
}

/// One emulated accelerator instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmuAccelerator {
    /// FFT or ZIP.
    pub kind: AccelKind,
    /// Instance name.
    pub name: String,
    /// The u-dma-buf it uses.
    pub memory: String,
    /// FFT: largest transform in the generated configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_points: Option<usize>,
    /// ZIP: most complex elements in the generated configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_elems: Option<usize>,
}

impl EmulatorLayout {
    /// A ZCU102-like board: one 4 MiB u-dma-buf at 0x7000_0000, `fft0`, `fft1`, `zip0`, `zip1`.
    pub fn zcu102_like() -> Self {
        let acc = |kind, name: &str| EmuAccelerator {
            kind,
            name: name.to_owned(),
            memory: "udmabuf0".to_owned(),
            max_points: None,
            max_elems: None,
        };
        Self {
            poll_timeout_ms: default_timeout_ms(),
            udmabufs: vec![EmuUdmabuf {
                name: "udmabuf0".to_owned(),
                size: 4 << 20,
                phys_addr: 0x7000_0000,
                sync: SyncMethod::Packed,
                cache: CacheMode::Cached,
                old_class_path: false,
            }],
            accelerators: vec![
                acc(AccelKind::Fft, "fft0"),
                acc(AccelKind::Fft, "fft1"),
                acc(AccelKind::Zip, "zip0"),
                acc(AccelKind::Zip, "zip1"),
            ],
        }
    }

    /// Parses a layout from TOML (for a standalone emulator process).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| Error::Config(format!("{origin}: {e}")))
    }
}

/// A fault for the next transfer of one accelerator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectedFault {
    /// The channel raises this error bit (and halts) instead of moving data. On MM2S the core
    /// gets nothing; on S2MM the core's output is dropped.
    DmaError {
        /// Which channel.
        channel: Channel,
        /// Which bit.
        bit: DmaErrorBit,
    },
    /// The core swallows its input and never produces output: MM2S completes, S2MM waits until
    /// a reset.
    CoreHang,
    /// S2MM receives (and writes) only `received` bytes of the output and reports that length.
    WrongLength {
        /// Bytes reported and written.
        received: u32,
    },
}

/// One cache-maintenance request the emulator saw.
///
/// Each trigger attribute is its own FIFO, so the log is in order per attribute; how
/// `sync_for_device` and `sync_for_cpu` records interleave is only as exact as the emulator's
/// polling (device records of one poll are logged before its CPU records). With the attribute
/// method the range is read from the attribute files when the trigger is seen, so a request
/// made right after may lend it its range; the count is exact either way.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SyncRecord {
    /// The u-dma-buf.
    pub memory: String,
    /// `sync_for_cpu` or `sync_for_device`.
    pub which: SyncFor,
    /// Offset (from the packed value, or `sync_offset` as it stood when the trigger was read).
    pub offset: u64,
    /// Size, likewise.
    pub size: u64,
    /// Direction, likewise (`None` if unreadable).
    pub direction: Option<SyncDirection>,
    /// Whether it came as one packed write.
    pub packed: bool,
}

/// State shared between the emulator thread and its handle.
#[derive(Debug)]
pub(crate) struct Control {
    names: Vec<String>,
    faults: Mutex<Vec<VecDeque<InjectedFault>>>,
    transfers: Vec<AtomicU64>,
    completions: Vec<AtomicU64>,
    sync_log: Mutex<Vec<SyncRecord>>,
    /// Completed poll passes, so a handle can wait for the thread to catch up.
    epoch: AtomicU64,
}

impl Control {
    fn new(names: Vec<String>) -> Self {
        let n = names.len();
        Self {
            names,
            faults: Mutex::new(vec![VecDeque::new(); n]),
            transfers: (0..n).map(|_| AtomicU64::new(0)).collect(),
            completions: (0..n).map(|_| AtomicU64::new(0)).collect(),
            sync_log: Mutex::new(Vec::new()),
            epoch: AtomicU64::new(0),
        }
    }

    pub(crate) fn take_fault(&self, idx: usize) -> Option<InjectedFault> {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(idx)
            .and_then(VecDeque::pop_front)
    }

    pub(crate) fn count_transfer(&self, idx: usize) {
        if let Some(c) = self.transfers.get(idx) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn count_completion(&self, idx: usize) {
        if let Some(c) = self.completions.get(idx) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn log_sync(&self, r: SyncRecord) {
        self.sync_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(r);
    }

    fn index(&self, accel: &str) -> Result<usize> {
        self.names.iter().position(|n| n == accel).ok_or_else(|| {
            Error::Config(format!(
                "the emulator has no accelerator {accel:?} (it has: {})",
                self.names.join(", ")
            ))
        })
    }
}

/// A running emulator thread. Stops when [`stop`](Self::stop)ped or dropped; its files stay.
#[derive(Debug)]
pub struct Emulator {
    dir: PathBuf,
    config: BoardConfig,
    config_path: PathBuf,
    control: Arc<Control>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Emulator {
    /// Creates the files for `layout` under `dir` (which must exist; existing emulator files
    /// there are replaced), writes `dir/board.toml`, and starts the model on a thread.
    pub fn start(dir: &Path, layout: &EmulatorLayout) -> Result<Self> {
        let config = files::create_without_config(dir, layout)?;
        let (model, control) = model::Board::open(&config, layout)?;
        files::write_config(dir, &config)?;
        let control = Arc::new(control);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (control, stop) = (Arc::clone(&control), Arc::clone(&stop));
            thread::Builder::new()
                .name("rimms-fpga-emu".to_owned())
                .spawn(move || model.run(&control, &stop))
                .map_err(|e| Error::Config(format!("cannot start the emulator thread: {e}")))?
        };
        tracing::info!(dir = %dir.display(), "FPGA emulator started");
        Ok(Self {
            dir: dir.to_owned(),
            config_path: dir.join(files::CONFIG_FILE),
            config,
            control,
            stop,
            thread: Some(thread),
        })
    }

    /// The board configuration that drives this emulator.
    pub fn config(&self) -> &BoardConfig {
        &self.config
    }

    /// Where that configuration was written.
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The emulator's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Queues a fault for the next transfer (MM2S start) of `accel`.
    pub fn inject(&self, accel: &str, fault: InjectedFault) -> Result<()> {
        let i = self.control.index(accel)?;
        self.control
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())[i]
            .push_back(fault);
        Ok(())
    }

    /// MM2S transfers `accel` has started (including faulty ones).
    pub fn transfers(&self, accel: &str) -> Result<u64> {
        let i = self.control.index(accel)?;
        Ok(self.control.transfers[i].load(Ordering::Relaxed))
    }

    /// S2MM completions `accel` has signalled.
    pub fn completions(&self, accel: &str) -> Result<u64> {
        let i = self.control.index(accel)?;
        Ok(self.control.completions[i].load(Ordering::Relaxed))
    }

    /// Waits (at most a second) until the emulator has made two full poll passes, so every
    /// register and sync write made before the call has been seen.
    pub fn settle(&self) {
        let start = self.control.epoch.load(Ordering::Acquire);
        let t = Instant::now();
        while self.control.epoch.load(Ordering::Acquire) < start + 2
            && t.elapsed() < Duration::from_secs(1)
            && self.thread.as_ref().is_some_and(|h| !h.is_finished())
        {
            thread::sleep(Duration::from_micros(50));
        }
    }

    /// The cache-maintenance requests seen so far, in order (after [`settle`](Self::settle)).
    pub fn sync_log(&self) -> Vec<SyncRecord> {
        self.settle();
        self.control
            .sync_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Empties the sync log (after settling).
    pub fn clear_sync_log(&self) {
        self.settle();
        self.control
            .sync_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Runs an emulator in the calling thread until `stop` is set: the body of a standalone
/// emulator process (`rimms fpga-emu`). Creates the files for `layout` under `dir` and writes
/// `dir/board.toml` last (atomically), so another process can wait for that file and then open
/// the board with [`super::FpgaBoard::open`] as it would open real hardware. Fault injection is
/// not available this way.
pub fn run_standalone(dir: &Path, layout: &EmulatorLayout, stop: &AtomicBool) -> Result<()> {
    let config = files::create_without_config(dir, layout)?;
    let (model, control) = model::Board::open(&config, layout)?;
    files::write_config(dir, &config)?;
    tracing::info!(dir = %dir.display(), "standalone FPGA emulator running");
    model.run(&control, stop);
    Ok(())
}

/// The file a standalone emulator writes its board configuration to, once its files exist.
pub fn config_file(dir: &Path) -> PathBuf {
    dir.join(files::CONFIG_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_round_trips_through_toml_and_bad_ones_are_refused() {
        let layout = EmulatorLayout::zcu102_like();
        let text = toml::to_string(&layout).unwrap();
        assert_eq!(EmulatorLayout::from_toml_str(&text, "t").unwrap(), layout);
        let e = EmulatorLayout::from_toml_str("[[udmabuf]]\nname = \"u\"\n", "t").unwrap_err();
        assert!(e.to_string().contains("size"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let mut bad = layout.clone();
        bad.udmabufs[0].size = 1000;
        assert!(Emulator::start(dir.path(), &bad).is_err());
        let mut bad = layout;
        bad.accelerators[0].memory = "nowhere".into();
        let e = Emulator::start(dir.path(), &bad).unwrap_err().to_string();
        assert!(e.contains("accelerator[0].memory"), "{e}");
    }

    #[test]
    fn faults_go_to_named_accelerators_only() {
        let dir = tempfile::tempdir().unwrap();
        let emu = Emulator::start(dir.path(), &EmulatorLayout::zcu102_like()).unwrap();
        emu.inject("zip1", InjectedFault::CoreHang).unwrap();
        assert!(emu.inject("gpu0", InjectedFault::CoreHang).is_err());
        assert_eq!(emu.transfers("fft0").unwrap(), 0);
        assert!(emu.config_path().exists());
        emu.stop();
    }
}

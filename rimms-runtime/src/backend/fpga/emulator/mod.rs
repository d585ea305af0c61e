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
//! <dir>/sys/class/u-dma-buf/<udmabuf>/rimms_emu_sync   the sync acknowledgement counters
//! <dir>/regs/<accel>.dma, .ctrl, .reset      one 4 KiB page per register block
//! <dir>/regs/bus.log                         the bus log every page write goes through
//! <dir>/board.toml                           the BoardConfig pointing at all of the above
//! ```
//!
//! A thread (or, with [`run_standalone`], a whole process) replays the **bus log**
//! ([`super::buslog`]): every register write the driver makes, once and in order, as the AXI bus
//! delivers them on a board; a read waits until the model has handled the page's writes, and
//! the model alone writes the register pages, so a read shows the register as the block left
//! it. The model holds every rule of docs/design.md's FPGA section and of
//! the hardware it names, and records each rule a driver breaks as a [`Violation`]:
//!
//! - **AXI DMA (PG021).** Reset values (DMACR `0x0001_0002`, DMASR Halted); registers read as
//!   the core shows them (`model/regmap.rs`: DMACR bit 1 reads 1 and reserved bits 0, reserved
//!   offsets read 0, SA / DA MSB only over 32 address bits, LENGTH masked to the configured
//!   width). A soft reset of either channel resets the whole core; asking for it again while it
//!   runs (CEDR's `reset_dma` writes both DMACRs) is the same reset. A halted engine resets at
//!   once; a running one takes [`EmulatorLayout::soft_reset_us`], during which DMACR reads bit 2
//!   and DMASR still shows the channels running, and any other write is lost (and recorded).
//!   SA / DA and LENGTH are latched when LENGTH is written, so an address written after it is
//!   not used; a LENGTH while halted, zero, wider than its field, or while the channel is busy,
//!   and an unaligned address, are errors. Any DMA error halts its channel and clears RS; an
//!   S2MM packet longer than LENGTH fills the buffer, then halts with DMAIntErr, IOC and
//!   Err_Irq (DMASR `0x5011`). Error bits clear only on reset; S2MM LENGTH reads the bytes
//!   received.
//! - **The stream into S2MM.** The core's output waits in the stream (the core's output buffer
//!   and an AXI-Stream FIFO, [`STREAM_FIFO_BYTES`] in all) until S2MM is armed, then flows in at
//!   once, so MM2S may start before S2MM; past that depth MM2S does not complete until S2MM
//!   takes data. Output that waits longer than [`STREAM_WAIT`] with S2MM not armed is recorded
//!   ([`Rule::OutputWithoutS2mm`]: S2MM not re-armed); a soft reset flushes the stream.
//! - **FFT core.** Its config channel is an AXI GPIO (tvalid on channel 1, tdata on channel 2;
//!   a rising edge of tvalid with both channels driven pushes one word) or a config register,
//!   as the board says; words queue and each frame takes one when it starts; log2 N outside
//!   3..=11 is clamped; power-on config 2,048-point forward. Frames are assembled from the
//!   stream: a packet shorter than N leaves its points in the core for the next packet (the
//!   output shifts, as on hardware) and one longer than N spills into the next frame. The
//!   reset GPIO (active low) resets core and DMA together; a DMA soft reset leaves the core's
//!   partial frame in place.
//! - **ZIP core.** One packet of exactly `2 · size` floats; `size` over the core's capacity is
//!   an error.
//! - **Caches.** A cached u-dma-buf has DRAM behind the CPU's view: CPU writes stay in the view
//!   (dirty) until a `sync_for_device` covers them, the DMA reads and writes DRAM, and the CPU
//!   keeps reading its stale view until a `sync_for_cpu` covers the range. A driver that forgets
//!   a sync gets wrong data here as on the board. Every sync write is acknowledged through a
//!   small mapped counter file, which the driver waits for (the board's sysfs write returns
//!   only once the maintenance is done; a FIFO write returns at once).
//!
//! In **strict** mode ([`EmulatorLayout::strict`], `RIMMS_FPGA_STRICT=1` for runtimes that
//! start their own emulator) a violation on an accelerator also raises DMAIntErr on both of its
//! channels, so the driver's call fails, and keeps it raised across resets until the harness
//! takes or clears the violations ([`Emulator::take_violations`], [`Emulator::clear_trace`]):
//! a reset cannot hide a violation. Otherwise it is logged as a warning. Either way
//! [`Emulator::violations`] lists it. A `sync_for_cpu` that drops uncleaned CPU writes belongs
//! to no accelerator: it is listed and logged, never turned into a DMA error. A missing
//! `sync_for_cpu` cannot be seen at all (the CPU's reads are invisible): it shows, as on a
//! board, as stale data.
//!
//! Faults can be injected at run time, each for the next transfer of one accelerator
//! ([`InjectedFault`]): an error bit on either channel, a core that swallows its input and never
//! answers, a wrong received length.
//!
//! An optional [`timing::TimingModel`] makes transfers, register accesses and the runtime's
//! host copies take modelled ZCU102 times.
//!
//! The emulator polls with atomic loads; when nothing happens it spins briefly, then sleeps
//! ~20 µs between polls, so an idle emulator does not hold a core.

mod cores;
mod files;
mod model;
/// The timing models, which live beside the drivers (a board's runtime uses them too).
pub use super::timing;
pub use model::{STREAM_FIFO_BYTES, STREAM_WAIT};

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::axi_dma::{Channel, DmaErrorBit};
use super::config::{AccelKind, BoardConfig, FftConfigPath};
use super::udmabuf::{CacheMode, SyncDirection, SyncFor, SyncMethod};
use crate::hal::{Error, Result};

fn default_timeout_ms() -> u64 {
    200
}

/// What the emulator builds: its buffers and accelerator instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Every protocol violation also fails the driver's call (DMAIntErr on both channels).
    #[serde(default)]
    pub strict: bool,
    /// Every DMA transfer takes at least this long, in microseconds (0: done as soon as seen).
    #[serde(default)]
    pub transfer_floor_us: u64,
    /// How long a DMA soft reset takes, in microseconds (default 50).
    #[serde(default = "default_reset_us")]
    pub soft_reset_us: u64,
    /// A timing model: transfers, register accesses and host copies take the modelled time.
    /// In process it is charged to the virtual clock (`crate::vclock`), and nothing waits it
    /// out; a standalone emulator counts it per core ([`Emulator::modelled`]'s figures) and
    /// waits it out only with [`EmulatorLayout::real_time`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<timing::TimingModel>,
    /// Real-time pacing under a timing model: each DMA transfer completes no sooner than its
    /// modelled time after it started, and the board file asks the driver to wait out the
    /// modelled register access times (`rimms fpga-emu --real-time`). Off by default: a
    /// process of its own has no virtual clock to charge, and waiting out modelled time only
    /// burns this machine's wall time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub real_time: bool,
}

fn default_reset_us() -> u64 {
    50
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
    /// ZIP: most floats per input (the core's capacity; default 4,096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_floats: Option<usize>,
    /// FFT: how its config channel is driven (default GPIO, as on CEDR's ZCU102 images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fft_config: Option<FftConfigPath>,
    /// FFT: no reset GPIO in the generated configuration (default: one, as on CEDR's images).
    #[serde(default)]
    pub no_reset_gpio: bool,
}

impl EmulatorLayout {
    /// A ZCU102-like board: one 4 MiB u-dma-buf at 0x7000_0000, `fft0`, `fft1`, `zip0`, `zip1`.
    pub fn zcu102_like() -> Self {
        let acc = |kind, name: &str| EmuAccelerator {
            kind,
            name: name.to_owned(),
            memory: "udmabuf0".to_owned(),
            max_points: None,
            max_floats: None,
            fft_config: None,
            no_reset_gpio: false,
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
            strict: false,
            transfer_floor_us: 0,
            soft_reset_us: default_reset_us(),
            timing: None,
            real_time: false,
        }
    }

    /// Parses a layout from TOML (for a standalone emulator process).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| Error::Config(format!("{origin}: {e}")))
    }

    /// Refuses buffer and core names that are not plain file names (empty, with a `/` or NUL,
    /// `.` or `..`), naming the key and the value: each becomes a file name under the
    /// emulator's folder (`dev/NAME`, `sys/class/u-dma-buf/NAME/`, `regs/NAME.ctrl`), so `../x`
    /// would create or truncate a file outside it. The emulator asks this before it makes
    /// anything.
    pub fn check_names(&self) -> Result<()> {
        let names = (self.udmabufs.iter().enumerate())
            .map(|(i, u)| (format!("udmabuf[{i}].name"), &u.name))
            .chain(
                (self.accelerators.iter().enumerate())
                    .map(|(i, a)| (format!("accelerator[{i}].name"), &a.name)),
            );
        for (key, name) in names {
            if !crate::backend::fpga::config::is_plain_file_name(name) {
                return Err(Error::Config(format!(
                    "emulator layout: {key}: {name:?} is not a plain file name (not empty, no \
                     `/` or NUL, not `.` or `..`): the emulator makes files named for it"
                )));
            }
        }
        Ok(())
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

/// A rule of the hardware that a driver broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// A DMA register written during a soft reset or while the reset GPIO holds the DMA.
    WriteDuringReset,
    /// LENGTH written while the channel is halted.
    LengthWhileHalted,
    /// LENGTH written as 0.
    ZeroLength,
    /// LENGTH wider than the 26-bit field.
    LengthTooWide,
    /// LENGTH written while the channel's previous transfer is in flight.
    LengthWhileBusy,
    /// An address written while a transfer is in flight (not used for it).
    AddressWhileBusy,
    /// LENGTH written with no address written since the last transfer (LENGTH before address).
    AddressNotProgrammed,
    /// A transfer address not 8-byte aligned.
    UnalignedAddress,
    /// Core output waited in the stream longer than the model's bound (50 ms) with S2MM not
    /// armed: S2MM not (re-)armed for a transfer. (MM2S before S2MM is fine: the output waits
    /// in the stream until S2MM is armed, as on the board.)
    OutputWithoutS2mm,
    /// The DMA read memory the CPU had written and not cleaned (a missing `sync_for_device`).
    MissingSyncForDevice,
    /// A `sync_for_cpu` dropped CPU writes that were never cleaned.
    CpuWritesDiscarded,
    /// A value other than 0 / 1 written to the FFT config GPIO's tvalid channel.
    FftConfigWrongChannel,
    /// tvalid raised while a config GPIO channel was still an input.
    FftConfigNotDriven,
    /// A config word's log2 N outside the core's range (clamped).
    FftConfigClamped,
    /// An MM2S packet that does not end on an FFT frame boundary.
    FftFrameLength,
    /// A reset GPIO written while it is an input.
    ResetNotDriven,
    /// A ZIP size of 0 or over the core's capacity.
    ZipOverCapacity,
    /// A ZIP packet not exactly `2 · size` floats.
    ZipPacketLength,
}

/// Which register block of an accelerator a write went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Block {
    /// The AXI DMA.
    Dma,
    /// The core's control page (the FFT's config GPIO or register, the ZIP's registers).
    Control,
    /// The FFT's reset GPIO.
    Reset,
}

/// One register write as the emulated bus delivered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BusTrace {
    /// The accelerator.
    pub accel: String,
    /// The block.
    pub block: Block,
    /// Byte offset in the block.
    pub offset: u32,
    /// The value written.
    pub value: u32,
}

/// One protocol violation the emulator saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The accelerator it happened on (`None` for a u-dma-buf's cache maintenance).
    pub accel: Option<String>,
    /// The rule broken.
    pub rule: Rule,
    /// What happened, in words.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {:?}: {}",
            self.accel.as_deref().unwrap_or("u-dma-buf"),
            self.rule,
            self.detail
        )
    }
}

/// State shared between the emulator thread and its handle.
#[derive(Debug)]
pub(crate) struct Control {
    names: Vec<String>,
    pub(crate) strict: bool,
    violations: Mutex<Vec<Violation>>,
    trace: Mutex<Vec<BusTrace>>,
    faults: Mutex<Vec<VecDeque<InjectedFault>>>,
    transfers: Vec<AtomicU64>,
    completions: Vec<AtomicU64>,
    /// Modelled nanoseconds per accelerator: DMA start-up, MM2S, core, S2MM (timing model only).
    modelled: Vec<[AtomicU64; 4]>,
    sync_log: Mutex<Vec<SyncRecord>>,
    /// Completed poll passes, so a handle can wait for the thread to catch up.
    epoch: AtomicU64,
}

impl Control {
    fn new(names: Vec<String>, strict: bool) -> Self {
        let n = names.len();
        Self {
            names,
            strict,
            violations: Mutex::new(Vec::new()),
            trace: Mutex::new(Vec::new()),
            faults: Mutex::new(vec![VecDeque::new(); n]),
            transfers: (0..n).map(|_| AtomicU64::new(0)).collect(),
            completions: (0..n).map(|_| AtomicU64::new(0)).collect(),
            modelled: (0..n).map(|_| Default::default()).collect(),
            sync_log: Mutex::new(Vec::new()),
            epoch: AtomicU64::new(0),
        }
    }

    pub(crate) fn violate(&self, accel: Option<usize>, rule: Rule, detail: String) {
        let v = Violation {
            accel: accel.and_then(|i| self.names.get(i).cloned()),
            rule,
            detail,
        };
        tracing::warn!(violation = %v, strict = self.strict, "FPGA emulator: protocol violation");
        self.violations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(v);
    }

    /// Strict mode and a violation on accelerator `idx` that the harness has not cleared: its
    /// DMA keeps an error raised, even across resets.
    pub(crate) fn poisoned(&self, idx: usize) -> bool {
        if !self.strict {
            return false;
        }
        let Some(name) = self.names.get(idx) else {
            return false;
        };
        self.violations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|v| v.accel.as_ref() == Some(name))
    }

    pub(crate) fn trace(&self, idx: usize, block: Block, offset: u32, value: u32) {
        let accel = self.names.get(idx).cloned().unwrap_or_default();
        self.trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(BusTrace {
                accel,
                block,
                offset,
                value,
            });
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

    /// Adds one transfer's modelled phases to accelerator `idx`'s counters.
    pub(crate) fn count_modelled(&self, idx: usize, p: &timing::Phases) {
        if let Some(c) = self.modelled.get(idx) {
            for (slot, d) in c.iter().zip([p.setup, p.mm2s, p.core, p.s2mm]) {
                let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                slot.fetch_add(ns, Ordering::Relaxed);
            }
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
    ///
    /// Nothing is made before the layout's buffer and core names are known to be plain file
    /// names, and nothing is written through a symbolic link (or into a FIFO, a device or a
    /// file with other hard links) at any place the emulator writes: either is an error
    /// naming the name or the path, and the file it would have reached is left as it was.
    pub fn start(dir: &Path, layout: &EmulatorLayout) -> Result<Self> {
        let config = files::create_without_config(dir, layout)?;
        let (model, control) = model::Board::open(dir, &config, layout)?;
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

    /// The modelled time `accel`'s transfers have taken so far, by part (timing model only;
    /// zero without one): the virtual clock's per-core and per-channel account.
    pub fn modelled(&self, accel: &str) -> Result<timing::Phases> {
        let i = self.control.index(accel)?;
        let [setup, mm2s, core, s2mm] = self.control.modelled[i]
            .each_ref()
            .map(|c| Duration::from_nanos(c.load(Ordering::Relaxed)));
        Ok(timing::Phases {
            setup,
            mm2s,
            core,
            s2mm,
        })
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

    /// The protocol violations seen so far, in order (after settling).
    pub fn violations(&self) -> Vec<Violation> {
        self.settle();
        self.control
            .violations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The protocol violations seen so far (after settling), and clears them: in strict mode
    /// this also lifts the error the violations hold on their accelerators' DMAs, so the next
    /// reset leaves them clean.
    pub fn take_violations(&self) -> Vec<Violation> {
        self.settle();
        std::mem::take(
            &mut *self
                .control
                .violations
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// Every register write the bus delivered since the last [`clear_trace`](Self::clear_trace),
    /// in order (after settling).
    pub fn bus_trace(&self) -> Vec<BusTrace> {
        self.settle();
        self.control
            .trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Empties the bus trace and the violation list (after settling); like
    /// [`take_violations`](Self::take_violations) this lifts strict mode's held errors.
    pub fn clear_trace(&self) {
        self.settle();
        self.control
            .trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.control
            .violations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Whether violations fail the driver's calls.
    pub fn is_strict(&self) -> bool {
        self.control.strict
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
/// not available this way; violations are logged as warnings (and fail calls in strict mode).
///
/// Under a timing model the emulator counts each core's modelled time and, unless the layout
/// asks for [`EmulatorLayout::real_time`] pacing, spends none of it: transfers complete as
/// soon as the model has moved the data, and the board file names no modelled register times,
/// so the driver in the other process does not wait them out either (that process has no
/// virtual clock to charge them to). The modelled totals are logged when it stops.
pub fn run_standalone(dir: &Path, layout: &EmulatorLayout, stop: &AtomicBool) -> Result<()> {
    let config = standalone_config(dir, layout)?;
    let (model, control) = model::Board::open(dir, &config, layout)?;
    files::write_config(dir, &config)?;
    tracing::info!(dir = %dir.display(), real_time = layout.real_time, "standalone FPGA emulator running");
    model.run(&control, stop);
    if layout.timing.is_some() {
        for (i, a) in config.accelerators.iter().enumerate() {
            let [setup, mm2s, core, s2mm] = control.modelled[i]
                .each_ref()
                .map(|c| Duration::from_nanos(c.load(Ordering::Relaxed)));
            tracing::info!(accel = %a.name, ?setup, ?mm2s, ?core, ?s2mm, "modelled time");
        }
    }
    Ok(())
}

/// The files of a standalone emulator and the board configuration it publishes: without
/// [`EmulatorLayout::real_time`], no modelled register access times (see [`run_standalone`]).
fn standalone_config(dir: &Path, layout: &EmulatorLayout) -> Result<BoardConfig> {
    let mut config = files::create_without_config(dir, layout)?;
    if !layout.real_time {
        for a in &mut config.accelerators {
            for block in std::iter::once(&mut a.dma)
                .chain(std::iter::once(&mut a.control))
                .chain(a.reset.as_mut())
            {
                block.model_access_ns = None;
            }
        }
    }
    Ok(config)
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

    /// A standalone emulator's board file asks the driver to wait out modelled register times
    /// only under real-time pacing; the in-process one always names them (they are charged to
    /// the virtual clock there).
    #[test]
    fn a_standalone_board_file_names_register_times_only_under_real_time_pacing() {
        let mut layout = EmulatorLayout::zcu102_like();
        layout.timing = Some(timing::TimingModel::zcu102());
        let access = |c: &BoardConfig| {
            c.accelerators
                .iter()
                .flat_map(|a| [Some(&a.dma), Some(&a.control), a.reset.as_ref()])
                .flatten()
                .map(|b| b.model_access_ns)
                .collect::<Vec<_>>()
        };
        let dir = tempfile::tempdir().unwrap();
        let paced = access(&files::create_without_config(dir.path(), &layout).unwrap());
        // Two FFTs (DMA, control, reset GPIO) and two ZIPs (DMA, control), 30 / 200 ns each.
        assert_eq!(paced, vec![Some([30, 200]); 10]);
        for (real_time, want) in [(false, None), (true, Some([30, 200]))] {
            layout.real_time = real_time;
            let dir = tempfile::tempdir().unwrap();
            let c = standalone_config(dir.path(), &layout).unwrap();
            assert_eq!(access(&c), vec![want; 10], "real_time {real_time}");
        }
    }

    /// A layout file (`rimms fpga-emu`'s input, or `EmulatorLayout` built in code) may carry
    /// its own timing model. A clock of 0 Hz, a stream width of 0 or a NaN made every modelled
    /// transfer `Duration::from_secs_f64(inf or NaN)`, a panic on the emulator's thread at the
    /// first DMA transfer (the driver then only saw its waits time out). Such a model must be
    /// refused when the emulator starts, naming the field.
    #[test]
    fn a_timing_model_that_cannot_time_a_transfer_is_refused_at_start() {
        let zero = timing::TimingModel {
            pl_clock_hz: 0.0,
            ..timing::TimingModel::zcu102()
        };
        let panicked = std::panic::catch_unwind(|| zero.fft_transfer(2048)).is_err();
        assert!(panicked, "a 0 Hz clock cannot time a transfer");
        let bad_models = [
            zero,
            timing::TimingModel {
                fft_stream_bytes: 0.0,
                ..timing::TimingModel::zcu102()
            },
            timing::TimingModel {
                zip_stream_bytes: f64::NAN,
                ..timing::TimingModel::zcu102()
            },
            timing::TimingModel {
                fft_latency_clocks_per_point: -1.0,
                ..timing::TimingModel::zcu102()
            },
        ];
        for model in bad_models {
            let mut layout = EmulatorLayout::zcu102_like();
            layout.timing = Some(model.clone());
            let dir = tempfile::tempdir().unwrap();
            match Emulator::start(dir.path(), &layout) {
                Ok(emu) => {
                    emu.stop();
                    panic!("a layout with {model:?} was accepted");
                }
                Err(e) => assert!(e.to_string().contains("timing"), "{e}"),
            }
        }
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

/// The emulator makes files named for the layout's names and writes into its folder: neither
/// may reach a file of the user's outside it, whether the call fails or not.
#[cfg(test)]
mod file_safety_tests {
    use super::*;
    use std::fs;

    const KEPT: &[u8] = b"the user's file, to be kept byte for byte\n";

    /// Fails unless `path` still holds [`KEPT`], saying what it holds instead (briefly: a
    /// damaged file may be megabytes of zeros).
    fn assert_kept(path: &Path, what: &str) {
        let now = fs::read(path).unwrap_or_default();
        assert!(
            now == KEPT,
            "{what}: {} now holds {} bytes, starting {:?}",
            path.display(),
            now.len(),
            String::from_utf8_lossy(&now[..now.len().min(48)])
        );
    }

    /// A buffer or core name that is not a plain file name made the emulator create, truncate
    /// and grow `dev/NAME` (or write `regs/NAME.ctrl`) before any check ran: `../../victim.txt`
    /// replaced the user's file beside the folder with 4 MiB of zeros, and a core name with a
    /// `/` was never refused at all.
    #[test]
    fn a_name_that_is_not_a_plain_file_name_is_refused_before_anything_is_made() {
        let bad = ["../../victim.txt", "..", ".", "", "a/b", "nul\0name"];
        for (field, name) in bad
            .iter()
            .flat_map(|n| [("udmabuf", *n), ("accelerator", *n)])
        {
            let outer = tempfile::tempdir().unwrap();
            let dir = outer.path().join("emu");
            fs::create_dir(&dir).unwrap();
            let victims = [
                "victim.txt",
                "victim.txt.ctrl",
                "victim.txt.dma",
                "victim.txt.reset",
            ]
            .map(|v| outer.path().join(v));
            for v in &victims {
                fs::write(v, KEPT).unwrap();
            }
            let mut layout = EmulatorLayout::zcu102_like();
            let key = if field == "udmabuf" {
                layout.udmabufs[0].name = name.to_owned();
                for a in &mut layout.accelerators {
                    a.memory = name.to_owned();
                }
                "udmabuf[0].name"
            } else {
                layout.accelerators[1].name = name.to_owned();
                "accelerator[1].name"
            };
            let e = match Emulator::start(&dir, &layout) {
                Ok(emu) => {
                    emu.stop();
                    format!("started with {key} = {name:?}")
                }
                Err(e) => e.to_string(),
            };
            for v in &victims {
                assert_kept(v, &format!("{key} = {name:?}"));
            }
            assert!(
                e.contains(key) && e.contains(&format!("{name:?}")),
                "{key} = {name:?}: {e}"
            );
            let made: Vec<_> = fs::read_dir(&dir)
                .unwrap()
                .map(|d| d.unwrap().path())
                .collect();
            assert!(made.is_empty(), "{key} = {name:?}: made {made:?}");
        }
    }

    /// The board configuration's own check refuses them too (a core's name with a `/` passed).
    #[test]
    fn the_board_configuration_refuses_names_that_are_not_plain_file_names() {
        let dir = tempfile::tempdir().unwrap();
        let config =
            files::create_without_config(dir.path(), &EmulatorLayout::zcu102_like()).unwrap();
        for name in ["../x", "a/b", "..", ".", "", "nul\0name"] {
            let mut c = config.clone();
            c.accelerators[1].name = name.to_owned();
            let e = c.validate("t").unwrap_err().to_string();
            assert!(e.contains("accelerator[1].name"), "{name:?}: {e}");
            let mut c = config.clone();
            c.udmabufs[0].name = name.to_owned();
            let e = c.validate("t").unwrap_err().to_string();
            assert!(e.contains("udmabuf[0].name"), "{name:?}: {e}");
        }
    }

    /// Each place the emulator writes, replaced by a symbolic link (to a file, or a folder
    /// holding a file of the name it writes): a second start wrote through it, truncating the
    /// user's file and growing it to the buffer's size. It must refuse, naming the link.
    #[test]
    fn the_emulator_does_not_write_through_symbolic_links() {
        let entries = [
            ("dev/udmabuf0", None),
            ("regs/fft0.ctrl", None),
            ("regs/zip1.dma", None),
            ("regs/fft1.reset", None),
            ("regs/bus.log", None),
            ("sys/class/u-dma-buf/udmabuf0/size", None),
            ("sys/class/u-dma-buf/udmabuf0/rimms_emu_sync", None),
            ("board.toml.tmp", None),
            ("dev", Some("udmabuf0")),
            ("regs", Some("fft0.ctrl")),
            ("sys", Some("class/u-dma-buf/udmabuf0/size")),
            ("sys/class/u-dma-buf/udmabuf0", Some("phys_addr")),
        ];
        for (entry, inside) in entries {
            let outer = tempfile::tempdir().unwrap();
            let dir = outer.path().join("emu");
            fs::create_dir(&dir).unwrap();
            Emulator::start(&dir, &EmulatorLayout::zcu102_like())
                .unwrap()
                .stop();
            let at = dir.join(entry);
            let (target, victim) = match inside {
                None => {
                    let v = outer.path().join("victim");
                    (v.clone(), v)
                }
                Some(file) => {
                    let t = outer.path().join("user");
                    let v = t.join(file);
                    fs::create_dir_all(v.parent().unwrap()).unwrap();
                    (t, v)
                }
            };
            fs::write(&victim, KEPT).unwrap();
            if at.is_dir() {
                fs::remove_dir_all(&at).unwrap();
            } else {
                let _ = fs::remove_file(&at);
            }
            std::os::unix::fs::symlink(&target, &at).unwrap();
            let e = match Emulator::start(&dir, &EmulatorLayout::zcu102_like()) {
                Ok(emu) => {
                    emu.stop();
                    format!("started through the link {entry}")
                }
                Err(e) => e.to_string(),
            };
            assert_kept(&victim, entry);
            assert!(
                e.contains(&at.display().to_string()) && e.contains("symbolic link"),
                "{entry}: {e}"
            );
        }
    }

    /// A hard link is no better: the emulator's file is the user's file.
    #[test]
    fn the_emulator_does_not_truncate_a_file_with_other_links() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("emu");
        fs::create_dir(&dir).unwrap();
        Emulator::start(&dir, &EmulatorLayout::zcu102_like())
            .unwrap()
            .stop();
        let victim = outer.path().join("victim");
        fs::write(&victim, KEPT).unwrap();
        let at = dir.join("dev/udmabuf0");
        fs::remove_file(&at).unwrap();
        fs::hard_link(&victim, &at).unwrap();
        let e = Emulator::start(&dir, &EmulatorLayout::zcu102_like())
            .map(Emulator::stop)
            .unwrap_err()
            .to_string();
        assert_kept(&victim, "a hard link");
        assert!(e.contains(&at.display().to_string()), "{e}");
    }

    /// A folder an emulator ran on is reused: its own files are replaced without complaint.
    #[test]
    fn a_second_start_on_the_same_folder_replaces_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..2 {
            let emu = Emulator::start(dir.path(), &EmulatorLayout::zcu102_like()).unwrap();
            assert!(emu.config_path().exists());
            emu.stop();
        }
        let len = fs::metadata(dir.path().join("dev/udmabuf0")).unwrap().len();
        assert_eq!(len, 4 << 20);
    }
}

//! The board as runtime devices: every accelerator instance is a device `fpga(n)`, all of them
//! sharing their u-dma-buf as one memory space that the CPU maps too. The built-in `fft`,
//! `fft_in_place`, `zip` and `zip_rows` (one row at a time on the ZIP core) APIs run on them;
//! the kernels hand the accelerators offsets into that space, so data an FPGA kernel uses
//! never leaves it. They take device slices, not `&[T]`: the DMA engine writes the output
//! while the kernel waits, and a reference over those bytes for the call would be aliased by
//! it (a user's host code, which writes through its own references, still takes `&mut [T]`).

use super::board::{Accelerator, FpgaBoard};
use super::config::BoardConfig;
#[cfg(feature = "fpga-emulator")]
use super::emulator::{Emulator, EmulatorLayout};
use super::timing::TimingModel;
use super::udmabuf::CacheMode;
use crate::apis;
use crate::backend::host_kernels::shape;
use crate::backend::{shape_fits, Backend, SpaceBacking, SpaceSpec};
use crate::hal::BackendError;
use crate::hal::MappedMemory;
use crate::hal::{DevSlice, DevSliceMut};
use crate::hal::{Device, Forms};
use crate::hal::{DeviceCtx, FftDirection, KernelCtx, Refusal, ZipOp};
use crate::hal::{Error, Result};
use crate::space::LinkModel;
use num_complex::Complex32 as C32;
use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

/// Where a runtime's FPGA devices come from.
#[derive(Clone, Debug)]
pub enum FpgaSource {
    /// A real board (or an emulator another process runs), described by its configuration.
    Board(BoardConfig),
    /// The register-level emulator, started on a thread for this runtime.
    #[cfg(feature = "fpga-emulator")]
    Emulated(EmulatorLayout),
}

/// Environment variable naming a board configuration file for [`FpgaSource::from_env`].
pub const BOARD_ENV: &str = "RIMMS_FPGA_BOARD";
/// Environment variable naming a timing model (`zcu102`) for the emulator
/// [`FpgaSource::from_env`] falls back to: modelled transfer, register and host-copy times.
pub const TIMING_ENV: &str = "RIMMS_FPGA_TIMING";
/// Environment variable that makes the emulator [`FpgaSource::from_env`] falls back to strict
/// (`1`): every protocol violation fails the driver's call.
pub const STRICT_ENV: &str = "RIMMS_FPGA_STRICT";

impl FpgaSource {
    /// The board named by `RIMMS_FPGA_BOARD`, else the emulator with a ZCU102-like layout
    /// (2 FFT + 2 ZIP cores) and a 64 MiB u-dma-buf: so a program runs on a board where one is
    /// configured and everywhere else too.
    /// In a build without the `fpga-emulator` feature, an unset `RIMMS_FPGA_BOARD` is an
    /// error saying so.
    pub fn from_env() -> Result<FpgaSource> {
        match Self::board_path_from_env() {
            Some(path) => Ok(FpgaSource::Board(BoardConfig::load(&path)?)),
            #[cfg(not(feature = "fpga-emulator"))]
            None => Err(Error::Config(format!(
                "no FPGA board configured ({BOARD_ENV} is not set), and this build has no emulator to fall back to (feature `fpga-emulator`)"
            ))),
            #[cfg(feature = "fpga-emulator")]
            None => {
                let mut layout = Self::default_layout();
                layout.strict = Self::strict_from_env()?;
                if let Some(name) = std::env::var_os(TIMING_ENV) {
                    let name = name.to_string_lossy();
                    let model = TimingModel::by_name(&name).ok_or_else(|| {
                        Error::Config(format!(
                            "{TIMING_ENV}={name}: no such timing model (known: {})",
                            TimingModel::NAMES
                        ))
                    })?;
                    if model.uncached_udmabuf {
                        for u in &mut layout.udmabufs {
                            u.cache = CacheMode::Uncached;
                        }
                    }
                    layout.timing = Some(model);
                }
                Ok(FpgaSource::Emulated(layout))
            }
        }
    }

    /// The emulated board `from_env` falls back to (lenient; `from_env` makes it strict where
    /// `RIMMS_FPGA_STRICT` says so).
    #[cfg(feature = "fpga-emulator")]
    pub fn default_layout() -> EmulatorLayout {
        let mut layout = EmulatorLayout::zcu102_like();
        for u in &mut layout.udmabufs {
            u.size = 64 << 20;
        }
        layout
    }

    /// Whether `RIMMS_FPGA_STRICT` asks for a strict emulator: off when unset or empty, an
    /// error naming the variable when it is not a switch (`1`, `true`, `yes`, `on` / `0`,
    /// `false`, `no`, `off`).
    pub fn strict_from_env() -> Result<bool> {
        Ok(crate::hal::env_switch(STRICT_ENV)?)
    }

    /// The board file `RIMMS_FPGA_BOARD` names; `None` where it is unset or empty (an empty
    /// value means unset, as a shell's `RIMMS_FPGA_BOARD= rimms …` intends).
    pub fn board_path_from_env() -> Option<PathBuf> {
        std::env::var_os(BOARD_ENV)
            .filter(|path| !path.is_empty())
            .map(PathBuf::from)
    }
}

/// An opened board and, when emulated, the emulator and its files: what a runtime keeps of
/// its board (dropped after the pools that use the board's memory), and what hand-written
/// driver code opens to run without a runtime.
pub struct FpgaParts {
    board: Arc<FpgaBoard>,
    #[cfg(feature = "fpga-emulator")]
    _emulator: Option<(Emulator, tempfile::TempDir)>,
    timing: Option<TimingModel>,
}

impl FpgaParts {
    /// Opens the board `source` names, starting the emulator on a thread if it is emulated.
    pub fn open(source: FpgaSource) -> Result<FpgaParts> {
        match source {
            FpgaSource::Board(config) => Ok(FpgaParts {
                board: Arc::new(FpgaBoard::open(&config)?),
                #[cfg(feature = "fpga-emulator")]
                _emulator: None,
                timing: None,
            }),
            #[cfg(feature = "fpga-emulator")]
            FpgaSource::Emulated(layout) => {
                let dir = tempfile::Builder::new()
                    .prefix("rimms-fpga-emu")
                    .tempdir()
                    .map_err(|e| {
                        Error::Config(format!("cannot create the emulator's folder: {e}"))
                    })?;
                if let Some(t) = &layout.timing {
                    // Checked before the process-wide clock takes its costs: `Emulator::start`
                    // refuses such a model too, but only after this point.
                    t.check()
                        .map_err(|why| Error::Config(format!("emulator: {why}")))?;
                    // FPGA time is modelled from here on: frames read the virtual clock.
                    crate::vclock::enable(t.costs());
                }
                let emulator = Emulator::start(dir.path(), &layout)?;
                let board = Arc::new(FpgaBoard::open(emulator.config())?);
                Ok(FpgaParts {
                    board,
                    _emulator: Some((emulator, dir)),
                    timing: layout.timing,
                })
            }
        }
    }

    /// The opened board.
    pub fn board(&self) -> &Arc<FpgaBoard> {
        &self.board
    }

    /// The emulator driving the board, when it is emulated (its violations, its trace).
    #[cfg(feature = "fpga-emulator")]
    pub fn emulator(&self) -> Option<&Emulator> {
        self._emulator.as_ref().map(|(e, _)| e)
    }

    /// One backend per accelerator instance, in configuration order.
    pub(crate) fn backends(&self) -> Vec<FpgaDevice> {
        (0..self.board.accelerators().len())
            .map(|index| FpgaDevice {
                index,
                board: Arc::clone(&self.board),
                timing: self.timing.clone(),
            })
            .collect()
    }
}

/// One accelerator instance as a runtime device.
pub(crate) struct FpgaDevice {
    index: usize,
    board: Arc<FpgaBoard>,
    /// The emulator's timing model: host copies into the u-dma-buf run at its A53 memcpy speed.
    timing: Option<TimingModel>,
}

impl FpgaDevice {
    fn accelerator(&self) -> &Accelerator {
        // `index` comes from enumerating the board's accelerators, which never change.
        &self.board.accelerators()[self.index]
    }
}

impl Backend for FpgaDevice {
    fn device(&self) -> Device {
        Device::Fpga(self.index as u8)
    }

    /// An accelerator's AXI DMA moves bursts of 16 beats (PG021's default maximum burst
    /// size) of a 128-bit memory-mapped port (the ZynqMP's S_AXI_HP width): 256 bytes. The
    /// board configuration does not state either yet; a board built otherwise reports wrong
    /// here until it does.
    fn grain(&self) -> crate::hal::DeviceGrain {
        crate::hal::DeviceGrain {
            dma_burst: 16 * 16,
            ..crate::hal::DeviceGrain::CACHE_LINE_64
        }
    }

    fn own_space(&self) -> Option<SpaceSpec> {
        let acc = self.accelerator();
        let memory = acc.memory();
        let name = memory.name().to_string();
        let range = self.board.pool_range(&name).unwrap_or(0..0);
        // A CPU copy into memory the FPGA reads: Zynq-like bandwidth for ranking sources, or
        // the timing model's A53 memcpy, then also enforced on every copy.
        let link = self.timing.as_ref().map(|t| LinkModel {
            latency: std::time::Duration::from_nanos(t.cpu_copy_latency_ns),
            bytes_per_second: match memory.cache_mode() {
                CacheMode::Cached => t.cpu_copy_cached_bps,
                CacheMode::Uncached => t.cpu_copy_uncached_bps,
            },
        });
        Some(SpaceSpec {
            pool_bytes: range.len(),
            link: link.unwrap_or(LinkModel::ZYNQ_HP),
            simulate: link.is_some(),
            virtual_clock: link.is_some() && crate::vclock::is_on(),
            fail_copies: false,
            host_mapped: true,
            memory: SpaceBacking::Mapped(MappedMemory {
                // SAFETY: `Board::pool_range` starts at offset 0 of the mapping and ends inside
                // it, so the offset stays inside the mapping's one allocation.
                base: unsafe { memory.base().add(range.start) },
                len: range.len(),
                owner: Arc::clone(&self.board) as Arc<dyn Any + Send + Sync>,
            }),
            name,
        })
    }

    fn arg_forms(&self) -> Forms {
        // The built-in kernels program the accelerator and wait: they take device slices, so
        // no reference covers the bytes its DMA engine (and the scaling pass after an inverse
        // FFT) writes. A user's host code runs over the u-dma-buf as over host memory.
        Forms::DeviceThenHost
    }

    fn completion(&self) -> std::result::Result<(), BackendError> {
        // Each accelerator call waits for its DMA and reports faults itself.
        Ok(())
    }

    fn handle(&self) -> Option<&(dyn Any + Send + Sync)> {
        Some(self.accelerator())
    }
}

/// The accelerator a check asks about: its core and the board's configuration say what it
/// takes.
fn asked<'c>(dev: &'c DeviceCtx<'_>) -> std::result::Result<&'c Accelerator, Refusal> {
    dev.device_handle::<Accelerator>()
        .ok_or_else(|| Refusal::new(format!("{} is not an FPGA accelerator", dev.device())))
}

/// The `accepts` check of `fft` on an FPGA: sizes its FFT core transforms (none on a ZIP core).
fn fft_fits(
    dev: &DeviceCtx<'_>,
    _dir: FftDirection,
    points: usize,
    _input: usize,
    _output: usize,
) -> std::result::Result<(), Refusal> {
    asked(dev)?.check_fft(points).map_err(Refusal::from)
}

/// The `accepts` check of `fft_in_place` on an FPGA, as `fft`'s.
fn fft_in_place_fits(
    dev: &DeviceCtx<'_>,
    dir: FftDirection,
    points: usize,
    data: usize,
) -> std::result::Result<(), Refusal> {
    fft_fits(dev, dir, points, data, data)
}

/// The `accepts` check of `zip` on an FPGA: operations its ZIP core has (none on an FFT core).
fn zip_fits(
    dev: &DeviceCtx<'_>,
    op: ZipOp,
    elements: usize,
    _b: usize,
    _out: usize,
) -> std::result::Result<(), Refusal> {
    // The kernel splits long ZIPs into pieces the core takes; check one piece.
    let acc = asked(dev)?;
    let piece = acc.max_elems().map_or(elements, |max| elements.min(max));
    acc.check_zip(op, piece).map_err(Refusal::from)
}

/// The accelerator a kernel runs on, and the byte offset of an argument in its u-dma-buf.
fn accelerator<'c>(ctx: &'c KernelCtx<'_>) -> Result<&'c Accelerator> {
    ctx.device_handle::<Accelerator>().ok_or_else(|| {
        ctx.error(
            "fpga",
            BackendError::Invalid("not an FPGA accelerator".to_string()),
        )
    })
}

fn offset_of(ctx: &KernelCtx, acc: &Accelerator, (addr, bytes): (usize, usize)) -> Result<usize> {
    let base = acc.memory().base().as_ptr() as usize;
    match addr.checked_sub(base) {
        Some(offset)
            if offset
                .checked_add(bytes)
                .is_some_and(|end| end <= acc.memory().len()) =>
        {
            Ok(offset)
        }
        _ => Err(ctx.error(
            "fpga",
            BackendError::Invalid(format!(
                "an argument does not lie in {}'s u-dma-buf",
                acc.name()
            )),
        )),
    }
}

#[rimms_macros::kernel(api = apis::fft, device = fpga, accepts = fft_fits)]
fn fft(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    input: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    // The core moves as many rows as the input has: a shorter output would be written past.
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "fft", shape::same_len(&["input", "output"], lens))?;
    shape_fits(ctx, "fft", shape::whole_rows(points, input.len()))?;
    let acc = accelerator(ctx)?;
    let batch = input.len() / points;
    acc.fft(
        dir,
        points,
        batch,
        offset_of(ctx, acc, input.extent())?,
        offset_of(ctx, acc, output.extent())?,
    )
    .map_err(|e| ctx.error("fft", e))
}

#[rimms_macros::kernel(api = apis::fft_in_place, device = fpga, accepts = fft_in_place_fits)]
fn fft_in_place(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    data: DevSliceMut<C32>,
) -> Result<()> {
    shape_fits(ctx, "fft_in_place", shape::whole_rows(points, data.len()))?;
    let acc = accelerator(ctx)?;
    let offset = offset_of(ctx, acc, data.extent())?;
    acc.fft(dir, points, data.len() / points, offset, offset)
        .map_err(|e| ctx.error("fft_in_place", e))
}

#[rimms_macros::kernel(api = apis::zip, device = fpga, accepts = zip_fits)]
fn zip(
    ctx: &KernelCtx,
    op: ZipOp,
    a: DevSlice<C32>,
    b: DevSlice<C32>,
    #[out] c: DevSliceMut<C32>,
) -> Result<()> {
    // The core reads as many elements of each input as it writes to the output.
    let lens = [a.len(), b.len(), c.len()];
    shape_fits(ctx, "zip", shape::same_len(&["a", "b", "out"], lens))?;
    let acc = accelerator(ctx)?;
    let (a_at, b_at, c_at) = (
        offset_of(ctx, acc, a.extent())?,
        offset_of(ctx, acc, b.extent())?,
        offset_of(ctx, acc, c.extent())?,
    );
    acc.zip_in_pieces(op, c.len(), a_at, b_at, c_at)
        .map_err(|e| ctx.error("zip", e))
}

/// The `accepts` check of `zip_rows` on an FPGA: whole rows, and the operation on one row as
/// [`zip_fits`] checks it (the kernel runs one row at a time, each split as a ZIP is).
fn zip_rows_fits(
    dev: &DeviceCtx<'_>,
    op: ZipOp,
    a: usize,
    row: usize,
    out: usize,
) -> std::result::Result<(), Refusal> {
    if row == 0 || a % row != 0 || out != a {
        return Err(Refusal::new(format!(
            "zip_rows of {a} elements by a row of {row} into {out}: not whole rows"
        )));
    }
    zip_fits(dev, op, row, row, row)
}

/// `out[r] = a[r] op row` on the ZIP core, one row at a time: each row of `a` and the shared
/// row are one ZIP (staged into one packet by the driver, as any ZIP whose inputs are apart).
#[rimms_macros::kernel(api = apis::zip_rows, device = fpga, accepts = zip_rows_fits)]
fn zip_rows(
    ctx: &KernelCtx,
    op: ZipOp,
    a: DevSlice<C32>,
    row: DevSlice<C32>,
    #[out] c: DevSliceMut<C32>,
) -> Result<()> {
    let acc = accelerator(ctx)?;
    let len = row.len();
    if len == 0 || a.len() % len != 0 || c.len() != a.len() {
        return Err(ctx.error(
            "zip_rows",
            BackendError::Invalid(format!(
                "{} elements by a row of {len} into {}: not whole rows",
                a.len(),
                c.len()
            )),
        ));
    }
    let (a_at, row_at, out_at) = (
        offset_of(ctx, acc, a.extent())?,
        offset_of(ctx, acc, row.extent())?,
        offset_of(ctx, acc, c.extent())?,
    );
    let row_bytes = row.bytes();
    for r in 0..a.len() / len {
        let at = r * row_bytes;
        acc.zip_in_pieces(op, len, a_at + at, row_at, out_at + at)
            .map_err(|e| ctx.error("zip_rows", e))?;
    }
    Ok(())
}

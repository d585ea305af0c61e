//! The facade the runtime wires in: a board's u-dma-buf memory and its accelerator instances.
//!
//! [`FpgaBoard::open`] maps every u-dma-buf and register page a [`BoardConfig`] names and hands
//! out one [`Accelerator`] per instance (the runtime's `fpga(n)` is the n-th). An accelerator's
//! [`fft`](Accelerator::fft) and [`zip`](Accelerator::zip) are blocking calls on **byte offsets
//! into its u-dma-buf**: the runtime keeps FPGA-bound buffers there, so nothing is copied in or
//! out; only ownership of exactly the ranges that change hands moves by cache maintenance:
//!
//! 1. `sync_for_device` of every input range (the CPU's writes reach memory) and of the output
//!    range (no dirty CPU line can be evicted over the device's output later);
//! 2. the DMA transfer(s) through the core, waited for with the bounded wait;
//! 3. `sync_for_cpu` of the output range (the CPU drops stale lines and reads what the device
//!    wrote). This step is done after a fault too, since the device may have written part of
//!    it.
//!
//! Costs that a copy-free design still pays, and where:
//!
//! - **Inverse FFT scaling.** The core does not divide by N, the `fft` API does. After step 3
//!   the CPU multiplies the output (2N floats per row) by 1/N in place in the u-dma-buf: one
//!   read and one write of 8N bytes per row, after which those lines are dirty in the CPU cache
//!   (the next device use of the range syncs them again, as step 1 does anyway). On an
//!   uncached mapping this pass runs at uncached speed.
//! - **ZIP staging.** The core wants input 0 and input 1 as one packet, so they must be
//!   adjacent. When `b` starts exactly where `a` ends (the runtime can allocate them that way)
//!   the DMA reads them in place. Otherwise the driver copies both into a **staging area it
//!   owns**, at the top of the u-dma-buf, one per ZIP instance, `2 · max_floats · 4` bytes
//!   (32 KiB at the default 4,096), and streams from there: a CPU copy of `16·n` bytes and one
//!   more `sync_for_device`. The staging areas are not part of [`FpgaBoard::pool_range`], so the
//!   runtime's allocator never hands them out, and ranges that overlap them are refused.
//! - **Batched FFT.** The core streams one frame per packet, so a batch of `rows` transforms
//!   is `rows` DMA round trips; the syncs cover the whole batch once.
//!
//! Each accelerator serialises its own calls (a mutex); different instances run in parallel.
//! Every engine is reset when the board is opened, and again before the first call after any
//! fault or timeout: an FFT through its reset GPIO (core and DMA together, so no partial frame
//! survives in the core), then the DMA's soft reset and start. On a fault in a batched FFT the
//! rows before the failing one hold new results; all other outputs keep their previous bytes
//! when the device wrote nothing.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use super::axi_dma::{AxiDma, Channel};
use super::config::{AccelKind, AcceleratorConfig, BoardConfig};
use super::fault::{rejected, unsupported, Result};
use super::fft_ip::{FftIp, DEFAULT_CONFIG_OFFSET, POINT_BYTES};
use super::regs::RegisterPage;
use super::udmabuf::Udmabuf;
use super::zip_ip::{ZipCoreOp, ZipIp};
use crate::hal::BackendError;
use crate::hal::{During, Error, FftDirection, ZipOp};

/// Staging areas are whole 4 KiB pages.
const STAGING_ALIGN: usize = 4096;

/// An opened board.
#[derive(Debug)]
pub struct FpgaBoard {
    config: BoardConfig,
    memories: Vec<Arc<Udmabuf>>,
    /// Per memory: where the reserved staging areas start (the pool ends there).
    pool_end: Vec<usize>,
    accelerators: Vec<Accelerator>,
}

#[derive(Debug)]
enum Core {
    Fft(FftIp),
    Zip(ZipIp),
}

/// One accelerator instance: a core, its AXI DMA, and the u-dma-buf they use.
#[derive(Debug)]
pub struct Accelerator {
    index: usize,
    name: String,
    kind: AccelKind,
    memory: Arc<Udmabuf>,
    dma: AxiDma,
    core: Core,
    /// This instance's staging area (ZIP only).
    staging: Option<Range<usize>>,
    /// All staging areas of its memory, which user ranges must not touch.
    reserved: Range<usize>,
    busy: Mutex<()>,
    /// Its timeline's name on the virtual clock ([`AcceleratorConfig::clock_key`]).
    clock_key: String,
}

/// An accelerator taken for one call: its lock, and on the virtual clock its timeline (the
/// call starts when the one before it ended, and the accelerator is free again where this one
/// ends, its DMA transfers included).
struct Held<'a> {
    key: &'a str,
    _lock: MutexGuard<'a, ()>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Before the lock is given back (fields drop after this): the next call's `acquire`
        // sees this one's end.
        crate::vclock::release(self.key);
    }
}

impl FpgaBoard {
    /// Maps every u-dma-buf and register page of `cfg`, then resets and starts every engine
    /// (an FFT's core and DMA together through its reset GPIO).
    ///
    /// A configuration that does not fit the board is [`Error::Config`]; a part that cannot be
    /// opened or reset is the driver's [`BackendError`], reported as [`Error::Backend`].
    pub fn open(cfg: &BoardConfig) -> crate::hal::Result<Self> {
        cfg.validate("board configuration")?;
        let setup = |e| Error::from_backend(During::Setup, e);
        let memories = cfg
            .udmabufs
            .iter()
            .map(|u| Udmabuf::open(u).map(Arc::new))
            .collect::<Result<Vec<_>>>()
            .map_err(setup)?;
        let mut pool_end: Vec<usize> = memories.iter().map(|m| m.len()).collect();

        // Carve the ZIP staging areas from the top of their memories.
        let mut staging = Vec::with_capacity(cfg.accelerators.len());
        for a in &cfg.accelerators {
            let mi = memory_index(cfg, a)?;
            if a.kind == AccelKind::Zip {
                let bytes = a
                    .zip_max_floats()
                    .checked_mul(8)
                    .map(|b| b.div_ceil(STAGING_ALIGN) * STAGING_ALIGN)
                    .filter(|&b| b < pool_end[mi])
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "accelerator {}: a staging area for 2 x {} floats does not fit in {} ({} bytes left)",
                            a.name,
                            a.zip_max_floats(),
                            a.memory,
                            pool_end[mi]
                        ))
                    })?;
                pool_end[mi] -= bytes;
                staging.push(Some(pool_end[mi]..pool_end[mi] + bytes));
            } else {
                staging.push(None);
            }
        }

        let timeout = cfg.poll_timeout();
        let mut accelerators = Vec::with_capacity(cfg.accelerators.len());
        for (index, (a, staging)) in cfg.accelerators.iter().zip(staging).enumerate() {
            let mi = memory_index(cfg, a)?;
            let memory = Arc::clone(&memories[mi]);
            let dma_regs = RegisterPage::open_block(&format!("{} (AXI DMA)", a.name), &a.dma)
                .map_err(setup)?;
            let ctrl = RegisterPage::open_block(&format!("{} (control)", a.name), &a.control)
                .map_err(setup)?;
            let core = match a.kind {
                AccelKind::Fft => {
                    let reset = a
                        .reset
                        .as_ref()
                        .map(|r| RegisterPage::open_block(&format!("{} (reset GPIO)", a.name), r))
                        .transpose()
                        .map_err(setup)?;
                    if reset.is_none() {
                        tracing::warn!(accel = %a.name, "no reset GPIO configured: after a fault only the DMA is reset, and a partial frame may stay in the core");
                    }
                    Core::Fft(FftIp::new(
                        &a.name,
                        ctrl,
                        a.fft_config_path(),
                        a.config_offset.unwrap_or(DEFAULT_CONFIG_OFFSET),
                        reset,
                        a.fft_max_points(),
                    ))
                }
                AccelKind::Zip => Core::Zip(ZipIp::new(&a.name, ctrl, a.zip_max_floats())),
            };
            accelerators.push(Accelerator {
                index,
                name: a.name.clone(),
                kind: a.kind,
                dma: AxiDma::new(&a.name, dma_regs, timeout, a.dma_limits()),
                core,
                staging,
                reserved: pool_end[mi]..memory.len(),
                memory,
                busy: Mutex::new(()),
                clock_key: a.clock_key(),
            });
        }
        for a in &accelerators {
            a.reset().map_err(setup)?;
        }
        tracing::info!(
            memories = memories.len(),
            accelerators = accelerators.len(),
            "FPGA board opened"
        );
        Ok(Self {
            config: cfg.clone(),
            memories,
            pool_end,
            accelerators,
        })
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &BoardConfig {
        &self.config
    }

    /// The u-dma-buf regions, in configuration order.
    pub fn memories(&self) -> &[Arc<Udmabuf>] {
        &self.memories
    }

    /// A u-dma-buf region by name.
    pub fn memory(&self, name: &str) -> Option<&Arc<Udmabuf>> {
        self.memories.iter().find(|m| m.name() == name)
    }

    /// The bytes of a u-dma-buf the runtime's allocator may use: everything below the ZIP
    /// staging areas.
    pub fn pool_range(&self, name: &str) -> Option<Range<usize>> {
        let i = self.memories.iter().position(|m| m.name() == name)?;
        Some(0..self.pool_end[i])
    }

    /// The accelerator instances; the n-th is the runtime's `fpga(n)`.
    pub fn accelerators(&self) -> &[Accelerator] {
        &self.accelerators
    }

    /// An accelerator by name.
    pub fn accelerator(&self, name: &str) -> Option<&Accelerator> {
        self.accelerators.iter().find(|a| a.name == name)
    }
}

fn memory_index(cfg: &BoardConfig, a: &AcceleratorConfig) -> crate::hal::Result<usize> {
    cfg.udmabufs
        .iter()
        .position(|u| u.name == a.memory)
        .ok_or_else(|| {
            Error::Config(format!(
                "accelerator {}: no u-dma-buf {:?}",
                a.name, a.memory
            ))
        })
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

impl Accelerator {
    /// Position in the board's list (`fpga(index)`).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Instance name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// FFT or ZIP.
    pub fn kind(&self) -> AccelKind {
        self.kind
    }

    /// The u-dma-buf its offsets refer to.
    pub fn memory(&self) -> &Arc<Udmabuf> {
        &self.memory
    }

    /// Its DMA engine (register read-back in tests and diagnostics).
    pub fn dma(&self) -> &AxiDma {
        &self.dma
    }

    /// The core's control page.
    pub fn control(&self) -> &RegisterPage {
        match &self.core {
            Core::Fft(f) => f.ctrl(),
            Core::Zip(z) => z.ctrl(),
        }
    }

    /// The FFT core's driver, for an FFT instance (diagnostics and tests).
    pub fn fft_ip(&self) -> Option<&FftIp> {
        match &self.core {
            Core::Fft(f) => Some(f),
            Core::Zip(_) => None,
        }
    }

    /// Largest FFT, for an FFT instance.
    pub fn max_points(&self) -> Option<usize> {
        match &self.core {
            Core::Fft(f) => Some(f.max_points()),
            Core::Zip(_) => None,
        }
    }

    /// Most complex elements per ZIP, for a ZIP instance.
    pub fn max_elems(&self) -> Option<usize> {
        match &self.core {
            Core::Zip(z) => Some(z.max_elems()),
            Core::Fft(_) => None,
        }
    }

    /// This instance's staging area in its u-dma-buf (ZIP only).
    pub fn staging(&self) -> Option<Range<usize>> {
        self.staging.clone()
    }

    /// Takes the accelerator for one call (see [`Held`]).
    fn take(&self) -> Held<'_> {
        // The lock guards no data, only the engine's turn: a panic while it was held leaves
        // nothing half-done that the next call's reset check does not catch.
        let lock = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        crate::vclock::acquire(&self.clock_key);
        Held {
            key: &self.clock_key,
            _lock: lock,
        }
    }

    /// Resets core and DMA now (the board did at open; every call after a fault does).
    pub fn reset(&self) -> Result<()> {
        crate::vclock::exclude(|| {
            let _held = self.take();
            self.hard_reset()
        })
    }

    /// The reset itself: an FFT's reset GPIO (core and DMA), then the DMA's soft reset, which
    /// also waits until the DMA is out of reset, then run.
    fn hard_reset(&self) -> Result<()> {
        self.dma.mark_not_ready();
        if let Core::Fft(f) = &self.core {
            f.hard_reset()?;
        }
        self.dma.reset()?;
        self.dma.start()
    }

    /// Resets the engine if a fault left it not ready. Called with `busy` held.
    fn prepare(&self) -> Result<()> {
        if self.dma.is_ready() {
            return Ok(());
        }
        self.hard_reset()
    }

    /// Runs `op` on a ready engine; any failure leaves it to be reset before the next call.
    fn run<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<T> {
        let r = self.prepare().and_then(|()| op());
        if r.is_err() {
            self.dma.mark_not_ready();
        }
        r
    }

    fn wrong_kind(&self, api: &'static str) -> BackendError {
        unsupported(
            &self.name,
            api,
            format!("{} is a {} accelerator", self.name, self.kind),
        )
    }

    fn fft_core(&self) -> Result<&FftIp> {
        match &self.core {
            Core::Fft(f) => Ok(f),
            Core::Zip(_) => Err(self.wrong_kind("fft")),
        }
    }

    fn zip_core(&self) -> Result<&ZipIp> {
        match &self.core {
            Core::Zip(z) => Ok(z),
            Core::Fft(_) => Err(self.wrong_kind("zip")),
        }
    }

    /// Whether an `n`-point FFT runs here ([`BackendError::Unsupported`] if not), without running it.
    pub fn check_fft(&self, n: usize) -> Result<()> {
        self.fft_core()?.check(n)
    }

    /// Whether a complex ZIP of `n` elements runs here, without running it.
    pub fn check_zip(&self, op: ZipOp, n: usize) -> Result<()> {
        let core = self.zip_core()?;
        let cop = ZipCoreOp::for_complex(op).map_err(|why| unsupported(&self.name, "zip", why))?;
        core.check(cop, n.saturating_mul(2))
    }

    /// Checks a caller's range: inside the u-dma-buf, clear of the staging areas, aligned.
    fn user_range(&self, what: &str, offset: usize, len: usize, align: usize) -> Result<u64> {
        self.memory.check_range(offset, len)?;
        if offset % align != 0 {
            return Err(rejected(
                &self.name,
                format!("{what} offset {offset:#x} is not {align}-byte aligned"),
            ));
        }
        if overlaps(&(offset..offset + len), &self.reserved) {
            return Err(rejected(
                &self.name,
                format!(
                    "{what} {offset:#x}+{len:#x} overlaps the ZIP staging areas at {:#x}..{:#x}",
                    self.reserved.start, self.reserved.end
                ),
            ));
        }
        self.memory.phys_of(offset)
    }

    /// `batch` FFTs of `n` points, rows of `n` complex f32 back to back, from `input` to
    /// `output` (byte offsets in the u-dma-buf, 8-byte aligned; equal for in place, otherwise
    /// not overlapping). The inverse is scaled by 1/N like the runtime's `fft` API. Everything
    /// is checked before any register is written.
    pub fn fft(
        &self,
        dir: FftDirection,
        n: usize,
        batch: usize,
        input: usize,
        output: usize,
    ) -> Result<()> {
        let core = self.fft_core()?;
        core.check(n)?;
        if batch == 0 {
            return Err(rejected(&self.name, "an FFT batch of 0 rows"));
        }
        let row = n * POINT_BYTES;
        let total = row
            .checked_mul(batch)
            .ok_or_else(|| rejected(&self.name, "batch size overflows"))?;
        let in_phys = self.user_range("input", input, total, 8)?;
        let out_phys = self.user_range("output", output, total, 8)?;
        if input != output && overlaps(&(input..input + total), &(output..output + total)) {
            return Err(rejected(
                &self.name,
                "input and output overlap without being the same range",
            ));
        }
        for (ch, phys) in [(Channel::Mm2s, in_phys), (Channel::S2mm, out_phys)] {
            self.dma.check_buffer(ch, phys, row)?;
            self.dma
                .check_buffer(ch, phys + (total - row) as u64, row)?;
        }

        // Under a timing model the call's wall time is the emulator's: it is excluded, and the
        // modelled time of its parts (syncs, registers, transfers, the scaling pass) counts.
        crate::vclock::exclude(|| {
            self.fft_locked(core, dir, n, batch, [input, output], [in_phys, out_phys])
        })
    }

    fn fft_locked(
        &self,
        core: &FftIp,
        dir: FftDirection,
        n: usize,
        batch: usize,
        [input, output]: [usize; 2],
        [in_phys, out_phys]: [u64; 2],
    ) -> Result<()> {
        let row = n * POINT_BYTES;
        let total = row * batch;
        let _held = self.take();
        self.memory.sync_for_device(input, total)?;
        if output != input {
            self.memory.sync_for_device(output, total)?;
        }
        for r in 0..batch {
            let off = (r * row) as u64;
            let one = || core.transform(&self.dma, dir, n, in_phys + off, out_phys + off);
            if let Err(e) = self.run(one) {
                tracing::warn!(accel = %self.name, row = r, batch, error = %e, "FFT failed");
                // The device may have written part of the output: hand it back regardless.
                let _ = self.memory.sync_for_cpu(output, total);
                return Err(e);
            }
        }
        self.memory.sync_for_cpu(output, total)?;
        if dir == FftDirection::Inverse {
            self.memory
                .scale_f32(output, 2 * n * batch, 1.0 / n as f32)?;
        }
        Ok(())
    }

    /// A complex ZIP of `n` elements: `out = a op b` on interleaved complex f32 at byte offsets
    /// `a`, `b`, `out` in the u-dma-buf. Add and sub run as the core's float ops on `2n`
    /// floats, mul as its complex multiply; div and mul-by-conjugate are
    /// [`BackendError::Unsupported`]. See the module docs for when the inputs are staged.
    pub fn zip(&self, op: ZipOp, n: usize, a: usize, b: usize, out: usize) -> Result<()> {
        self.zip_core()?;
        let cop = ZipCoreOp::for_complex(op).map_err(|why| unsupported(&self.name, "zip", why))?;
        let floats = n
            .checked_mul(2)
            .ok_or_else(|| rejected(&self.name, "element count overflows"))?;
        self.zip_f32(cop, floats, a, b, out)
    }

    /// [`Accelerator::zip`] of any length: a ZIP longer than the core's capacity runs as
    /// consecutive pieces of at most `max_floats` floats (`max_floats / 2` complex elements)
    /// per input. Element-wise work splits exactly, so only the operations the core lacks are
    /// refused.
    pub fn zip_in_pieces(&self, op: ZipOp, n: usize, a: usize, b: usize, out: usize) -> Result<()> {
        let piece = self.max_elems().unwrap_or(n).max(1);
        for start in (0..n).step_by(piece) {
            // An element is an interleaved complex: two f32.
            let at = start * 2 * std::mem::size_of::<f32>();
            self.zip(op, piece.min(n - start), a + at, b + at, out + at)?;
        }
        Ok(())
    }

    /// The core's own operation on `floats` f32 values: `out[i] = a[i] op b[i]` (or the complex
    /// multiply of pairs). `a` and `out` must be 8-byte aligned, `b` 4-byte aligned.
    pub fn zip_f32(
        &self,
        op: ZipCoreOp,
        floats: usize,
        a: usize,
        b: usize,
        out: usize,
    ) -> Result<()> {
        let core = self.zip_core()?;
        core.check(op, floats)?;
        let bytes = floats * 4;
        self.user_range("input a", a, bytes, 4)?;
        self.user_range("input b", b, bytes, 4)?;
        let out_phys = self.user_range("output", out, bytes, 8)?;
        let out_range = out..out + bytes;
        // In place only when the inputs are already one packet, 8-byte aligned, and the output
        // is one of them or clear of both.
        let direct = b == a + bytes
            && a % 8 == 0
            && (out == a || out == b || !overlaps(&out_range, &(a..a + 2 * bytes)));
        let staging = self
            .staging
            .clone()
            .ok_or_else(|| rejected(&self.name, "no staging area"))?;
        let input = if direct { a } else { staging.start };
        let in_phys = self.memory.phys_of(input)?;
        self.dma.check_buffer(Channel::Mm2s, in_phys, 2 * bytes)?;
        self.dma.check_buffer(Channel::S2mm, out_phys, bytes)?;

        crate::vclock::exclude(|| {
            self.zip_locked(
                core,
                op,
                floats,
                [a, b, out],
                direct,
                &staging,
                [in_phys, out_phys],
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn zip_locked(
        &self,
        core: &ZipIp,
        op: ZipCoreOp,
        floats: usize,
        [a, b, out]: [usize; 3],
        direct: bool,
        staging: &Range<usize>,
        [in_phys, out_phys]: [u64; 2],
    ) -> Result<()> {
        let bytes = floats * 4;
        let input = if direct { a } else { staging.start };
        let out_range = out..out + bytes;
        let _held = self.take();
        if !direct {
            // The CPU reads a and b through its cache: coherent, since every device write
            // into the u-dma-buf is followed by a sync_for_cpu of its range.
            self.memory.copy_within(a, staging.start, bytes)?;
            self.memory.copy_within(b, staging.start + bytes, bytes)?;
        }
        self.memory.sync_for_device(input, 2 * bytes)?;
        let in_range = input..input + 2 * bytes;
        if !(out_range.start >= in_range.start && out_range.end <= in_range.end) {
            self.memory.sync_for_device(out, bytes)?;
        }
        let result = self.run(|| core.run(&self.dma, op, floats, in_phys, out_phys));
        let back = self.memory.sync_for_cpu(out, bytes);
        result?;
        back
    }
}

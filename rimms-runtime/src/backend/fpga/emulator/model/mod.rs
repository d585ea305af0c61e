//! The register-level model: the bus log replayed in order, the DMA channels' state machines,
//! the cores, the cache model, and one poll loop over all of it.
//!
//! Every register write the driver makes arrives through the bus log ([`BusLog`]) exactly once
//! and in order, so the model acts on *writes*, not on sampled values: back-to-back RS, address,
//! LENGTH work; an address written after LENGTH is not used for that transfer (address and
//! length are latched when LENGTH is written); a GPIO pulse is a rising edge. Timers (a soft
//! reset in progress, a transfer in flight) advance before each write is handled.
//!
//! The model is the only writer of the register pages: a driver's write reaches it through the
//! log (and a read waits until the page's writes are handled, as AXI orders a read after
//! earlier writes to the same slave), and the model stores what the block shows there (see [`regmap`]: reserved bits and offsets, the
//! configured widths, DMACR during and after a reset, DMASR, S2MM LENGTH = bytes received).
//! With one writer, no update can be lost to a race with the driver (issue 31: a register
//! that the driver and the model both wrote could keep a stale value for good).

mod ip;
mod mapped;
mod regmap;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use memmap2::MmapOptions;
use rustfft::FftPlanner;

use super::super::timing::TimingModel;
use super::files::open_made;
use super::{Block, Control, EmulatorLayout, InjectedFault, Rule};
use crate::backend::fpga::axi_dma::{
    Channel, DmaErrorBit, DMACR_RESET, DMACR_RS, DMASR_ERR_IRQ, DMASR_ERR_MASK, DMASR_HALTED,
    DMASR_IDLE, DMASR_INT_ERR, DMASR_IOC_IRQ, DMASR_IRQ_MASK,
};
use crate::backend::fpga::buslog::{BusLog, BusWrite};
use crate::backend::fpga::config::{AccelKind, BoardConfig, FftConfigPath};
use crate::backend::fpga::fft_ip::{GPIO_DATA1, GPIO_DATA2, GPIO_TRI1, GPIO_TRI2, POWER_ON_CONFIG};
use crate::backend::fpga::udmabuf::{SyncFor, CLASS_DIRS};
use crate::backend::fpga::zip_ip::{ZIP_OP_REG, ZIP_SIZE_REG};
use crate::hal::{During, Error, Result};
use ip::{fft_packet, zip_packet, Core, FftCore, ZipCore};
use mapped::{drain_syncs, io, Cache, Mem, Page};
pub(crate) use regmap::DMACR_RESET_VALUE;
use regmap::{Reg, DMACR_ONE, DMACR_WRITABLE};

/// Idle polls that spin before the loop starts sleeping.
const SPIN_POLLS: u32 = 64;
/// Sleep between idle polls.
const IDLE_SLEEP: Duration = Duration::from_micros(20);
/// Bytes of core output the stream holds while S2MM is not armed: the core's output buffer
/// and the AXI-Stream path into S2MM (one 2,048-point FFT frame, 16 KiB, plus as much again
/// for a data FIFO; an assumption, CEDR's images do not publish their FIFO depths). Past it the
/// core stops taking input and MM2S does not complete until S2MM takes data.
pub const STREAM_FIFO_BYTES: usize = 32 << 10;
/// How long core output may wait in the stream for S2MM to be armed before the model records
/// [`Rule::OutputWithoutS2mm`]: a driver that arms S2MM after MM2S does so within microseconds
/// (the bound leaves room for a loaded machine to deschedule it); output left waiting this
/// long means S2MM was never (re-)armed, and on the board it either stalls the core or lands
/// in the next transfer's buffer. Shorter than the drivers' default poll timeout (200 ms), so
/// in strict mode the driver sees the violation's error rather than a timeout.
pub const STREAM_WAIT: Duration = Duration::from_millis(50);

/// What the model keeps per DMA channel.
#[derive(Debug)]
struct Chan {
    status: u32,
    /// DMACR as written (masked to its writable bits).
    cr: u32,
    addr: u64,
    /// The address register was written since the last LENGTH.
    addr_fresh: bool,
    /// The latched (address, length) of the transfer in flight (MM2S) or armed (S2MM).
    latched: Option<(u64, u32)>,
    /// MM2S: when the transfer in flight completes.
    due: Option<Instant>,
    /// MM2S: the data read at start, and the fault it carries.
    data: Option<(Vec<u8>, Option<InjectedFault>)>,
    /// MM2S: the transfer is stalled for good (the core cannot pass data on).
    stalled: bool,
}

impl Chan {
    fn reset() -> Self {
        Self {
            status: DMASR_HALTED,
            cr: DMACR_RESET_VALUE,
            addr: 0,
            addr_fresh: false,
            latched: None,
            due: None,
            data: None,
            stalled: false,
        }
    }

    fn busy(&self) -> bool {
        self.latched.is_some()
    }
}

/// One packet of core output on its way to S2MM.
struct Packet {
    data: Vec<u8>,
    fault: Option<InjectedFault>,
    /// When it entered the stream.
    since: Instant,
    /// A violation already accounts for it (the packet that made it, or its wait).
    reported: bool,
}

struct AccelModel {
    idx: usize,
    name: String,
    /// Its timeline's name on the virtual clock (`AcceleratorConfig::clock_key`).
    clock_key: String,
    dma: Page,
    ctrl: Page,
    reset: Option<Page>,
    mm2s: Chan,
    s2mm: Chan,
    /// A soft reset in progress, until then.
    resetting: Option<Instant>,
    /// The reset GPIO holds core and DMA in reset.
    held: bool,
    /// Reset-GPIO registers: data, tri.
    reset_gpio: [u32; 2],
    core: Core,
    /// The DMA's address width (SA_MSB / DA_MSB exist only over 32).
    addr_bits: u32,
    /// The LENGTH registers' width as a mask (`c_sg_length_width`).
    len_mask: u32,
    /// Core output waiting for S2MM, oldest first.
    stream: VecDeque<Packet>,
    /// MM2S has sent everything but the stream is over its depth: it completes once S2MM takes
    /// enough.
    mm2s_waiting: bool,
}

/// The whole emulated board.
pub(crate) struct Board {
    mems: Vec<Mem>,
    accels: Vec<AccelModel>,
    bus: BusLog,
    floor: Duration,
    /// How long a soft reset of a running engine takes (PG021: until in-flight transfers drain),
    /// long enough that a driver which does not wait for DMACR bit 2 to clear is caught. An
    /// engine with both channels halted has nothing to drain and resets at once.
    reset_time: Duration,
    timing: Option<TimingModel>,
    /// Waits modelled transfer times out ([`EmulatorLayout::real_time`]).
    pace: bool,
}

impl Board {
    /// Maps everything the configuration names; the layout gives the physical addresses.
    pub(crate) fn open(
        dir: &Path,
        config: &BoardConfig,
        layout: &EmulatorLayout,
    ) -> Result<(Self, Control)> {
        let mut mems = Vec::new();
        for (u, l) in config.udmabufs.iter().zip(&layout.udmabufs) {
            let dev = u.dev_root.join(&u.name);
            let f = open_made(&dev, true)?;
            let map = MmapOptions::new()
                .len(l.size)
                .map_raw(&f)
                .map_err(|e| io("map", &dev, e))?;
            let class_dir = u
                .sysfs_root
                .join(CLASS_DIRS[usize::from(l.old_class_path)])
                .join(&u.name);
            let mut fifos = Vec::new();
            for which in [SyncFor::Device, SyncFor::Cpu] {
                let p = class_dir.join(which.attribute());
                let f = open_made(&p, false)?;
                fifos.push((which, f, Vec::new()));
            }
            let ack_path = class_dir.join(super::files::ACK_FILE);
            let ack_file = open_made(&ack_path, true)?;
            let ack = MmapOptions::new()
                .len(16)
                .map_raw(&ack_file)
                .map_err(|e| io("map", &ack_path, e))?;
            let words = l.size / 4;
            let cache = (l.cache == crate::backend::fpga::CacheMode::Cached).then(|| Cache {
                dram: vec![0; words],
                clean: vec![0; words],
            });
            mems.push(Mem {
                name: u.name.clone(),
                phys: l.phys_addr,
                map,
                words,
                cache,
                class_dir,
                fifos,
                ack,
            });
        }
        let mut accels = Vec::new();
        for (idx, a) in config.accelerators.iter().enumerate() {
            let core = match a.kind {
                AccelKind::Fft => Core::Fft(Box::new(FftCore {
                    path: a.fft_config_path(),
                    config_offset: a.config_offset.unwrap_or(0),
                    gpio: [0, u32::MAX, 0, u32::MAX],
                    queue: VecDeque::new(),
                    current: POWER_ON_CONFIG,
                    frame: None,
                    buf: Vec::new(),
                    planner: FftPlanner::new(),
                })),
                AccelKind::Zip => Core::Zip(ZipCore {
                    size: 0,
                    op: 0,
                    max_floats: a.zip_max_floats(),
                }),
            };
            accels.push(AccelModel {
                idx,
                name: a.name.clone(),
                clock_key: a.clock_key(),
                dma: Page::open(&a.dma.path)?,
                ctrl: Page::open(&a.control.path)?,
                reset: a.reset.as_ref().map(|r| Page::open(&r.path)).transpose()?,
                mm2s: Chan::reset(),
                s2mm: Chan::reset(),
                resetting: None,
                held: false,
                reset_gpio: [1, u32::MAX],
                core,
                addr_bits: a.dma_address_bits,
                len_mask: ((1u64 << a.dma_length_bits.min(32)) - 1) as u32,
                stream: VecDeque::new(),
                mm2s_waiting: false,
            });
        }
        let bus = BusLog::open("emulator", &super::files::bus_path(dir))
            .map_err(|e| Error::from_backend(During::Setup, e))?;
        let control = Control::new(
            accels.iter().map(|a| a.name.clone()).collect(),
            layout.strict,
        );
        Ok((
            Self {
                mems,
                accels,
                bus,
                floor: Duration::from_micros(layout.transfer_floor_us),
                reset_time: Duration::from_micros(layout.soft_reset_us),
                timing: layout.timing.clone(),
                pace: layout.real_time,
            },
            control,
        ))
    }

    /// Polls until `stop` is set.
    pub(crate) fn run(mut self, ctl: &Control, stop: &AtomicBool) {
        self.bus.set_closed(false);
        let mut idle = 0u32;
        while !stop.load(Ordering::Acquire) {
            let mut act = false;
            while let Some(w) = self.bus.next() {
                self.handle(w, Instant::now(), ctl);
                self.bus.mark_handled();
                act = true;
            }
            act |= drain_syncs(&mut self.mems, ctl);
            let (a, soon) = self.tick(Instant::now(), ctl);
            act |= a;
            ctl.epoch.fetch_add(1, Ordering::AcqRel);
            if act || soon {
                idle = 0;
                std::hint::spin_loop();
            } else {
                idle = idle.saturating_add(1);
                if idle < SPIN_POLLS {
                    std::hint::spin_loop();
                } else {
                    thread::sleep(IDLE_SLEEP);
                }
            }
        }
        self.bus.set_closed(true);
        tracing::debug!("FPGA emulator stopped");
    }

    /// Handles one register write at time `now`: timers first, then the write.
    fn handle(&mut self, w: BusWrite, now: Instant, ctl: &Control) {
        let (tag, off) = (usize::from(w.tag), w.offset as usize);
        let (ai, page) = (tag / 3, tag % 3);
        let Some(a) = self.accels.get_mut(ai) else {
            tracing::warn!(?w, "emulator: a write with an unknown tag");
            return;
        };
        a.advance(now, &mut self.mems, ctl);
        let block = [Block::Dma, Block::Control, Block::Reset][page];
        ctl.trace(ai, block, w.offset, w.value);
        let timing = (self.floor, self.reset_time, self.timing.as_ref(), self.pace);
        a.write(page, off, w.value, now, &mut self.mems, ctl, timing);
    }

    /// Advances every accelerator's timers to `now`: (anything happened, a timer is running).
    fn tick(&mut self, now: Instant, ctl: &Control) -> (bool, bool) {
        let (mut act, mut soon) = (false, false);
        for a in &mut self.accels {
            act |= a.advance(now, &mut self.mems, ctl);
            soon |= a.resetting.is_some() || (a.mm2s.due.is_some() && !a.mm2s.stalled);
        }
        (act, soon)
    }
}

/// The transfer floor, the soft-reset time, the timing model and whether modelled transfer
/// times are waited out.
type Timing<'a> = (Duration, Duration, Option<&'a TimingModel>, bool);

impl AccelModel {
    fn chan(&mut self, ch: Channel) -> &mut Chan {
        match ch {
            Channel::Mm2s => &mut self.mm2s,
            Channel::S2mm => &mut self.s2mm,
        }
    }

    fn violate(&mut self, ctl: &Control, rule: Rule, detail: String) {
        ctl.violate(Some(self.idx), rule, detail);
        if ctl.strict {
            // Strict mode: the driver must not carry on as if nothing happened.
            for ch in [Channel::Mm2s, Channel::S2mm] {
                self.raise(ch, DmaErrorBit::Internal);
            }
        }
    }

    /// Shows a channel's DMACR and DMASR as the core does.
    fn show(&mut self, ch: Channel) {
        let resetting = self.resetting.is_some();
        let (cr, sr) = {
            let c = self.chan(ch);
            (c.cr, c.status)
        };
        self.dma
            .publish(ch.dmacr(), regmap::dmacr_read(cr, resetting));
        self.dma.publish(ch.dmasr(), sr);
    }

    /// A DMA error on `ch` (PG021: the channel halts, DMACR.RS is cleared, Err_Irq is set).
    fn raise(&mut self, ch: Channel, bit: DmaErrorBit) {
        let c = self.chan(ch);
        c.status = (c.status | bit.mask() | DMASR_ERR_IRQ | DMASR_HALTED) & !DMASR_IDLE;
        c.cr &= !DMACR_RS;
        c.latched = None;
        c.due = None;
        c.data = None;
        if ch == Channel::Mm2s {
            self.mm2s_waiting = false;
        }
        self.show(ch);
        tracing::debug!(accel = %self.name, channel = %ch, bit = bit.bit(), "emulated DMA error");
    }

    /// Both channels to their reset state and registers; the stream into S2MM is flushed. In
    /// strict mode a violation on this accelerator that the harness has not yet cleared stays
    /// visible: the reset ends with DMAIntErr raised again (a reset must not hide it).
    fn reset_dma(&mut self, ctl: &Control) {
        self.stream.clear();
        self.mm2s_waiting = false;
        for ch in [Channel::Mm2s, Channel::S2mm] {
            *self.chan(ch) = Chan::reset();
            for off in [ch.addr(), ch.addr_msb(), ch.length()] {
                self.dma.publish(off, 0);
            }
            self.show(ch);
        }
        if ctl.poisoned(self.idx) {
            for ch in [Channel::Mm2s, Channel::S2mm] {
                self.raise(ch, DmaErrorBit::Internal);
            }
        }
    }

    /// Timers: a soft reset finishing, a transfer completing, output waiting too long for S2MM.
    /// True if anything happened.
    fn advance(&mut self, now: Instant, mems: &mut [Mem], ctl: &Control) -> bool {
        let mut act = false;
        if self.resetting.is_some_and(|t| now >= t) {
            self.resetting = None;
            self.reset_dma(ctl);
            tracing::debug!(accel = %self.name, "emulated AXI DMA reset done");
            act = true;
        }
        if !self.mm2s.stalled && self.mm2s.due.is_some_and(|t| now >= t) {
            self.complete_mm2s(now, mems, ctl);
            act = true;
        }
        let overdue = self
            .stream
            .front()
            .is_some_and(|p| !p.reported && now.saturating_duration_since(p.since) > STREAM_WAIT);
        if overdue && !self.s2mm.busy() {
            let bytes: usize = self.stream.iter().map(|p| p.data.len()).sum();
            for p in &mut self.stream {
                p.reported = true;
            }
            self.violate(
                ctl,
                Rule::OutputWithoutS2mm,
                format!("{bytes} bytes of core output waited over {} ms in the stream with S2MM not armed (arm S2MM for every transfer): on the board the core stalls or the next S2MM transfer receives them", STREAM_WAIT.as_millis()),
            );
            act = true;
        }
        act
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        page: usize,
        off: usize,
        v: u32,
        now: Instant,
        mems: &mut [Mem],
        ctl: &Control,
        timing: Timing<'_>,
    ) {
        match page {
            0 => self.dma_write(off, v, now, mems, ctl, timing),
            1 => {
                // Plain registers: they read back what was written.
                self.ctrl.publish(off, v);
                self.ctrl_write(off, v, ctl);
            }
            _ => {
                if let Some(p) = &mut self.reset {
                    p.publish(off, v);
                }
                self.reset_write(off, v, ctl);
            }
        }
    }

    fn dma_write(
        &mut self,
        off: usize,
        v: u32,
        now: Instant,
        mems: &mut [Mem],
        ctl: &Control,
        (floor, reset_time, model, pace): Timing<'_>,
    ) {
        let Some((ch, reg)) = regmap::dma_reg(off) else {
            // Reserved (the scatter-gather registers, absent in simple mode): reads 0.
            self.dma.publish(off, 0);
            return;
        };
        if reg == Reg::Cr && v & DMACR_RESET != 0 && self.resetting.is_some() && !self.held {
            // PG021: a reset of either channel resets the whole core; asking again while it
            // runs (CEDR's reset_dma writes both DMACRs) is the same reset.
            return self.show(ch);
        }
        if self.held || self.resetting.is_some() {
            let why = if self.held {
                "the reset GPIO holds it in reset"
            } else {
                "its soft reset has not finished (DMACR bit 2 still set)"
            };
            self.violate(
                ctl,
                Rule::WriteDuringReset,
                format!(
                    "{ch} register {:#x} written with {v:#x} while {why}: the write is lost (registers take their reset values when the reset ends)",
                    off - ch.base()
                ),
            );
            return self.show(ch);
        }
        match reg {
            Reg::Cr => {
                if v & DMACR_RESET != 0 {
                    // Both channels stop at once; registers clear when the reset finishes. A
                    // halted engine has nothing to drain: its reset is over at once.
                    let running = [&self.mm2s, &self.s2mm]
                        .iter()
                        .any(|c| c.status & DMASR_HALTED == 0 || c.busy());
                    for c in [&mut self.mm2s, &mut self.s2mm] {
                        c.latched = None;
                        c.due = None;
                        c.data = None;
                        c.stalled = false;
                    }
                    if running && !reset_time.is_zero() {
                        self.resetting = Some(now + reset_time);
                        for c in [Channel::Mm2s, Channel::S2mm] {
                            self.show(c);
                        }
                    } else {
                        self.reset_dma(ctl);
                    }
                    return;
                }
                let c = self.chan(ch);
                c.cr = (v & DMACR_WRITABLE) | DMACR_ONE;
                if v & DMACR_RS != 0 {
                    if c.status & DMASR_ERR_MASK == 0 {
                        c.status &= !DMASR_HALTED;
                    } else {
                        // Errors clear only on reset: the channel stays halted, RS reads 0.
                        c.cr &= !DMACR_RS;
                    }
                } else {
                    c.status |= DMASR_HALTED;
                    c.latched = None;
                    c.due = None;
                    c.data = None;
                }
                self.show(ch);
            }
            Reg::Sr => {
                let c = self.chan(ch);
                c.status &= !(v & DMASR_IRQ_MASK);
                self.show(ch);
            }
            Reg::Addr | Reg::AddrMsb => {
                if reg == Reg::AddrMsb && self.addr_bits <= 32 {
                    // No MSB register on a 32-bit configuration.
                    self.dma.publish(off, 0);
                    return;
                }
                self.dma.publish(off, v);
                let busy = self.chan(ch).busy();
                if busy {
                    self.violate(
                        ctl,
                        Rule::AddressWhileBusy,
                        format!("{ch} address written ({v:#x}) while a transfer is in flight: it is not used for that transfer"),
                    );
                }
                let c = self.chan(ch);
                c.addr = if reg == Reg::Addr {
                    (c.addr & !0xFFFF_FFFF) | u64::from(v)
                } else {
                    (c.addr & 0xFFFF_FFFF) | (u64::from(v) << 32)
                };
                c.addr_fresh = true;
            }
            Reg::Length => {
                self.dma.publish(off, v & self.len_mask);
                self.length_write(ch, v, now, mems, ctl, (floor, reset_time, model, pace));
            }
        }
    }

    fn length_write(
        &mut self,
        ch: Channel,
        v: u32,
        now: Instant,
        mems: &mut [Mem],
        ctl: &Control,
        timing: Timing<'_>,
    ) {
        let (status, busy, fresh, addr) = {
            let c = self.chan(ch);
            (c.status, c.busy(), c.addr_fresh, c.addr)
        };
        if status & DMASR_HALTED != 0 {
            return self.violate(
                ctl,
                Rule::LengthWhileHalted,
                format!("{ch} LENGTH written ({v}) while the channel is halted: nothing starts"),
            );
        }
        if v > self.len_mask {
            // The register keeps the low bits: the core would move a different length.
            self.violate(
                ctl,
                Rule::LengthTooWide,
                format!(
                    "{ch} LENGTH {v:#x} is wider than the {}-bit length field: the core reads {:#x}",
                    self.len_mask.count_ones(),
                    v & self.len_mask
                ),
            );
            if v & self.len_mask == 0 {
                return;
            }
        }
        let v = v & self.len_mask;
        if v == 0 {
            return self.violate(
                ctl,
                Rule::ZeroLength,
                format!("{ch} LENGTH written as 0: nothing starts"),
            );
        }
        if busy {
            return self.violate(
                ctl,
                Rule::LengthWhileBusy,
                format!("{ch} LENGTH written ({v}) while its previous transfer is in flight"),
            );
        }
        if !fresh {
            self.violate(
                ctl,
                Rule::AddressNotProgrammed,
                format!("{ch} LENGTH written ({v}) with no address written since the last transfer: it uses the stale {addr:#x}"),
            );
        }
        if addr % 8 != 0 {
            self.violate(
                ctl,
                Rule::UnalignedAddress,
                format!("{ch} address {addr:#x} is not 8-byte aligned"),
            );
            return self.raise(ch, DmaErrorBit::Internal);
        }
        if self.chan(ch).status & DMASR_HALTED != 0 {
            return; // strict mode stopped the engine
        }
        {
            let c = self.chan(ch);
            c.addr_fresh = false;
            c.latched = Some((addr, v));
            c.status &= !DMASR_IDLE;
        }
        self.show(ch);
        match ch {
            Channel::Mm2s => self.start_mm2s(addr, v, now, mems, ctl, timing),
            // Output already waiting in the stream flows in at once.
            Channel::S2mm => self.drain_stream(mems, ctl),
        }
    }

    fn start_mm2s(
        &mut self,
        addr: u64,
        len: u32,
        now: Instant,
        mems: &mut [Mem],
        ctl: &Control,
        (floor, _, model, pace): Timing<'_>,
    ) {
        ctl.count_transfer(self.idx);
        let fault = ctl.take_fault(self.idx);
        match fault {
            Some(InjectedFault::DmaError {
                channel: Channel::Mm2s,
                bit,
            }) => return self.raise(Channel::Mm2s, bit),
            Some(InjectedFault::DmaError {
                channel: Channel::S2mm,
                bit,
            }) => {
                // S2MM fails at once; with no way out, the core stops taking input and MM2S
                // stalls (AXI-Stream back-pressure) until a reset.
                self.raise(Channel::S2mm, bit);
                self.mm2s.stalled = true;
                self.mm2s.due = Some(now);
                return;
            }
            _ => {}
        }
        let Some((mi, r)) = locate(mems, addr, len as usize) else {
            return self.raise(Channel::Mm2s, DmaErrorBit::Decode);
        };
        let (data, dirty) = mems[mi].dma_read(r);
        if dirty > 0 {
            let m = mems[mi].name.clone();
            self.violate(
                ctl,
                Rule::MissingSyncForDevice,
                format!("MM2S read {addr:#x}+{len:#x} of {m} while {dirty} words the CPU wrote there were never cleaned (sync_for_device): the DMA read stale memory"),
            );
        }
        self.mm2s.data = Some((data, fault));
        let phases = model.map(|m| match self.core {
            Core::Fft(_) => m.fft_phases(len as usize),
            Core::Zip(_) => m.zip_phases(len as usize),
        });
        let modelled = phases.map_or(Duration::ZERO, |p| p.total());
        if let Some(p) = &phases {
            ctl.count_modelled(self.idx, p);
        }
        // With the virtual clock on (in process), the modelled time is posted to it before the
        // transfer can complete, so the driver's call that holds this accelerator takes it.
        crate::vclock::post_transfer(&self.clock_key, modelled);
        // Waited out only under real-time pacing: otherwise it is counted, not spent.
        let wait = if pace { modelled } else { Duration::ZERO };
        self.mm2s.due = Some(now + floor.max(wait));
    }

    /// MM2S has sent its packet: the core turns it into output packets on the stream, which
    /// flow into S2MM if it is armed and otherwise wait there (PG021: AXI-Stream back-pressure).
    fn complete_mm2s(&mut self, now: Instant, mems: &mut [Mem], ctl: &Control) {
        self.mm2s.due = None;
        let Some((input, fault)) = self.mm2s.data.take() else {
            return;
        };
        if fault != Some(InjectedFault::CoreHang) {
            let mut notes = Vec::new();
            let packets = match &mut self.core {
                Core::Fft(f) => fft_packet(f, &input, &mut notes),
                Core::Zip(z) => zip_packet(z, &input, &mut notes),
            };
            // One mistake, one violation: output of a packet that broke a rule is not reported
            // again if it waits for S2MM.
            let reported = !notes.is_empty();
            for (rule, detail) in notes {
                self.violate(ctl, rule, detail);
            }
            self.stream.extend(packets.into_iter().map(|data| Packet {
                data,
                fault,
                since: now,
                reported,
            }));
        } else {
            tracing::debug!(accel = %self.name, "emulated core swallowed its input");
        }
        if self.mm2s.status & DMASR_HALTED != 0 {
            return; // strict mode stopped the engine
        }
        self.mm2s_waiting = true;
        self.drain_stream(mems, ctl);
    }

    /// Bytes of output waiting in the stream.
    fn stream_bytes(&self) -> usize {
        self.stream.iter().map(|p| p.data.len()).sum()
    }

    /// Moves waiting output into S2MM while it is armed; completes MM2S once the stream is
    /// within its depth.
    fn drain_stream(&mut self, mems: &mut [Mem], ctl: &Control) {
        while self.s2mm.busy() && self.s2mm.status & DMASR_HALTED == 0 {
            let Some(p) = self.stream.pop_front() else {
                break;
            };
            self.deliver(p.data, p.fault, mems, ctl);
        }
        if self.mm2s_waiting && self.stream_bytes() <= STREAM_FIFO_BYTES {
            self.mm2s_waiting = false;
            self.mm2s.latched = None;
            self.mm2s.status |= DMASR_IDLE | DMASR_IOC_IRQ;
            self.show(Channel::Mm2s);
        }
    }

    /// One packet into the armed S2MM channel.
    fn deliver(
        &mut self,
        output: Vec<u8>,
        fault: Option<InjectedFault>,
        mems: &mut [Mem],
        ctl: &Control,
    ) {
        let Some((da, cap)) = self.s2mm.latched else {
            return;
        };
        let mut n = output.len();
        if let Some(InjectedFault::WrongLength { received }) = fault {
            n = n.min(received as usize);
        }
        // PG021: a packet longer than the buffer fills it, then the channel stops with
        // DMAIntErr (and IOC for the bytes written), halts and clears RS.
        let overrun = n > cap as usize;
        let n = n.min(cap as usize);
        let Some((mi, r)) = locate(mems, da, n) else {
            return self.raise(Channel::S2mm, DmaErrorBit::Decode);
        };
        mems[mi].dma_write(r.start, &output[..n]);
        self.s2mm.latched = None;
        // `n` is at most `cap`, a value of the LENGTH field.
        self.dma.publish(Channel::S2mm.length(), n as u32);
        if overrun {
            let c = &mut self.s2mm;
            c.status = (c.status | DMASR_IOC_IRQ | DMASR_INT_ERR | DMASR_ERR_IRQ | DMASR_HALTED)
                & !DMASR_IDLE;
            c.cr &= !DMACR_RS;
            self.show(Channel::S2mm);
            tracing::debug!(accel = %self.name, "emulated S2MM overrun");
            return;
        }
        self.s2mm.status |= DMASR_IDLE | DMASR_IOC_IRQ;
        self.show(Channel::S2mm);
        ctl.count_completion(self.idx);
    }

    fn ctrl_write(&mut self, off: usize, v: u32, ctl: &Control) {
        let mut notes = Vec::new();
        match &mut self.core {
            Core::Zip(z) => match off {
                ZIP_SIZE_REG => z.size = v,
                ZIP_OP_REG => z.op = v,
                _ => {}
            },
            Core::Fft(f) => match f.path {
                FftConfigPath::Register => {
                    if off == f.config_offset {
                        f.queue.push_back(v);
                    }
                }
                FftConfigPath::Gpio => {
                    let i = off / 4;
                    if i < 4 && off % 4 == 0 {
                        let before = f.gpio[i];
                        f.gpio[i] = v;
                        if off == GPIO_DATA1 {
                            if v & !1 != 0 {
                                notes.push((Rule::FftConfigWrongChannel, format!("{v:#x} written to GPIO channel 1 (0x00), the 1-bit tvalid; the config word belongs in channel 2 (0x08)")));
                            }
                            if before & 1 == 0 && v & 1 == 1 {
                                if f.gpio[GPIO_TRI1 / 4] & 1 != 0 || f.gpio[GPIO_TRI2 / 4] != 0 {
                                    notes.push((Rule::FftConfigNotDriven, "tvalid raised while a config GPIO channel is still an input (tri registers 0x04 / 0x0C not 0): nothing reaches the core".to_owned()));
                                } else {
                                    f.queue.push_back(f.gpio[GPIO_DATA2 / 4]);
                                }
                            }
                        }
                    }
                }
            },
        }
        for (rule, detail) in notes {
            self.violate(ctl, rule, detail);
        }
    }

    fn reset_write(&mut self, off: usize, v: u32, ctl: &Control) {
        match off {
            0x04 => self.reset_gpio[1] = v,
            0x00 => {
                self.reset_gpio[0] = v;
                if self.reset_gpio[1] & 1 != 0 {
                    return self.violate(ctl, Rule::ResetNotDriven, "reset GPIO written while its tri register (0x04) makes it an input: nothing happens".to_owned());
                }
                if v & 1 == 0 {
                    // Active low: core and DMA held in reset.
                    self.held = true;
                    self.resetting = None;
                    self.reset_dma(ctl);
                    if let Core::Fft(f) = &mut self.core {
                        f.reset();
                    }
                } else if self.held {
                    self.held = false;
                    self.reset_dma(ctl);
                }
            }
            _ => {}
        }
    }
}

/// The buffer and word range holding `len` bytes at physical `phys`, if one buffer holds them.
fn locate(mems: &[Mem], phys: u64, len: usize) -> Option<(usize, std::ops::Range<usize>)> {
    mems.iter()
        .enumerate()
        .find_map(|(i, m)| m.words_at(phys, len).map(|r| (i, r)))
}

//! The register-level model: the bus log replayed in order, the DMA channels' state machines,
//! the cores, the cache model, and one poll loop over all of it.
//!
//! Every register write the driver makes arrives through the bus log ([`BusLog`]) exactly once
//! and in order, so the model acts on *writes*, not on sampled values: back-to-back RS, address,
//! LENGTH work; an address written after LENGTH is not used for that transfer (address and
//! length are latched when LENGTH is written); a GPIO pulse is a rising edge. Timers (a soft
//! reset in progress, a transfer in flight) advance before each write is handled.
//!
//! What the model shows the driver (status registers, DMACR during and after a reset, S2MM
//! LENGTH = bytes received) it publishes into the register page with compare-and-swap against
//! the value it last knew there: if the driver has stored something newer, the swap fails and
//! that newer write, already on its way through the log, is handled first.

mod mapped;

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use memmap2::MmapOptions;
use nix::fcntl::OFlag;
use rustfft::FftPlanner;

use super::super::timing::TimingModel;
use super::{cores, Block, Control, EmulatorLayout, InjectedFault, Rule};
use crate::backend::fpga::axi_dma::{
    Channel, DmaErrorBit, DMACR_RESET, DMACR_RS, DMASR_ERR_IRQ, DMASR_ERR_MASK, DMASR_HALTED,
    DMASR_IDLE, DMASR_IOC_IRQ, DMASR_IRQ_MASK,
};
use crate::backend::fpga::buslog::{BusLog, BusWrite};
use crate::backend::fpga::config::{AccelKind, BoardConfig, FftConfigPath};
use crate::backend::fpga::fft_ip::{
    CONFIG_FORWARD, CONFIG_NFFT_MASK, FFT_MAX_POINTS, FFT_MIN_POINTS, GPIO_DATA1, GPIO_DATA2,
    GPIO_TRI1, GPIO_TRI2, POWER_ON_CONFIG,
};
use crate::backend::fpga::udmabuf::{SyncFor, CLASS_DIRS};
use crate::backend::fpga::zip_ip::{ZIP_OP_REG, ZIP_SIZE_REG};
use crate::hal::{During, Error, Result};
use mapped::{drain_syncs, io, Cache, Mem, Page};

/// Idle polls that spin before the loop starts sleeping.
const SPIN_POLLS: u32 = 64;
/// Sleep between idle polls.
const IDLE_SLEEP: Duration = Duration::from_micros(20);
/// DMACR after reset (PG021): IRQThreshold = 1 in bits 23:16, bit 1 reads 1.
pub(crate) const DMACR_RESET_VALUE: u32 = 0x0001_0002;

/// What the model keeps per DMA channel.
#[derive(Debug)]
struct Chan {
    status: u32,
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

/// The FFT core's side: config channel, frame assembly.
struct FftCore {
    path: FftConfigPath,
    config_offset: usize,
    /// GPIO registers: data 1 (tvalid), tri 1, data 2 (tdata), tri 2.
    gpio: [u32; 4],
    queue: VecDeque<u32>,
    current: u32,
    /// The frame being assembled: its points and direction.
    frame: Option<(usize, bool)>,
    buf: Vec<u8>,
    planner: FftPlanner<f32>,
}

impl FftCore {
    fn reset(&mut self) {
        self.queue.clear();
        self.current = POWER_ON_CONFIG;
        self.frame = None;
        self.buf.clear();
    }
}

/// The ZIP core's side: its two registers.
struct ZipCore {
    size: u32,
    op: u32,
    max_floats: usize,
}

enum Core {
    Fft(Box<FftCore>),
    Zip(ZipCore),
}

struct AccelModel {
    idx: usize,
    name: String,
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
}

/// The whole emulated board.
pub(crate) struct Board {
    mems: Vec<Mem>,
    accels: Vec<AccelModel>,
    bus: BusLog,
    floor: Duration,
    /// How long a soft reset takes (PG021: until in-flight transfers drain; a few clocks when
    /// idle), long enough that a driver which does not wait for DMACR bit 2 to clear is caught.
    reset_time: Duration,
    timing: Option<TimingModel>,
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
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&dev)
                .map_err(|e| io("open", &dev, e))?;
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
                let f = OpenOptions::new()
                    .read(true)
                    .custom_flags(OFlag::O_NONBLOCK.bits())
                    .open(&p)
                    .map_err(|e| io("open", &p, e))?;
                fifos.push((which, f, Vec::new()));
            }
            let ack_path = class_dir.join(super::files::ACK_FILE);
            let ack_file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&ack_path)
                .map_err(|e| io("open", &ack_path, e))?;
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
                dma: Page::open(&a.dma.path)?,
                ctrl: Page::open(&a.control.path)?,
                reset: a.reset.as_ref().map(|r| Page::open(&r.path)).transpose()?,
                mm2s: Chan::reset(),
                s2mm: Chan::reset(),
                resetting: None,
                held: false,
                reset_gpio: [1, u32::MAX],
                core,
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
            },
            control,
        ))
    }

    /// Polls until `stop` is set.
    pub(crate) fn run(mut self, ctl: &Control, stop: &AtomicBool) {
        let mut idle = 0u32;
        while !stop.load(Ordering::Acquire) {
            let mut act = false;
            while let Some(w) = self.bus.next() {
                let now = Instant::now();
                let (tag, off) = (usize::from(w.tag), w.offset as usize);
                let (ai, page) = (tag / 3, tag % 3);
                let Some(a) = self.accels.get_mut(ai) else {
                    tracing::warn!(?w, "emulator: a write with an unknown tag");
                    continue;
                };
                a.advance(now, &mut self.mems, ctl);
                let block = [Block::Dma, Block::Control, Block::Reset][page];
                ctl.trace(ai, block, w.offset, w.value);
                let timing = (self.floor, self.reset_time, self.timing.as_ref());
                a.write(page, off, w, now, &mut self.mems, ctl, timing);
                act = true;
            }
            act |= drain_syncs(&mut self.mems, ctl);
            let now = Instant::now();
            let mut soon = false;
            for a in &mut self.accels {
                act |= a.advance(now, &mut self.mems, ctl);
                soon |= a.resetting.is_some() || (a.mm2s.due.is_some() && !a.mm2s.stalled);
            }
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
        tracing::debug!("FPGA emulator stopped");
    }
}

/// The transfer floor, the soft-reset time and the timing model.
type Timing<'a> = (Duration, Duration, Option<&'a TimingModel>);

/// Offsets of a channel's registers, relative to its DMACR.
const CR: usize = 0x00;
const SR: usize = 0x04;
const ADDR: usize = 0x18;
const ADDR_MSB: usize = 0x1C;
const LENGTH: usize = 0x28;

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

    fn show(&mut self, ch: Channel) {
        let (cr, sr) = {
            let c = self.chan(ch);
            (c.cr, c.status)
        };
        let cr = if self.resetting.is_some() {
            cr | DMACR_RESET
        } else {
            cr
        };
        self.dma.publish(ch.dmacr(), cr);
        self.dma.publish(ch.dmasr(), sr);
    }

    fn raise(&mut self, ch: Channel, bit: DmaErrorBit) {
        let c = self.chan(ch);
        c.status = (c.status | bit.mask() | DMASR_ERR_IRQ | DMASR_HALTED) & !DMASR_IDLE;
        c.latched = None;
        c.due = None;
        c.data = None;
        self.show(ch);
        tracing::debug!(accel = %self.name, channel = %ch, bit = bit.bit(), "emulated DMA error");
    }

    /// Both channels to their reset state and registers.
    fn reset_dma(&mut self) {
        for ch in [Channel::Mm2s, Channel::S2mm] {
            *self.chan(ch) = Chan::reset();
            for off in [ch.addr(), ch.addr_msb(), ch.length()] {
                self.dma.publish(off, 0);
            }
            self.show(ch);
        }
    }

    /// Timers: a soft reset finishing, a transfer completing. True if anything happened.
    fn advance(&mut self, now: Instant, mems: &mut [Mem], ctl: &Control) -> bool {
        let mut act = false;
        if self.resetting.is_some_and(|t| now >= t) {
            self.resetting = None;
            self.reset_dma();
            tracing::debug!(accel = %self.name, "emulated AXI DMA reset done");
            act = true;
        }
        if !self.mm2s.stalled && self.mm2s.due.is_some_and(|t| now >= t) {
            self.complete_mm2s(mems, ctl);
            act = true;
        }
        act
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        page: usize,
        off: usize,
        w: BusWrite,
        now: Instant,
        mems: &mut [Mem],
        ctl: &Control,
        timing: Timing<'_>,
    ) {
        let v = w.value;
        match page {
            0 => {
                self.dma.saw(off, v);
                self.dma_write(off, v, now, mems, ctl, timing);
            }
            1 => {
                self.ctrl.saw(off, v);
                self.ctrl_write(off, v, ctl);
            }
            _ => {
                if let Some(p) = &mut self.reset {
                    p.saw(off, v);
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
        (floor, reset_time, model): Timing<'_>,
    ) {
        let (ch, reg) = if off >= Channel::S2mm.base() {
            (Channel::S2mm, off - Channel::S2mm.base())
        } else {
            (Channel::Mm2s, off)
        };
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
                    "{ch} register {reg:#x} written with {v:#x} while {why}: the write is lost"
                ),
            );
            self.show(ch);
            return;
        }
        match reg {
            CR => {
                if v & DMACR_RESET != 0 {
                    // Both channels stop at once; registers clear when the reset finishes.
                    for c in [&mut self.mm2s, &mut self.s2mm] {
                        c.latched = None;
                        c.due = None;
                        c.data = None;
                        c.stalled = false;
                    }
                    self.resetting = Some(now + reset_time);
                    for c in [Channel::Mm2s, Channel::S2mm] {
                        self.show(c);
                    }
                    return;
                }
                let c = self.chan(ch);
                c.cr = v;
                if v & DMACR_RS != 0 {
                    if c.status & DMASR_ERR_MASK == 0 {
                        c.status &= !DMASR_HALTED;
                    }
                } else {
                    c.status |= DMASR_HALTED;
                    c.latched = None;
                    c.due = None;
                    c.data = None;
                }
                self.show(ch);
            }
            SR => {
                let c = self.chan(ch);
                c.status &= !(v & DMASR_IRQ_MASK);
                self.show(ch);
            }
            ADDR | ADDR_MSB => {
                let busy = self.chan(ch).busy();
                if busy {
                    self.violate(
                        ctl,
                        Rule::AddressWhileBusy,
                        format!("{ch} address written ({v:#x}) while a transfer is in flight: it is not used for that transfer"),
                    );
                }
                let c = self.chan(ch);
                c.addr = if reg == ADDR {
                    (c.addr & !0xFFFF_FFFF) | u64::from(v)
                } else {
                    (c.addr & 0xFFFF_FFFF) | (u64::from(v) << 32)
                };
                c.addr_fresh = true;
            }
            LENGTH => self.length_write(ch, v, now, mems, ctl, (floor, reset_time, model)),
            _ => {}
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
        if v == 0 {
            return self.violate(
                ctl,
                Rule::ZeroLength,
                format!("{ch} LENGTH written as 0: nothing starts"),
            );
        }
        if v > LEN_MASK {
            self.violate(
                ctl,
                Rule::LengthTooWide,
                format!("{ch} LENGTH {v:#x} is wider than the 26-bit length field"),
            );
            return self.raise(ch, DmaErrorBit::Internal);
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
        if ch == Channel::Mm2s {
            self.start_mm2s(addr, v, now, mems, ctl, timing);
        }
    }

    fn start_mm2s(
        &mut self,
        addr: u64,
        len: u32,
        now: Instant,
        mems: &mut [Mem],
        ctl: &Control,
        (floor, _, model): Timing<'_>,
    ) {
        ctl.count_transfer(self.idx);
        let fault = ctl.take_fault(self.idx);
        if !self.s2mm.busy() {
            self.violate(
                ctl,
                Rule::OutputWithoutS2mm,
                "MM2S started with S2MM not armed (program S2MM first, and re-arm it for every transfer): the core's output is lost".to_owned(),
            );
            if self.mm2s.status & DMASR_HALTED != 0 {
                return; // strict mode stopped the engine
            }
        }
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
        let modelled = model.map_or(Duration::ZERO, |m| match self.core {
            Core::Fft(_) => m.fft_transfer(len as usize),
            Core::Zip(_) => m.zip_transfer(len as usize),
        });
        self.mm2s.due = Some(now + floor.max(modelled));
    }

    fn complete_mm2s(&mut self, mems: &mut [Mem], ctl: &Control) {
        self.mm2s.due = None;
        let Some((input, fault)) = self.mm2s.data.take() else {
            return;
        };
        self.mm2s.latched = None;
        self.mm2s.status |= DMASR_IDLE | DMASR_IOC_IRQ;
        self.show(Channel::Mm2s);
        if fault == Some(InjectedFault::CoreHang) {
            tracing::debug!(accel = %self.name, "emulated core swallowed its input");
            return;
        }
        let mut notes = Vec::new();
        let packets = match &mut self.core {
            Core::Fft(f) => fft_packet(f, &input, &mut notes),
            Core::Zip(z) => zip_packet(z, &input, &mut notes),
        };
        for (rule, detail) in notes {
            self.violate(ctl, rule, detail);
        }
        for p in packets {
            self.deliver(p, fault, mems, ctl);
        }
    }

    fn deliver(
        &mut self,
        output: Vec<u8>,
        fault: Option<InjectedFault>,
        mems: &mut [Mem],
        ctl: &Control,
    ) {
        let Some((da, cap)) = self.s2mm.latched else {
            // Already reported when MM2S started (or a second packet from one transfer).
            tracing::debug!(accel = %self.name, "emulated core output dropped: S2MM not armed");
            return;
        };
        if self.s2mm.status & DMASR_HALTED != 0 {
            return;
        }
        let mut n = output.len();
        if let Some(InjectedFault::WrongLength { received }) = fault {
            n = n.min(received as usize);
        }
        if n > cap as usize {
            return self.raise(Channel::S2mm, DmaErrorBit::Internal);
        }
        let Some((mi, r)) = locate(mems, da, n) else {
            return self.raise(Channel::S2mm, DmaErrorBit::Decode);
        };
        mems[mi].dma_write(r.start, &output[..n]);
        self.s2mm.latched = None;
        self.s2mm.status |= DMASR_IDLE | DMASR_IOC_IRQ;
        // `n` is at most `cap`, a 26-bit value.
        self.dma.publish(Channel::S2mm.length(), n as u32);
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
                    self.reset_dma();
                    if let Core::Fft(f) = &mut self.core {
                        f.reset();
                    }
                } else if self.held {
                    self.held = false;
                    self.reset_dma();
                }
            }
            _ => {}
        }
    }
}

/// The image's 26-bit length field.
const LEN_MASK: u32 = (1 << 26) - 1;

/// The buffer and word range holding `len` bytes at physical `phys`, if one buffer holds them.
fn locate(mems: &[Mem], phys: u64, len: usize) -> Option<(usize, std::ops::Range<usize>)> {
    mems.iter()
        .enumerate()
        .find_map(|(i, m)| m.words_at(phys, len).map(|r| (i, r)))
}

/// Decodes a config word as the core applies it: log2 N clamped to the core's range.
fn apply_config(word: u32, notes: &mut Vec<(Rule, String)>) -> (usize, bool) {
    let log2 = word & CONFIG_NFFT_MASK;
    let (lo, hi) = (
        FFT_MIN_POINTS.trailing_zeros(),
        FFT_MAX_POINTS.trailing_zeros(),
    );
    let used = log2.clamp(lo, hi);
    if used != log2 {
        notes.push((
            Rule::FftConfigClamped,
            format!("config word {word:#x} asks for log2 N = {log2}; the core clamps it to {used} ({} points)", 1usize << used),
        ));
    }
    (1usize << used, word & CONFIG_FORWARD != 0)
}

/// One MM2S packet into the FFT core: frames of N points as configured when each starts; a
/// packet that ends inside a frame leaves the rest of that frame to come from the next one.
fn fft_packet(f: &mut FftCore, input: &[u8], notes: &mut Vec<(Rule, String)>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (n, fwd) = match f.frame {
            Some(fr) => fr,
            None => {
                // A queued word is reported once, when the core takes it.
                let fr = match f.queue.pop_front() {
                    Some(word) => {
                        f.current = word;
                        apply_config(word, notes)
                    }
                    None => apply_config(f.current, &mut Vec::new()),
                };
                f.frame = Some(fr);
                fr
            }
        };
        let need = n * 8 - f.buf.len();
        let take = need.min(rest.len());
        f.buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if f.buf.len() == n * 8 {
            if out.is_empty() && !rest.is_empty() {
                notes.push((
                    Rule::FftFrameLength,
                    format!("an MM2S packet of {} bytes holds more than one {n}-point frame (event_tlast_missing)", input.len()),
                ));
            }
            out.push(cores::fft(&mut f.planner, n, fwd, &f.buf));
            f.buf.clear();
            f.frame = None;
        }
    }
    if !f.buf.is_empty() {
        let (n, _) = f.frame.unwrap_or((0, false));
        notes.push((
            Rule::FftFrameLength,
            format!(
                "the MM2S packet ended {} points into a {n}-point frame (event_tlast_unexpected): no output, and the rest of the frame will come from the next packet",
                f.buf.len() / 8
            ),
        ));
    }
    out
}

/// One MM2S packet into the ZIP core.
fn zip_packet(z: &ZipCore, input: &[u8], notes: &mut Vec<(Rule, String)>) -> Vec<Vec<u8>> {
    let size = z.size as usize;
    if size == 0 || size > z.max_floats {
        notes.push((
            Rule::ZipOverCapacity,
            format!(
                "ZIP size {size} floats is outside the core's 1..={} floats per input",
                z.max_floats
            ),
        ));
        return Vec::new();
    }
    if input.len() != 8 * size {
        notes.push((
            Rule::ZipPacketLength,
            format!(
                "ZIP packet of {} bytes for size {size}: the core takes exactly {} (input 0 then input 1)",
                input.len(),
                8 * size
            ),
        ));
        if input.len() < 8 * size {
            return Vec::new();
        }
    }
    cores::zip(z.size, z.op, &input[..8 * size])
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> FftCore {
        FftCore {
            path: FftConfigPath::Gpio,
            config_offset: 0,
            gpio: [0; 4],
            queue: VecDeque::new(),
            current: POWER_ON_CONFIG,
            frame: None,
            buf: Vec::new(),
            planner: FftPlanner::new(),
        }
    }

    /// `n` complex points, the k-th = (k + 1, 0), as bytes.
    fn ramp(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|k| [(k + 1) as f32, 0.0])
            .flat_map(f32::to_ne_bytes)
            .collect()
    }

    fn first(bytes: &[u8]) -> (f32, f32) {
        let f = |i: usize| f32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        (f(0), f(4))
    }

    #[test]
    fn power_on_is_a_2048_point_forward_transform() {
        let mut c = core();
        let mut notes = Vec::new();
        // Bin 0 of a forward or inverse unscaled FFT is the plain sum: 1 + 2 + … + N.
        let out = fft_packet(&mut c, &ramp(2048), &mut notes);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 2048 * 8);
        assert_eq!(first(&out[0]), ((2048 * 2049 / 2) as f32, 0.0));
        assert!(notes.is_empty());
    }

    #[test]
    fn config_words_queue_and_out_of_range_sizes_clamp() {
        let mut c = core();
        let mut notes = Vec::new();
        // 0 (log2 N = 0: clamped to 8 points, inverse), then 12 (clamped to 2048, inverse),
        // then 16 points forward: each frame takes the next word.
        c.queue.extend([0, 12, 4 | CONFIG_FORWARD]);
        let out = fft_packet(&mut c, &ramp(8), &mut notes);
        assert_eq!((out.len(), out[0].len()), (1, 64));
        // The 8-point inverse of the ramp: bin 1 = Σ (k+1) e^{+2πik/8} = -4 - 4·(1+√2)j.
        let b1 = {
            let f = |i: usize| {
                f32::from_ne_bytes([out[0][i], out[0][i + 1], out[0][i + 2], out[0][i + 3]])
            };
            (f(8), f(12))
        };
        let want_im = -4.0 * (1.0 + 2f32.sqrt());
        assert!(
            (b1.0 + 4.0).abs() < 1e-4 && (b1.1 - want_im).abs() < 1e-4,
            "{b1:?}"
        );
        let out = fft_packet(&mut c, &ramp(2048), &mut notes);
        assert_eq!(out[0].len(), 2048 * 8);
        let out = fft_packet(&mut c, &ramp(16), &mut notes);
        assert_eq!((out[0].len(), first(&out[0])), (128, (136.0, 0.0)));
        let rules: Vec<Rule> = notes.iter().map(|(r, _)| *r).collect();
        assert_eq!(rules, [Rule::FftConfigClamped, Rule::FftConfigClamped]);
        // With the queue empty the last word stays in force.
        notes.clear();
        let out = fft_packet(&mut c, &ramp(16), &mut notes);
        assert_eq!(out[0].len(), 128);
        assert!(notes.is_empty());
    }

    #[test]
    fn short_and_long_packets_carry_into_the_next_frame() {
        let mut c = core();
        let mut notes = Vec::new();
        c.queue.push_back(3 | CONFIG_FORWARD); // 8 points
                                               // 5 points: no output, the frame waits for 3 more.
        assert!(fft_packet(&mut c, &ramp(5), &mut notes).is_empty());
        assert_eq!(notes.len(), 1);
        // 11 more: completes the frame with the first 3 of them (1+2+3+4+5 + 1+2+3 = 21), then
        // 8 points more make a second frame (4..=11: 60).
        let out = fft_packet(&mut c, &ramp(11), &mut notes);
        assert_eq!(out.len(), 2);
        assert_eq!(first(&out[0]).0, 21.0);
        assert_eq!(first(&out[1]).0, 60.0);
        let rules: Vec<Rule> = notes.iter().map(|(r, _)| *r).collect();
        assert_eq!(rules, [Rule::FftFrameLength, Rule::FftFrameLength]);
    }
}

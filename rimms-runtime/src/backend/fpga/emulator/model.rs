//! The register-level model: one poll loop over every accelerator's pages and every buffer's
//! sync FIFOs.
//!
//! Registers are ordinary shared memory here, so the model sees a driver write only as a value
//! that differs from the one it last published. It keeps each channel's true status inside and
//! publishes it with compare-and-swap, so a driver write that lands at the same moment is never
//! overwritten unseen: the swap fails, the write is handled, and the publish is retried.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::OFlag;
use rustfft::FftPlanner;

use super::{cores, Control, EmulatorLayout, InjectedFault, SyncRecord};
use crate::backend::fpga::axi_dma::{
    Channel, DmaErrorBit, DMACR_RESET, DMACR_RS, DMASR_ERR_IRQ, DMASR_ERR_MASK, DMASR_HALTED,
    DMASR_IDLE, DMASR_IOC_IRQ, DMASR_IRQ_MASK, MM2S_DMACR, S2MM_DMACR, S2MM_LENGTH,
};
use crate::backend::fpga::config::{AccelKind, BoardConfig};
use crate::backend::fpga::udmabuf::{
    decode_packed, parse_number, SyncDirection, SyncFor, CLASS_DIRS,
};
use crate::backend::fpga::zip_ip::{ZIP_OP_REG, ZIP_SIZE_REG};
use crate::{Error, Result};

/// The image's 26-bit length field.
const LEN_MASK: u32 = (1 << 26) - 1;
/// Idle polls that spin before the loop starts sleeping.
const SPIN_POLLS: u32 = 64;
/// Sleep between idle polls.
const IDLE_SLEEP: Duration = Duration::from_micros(20);

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Config(format!("emulator: cannot {what} {}: {e}", path.display()))
}

/// A mapped register page seen as atomics.
struct Page {
    map: MmapRaw,
}

impl Page {
    fn open(path: &Path) -> Result<Self> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io("open", path, e))?;
        let map = MmapOptions::new()
            .len(super::files::PAGE_BYTES)
            .map_raw(&f)
            .map_err(|e| io("map", path, e))?;
        Ok(Self { map })
    }

    fn reg(&self, off: usize) -> &AtomicU32 {
        // Offsets are the DMA's constants or a validated config_offset; anything else reads
        // word 0 rather than leave the page.
        let off = if off % 4 == 0 && off + 4 <= self.map.len() {
            off
        } else {
            0
        };
        // SAFETY: `off + 4` is inside the mapping, which is page aligned, so the pointer is
        // valid and 4-byte aligned for as long as `self` lives; the page is only ever accessed
        // with 32-bit atomic or volatile operations (by the driver).
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(off).cast::<u32>()) }
    }

    fn load(&self, off: usize) -> u32 {
        self.reg(off).load(Ordering::SeqCst)
    }

    fn store(&self, off: usize, v: u32) {
        self.reg(off).store(v, Ordering::SeqCst)
    }

    fn cas(&self, off: usize, old: u32, new: u32) -> std::result::Result<u32, u32> {
        self.reg(off)
            .compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst)
    }
}

/// One emulated u-dma-buf.
struct Mem {
    name: String,
    phys: u64,
    map: MmapRaw,
    class_dir: PathBuf,
    fifos: Vec<(SyncFor, File, Vec<u8>)>,
}

/// What the model keeps per DMA channel.
#[derive(Debug)]
struct Chan {
    /// The true status register.
    status: u32,
    /// A transfer is in flight.
    busy: bool,
    /// The values last published (or seen) in the page.
    pub_sr: u32,
    pub_cr: u32,
    pub_len: u32,
}

impl Chan {
    fn halted() -> Self {
        Self {
            status: DMASR_HALTED,
            busy: false,
            pub_sr: DMASR_HALTED,
            pub_cr: 0,
            pub_len: 0,
        }
    }
}

/// Output the core holds until S2MM is armed, and the fault of its transfer.
type Pending = (Vec<u8>, Option<InjectedFault>);

struct AccelModel {
    idx: usize,
    name: String,
    kind: AccelKind,
    dma: Page,
    ctrl: Page,
    config_offset: usize,
    mm2s: Chan,
    s2mm: Chan,
    /// S2MM armed by a LENGTH write seen since the last completion: (DA, LENGTH).
    armed: Option<(u64, u32)>,
    pending: Option<Pending>,
    planner: FftPlanner<f32>,
}

/// The whole emulated board.
pub(crate) struct Board {
    mems: Vec<Mem>,
    accels: Vec<AccelModel>,
}

impl Board {
    /// Maps everything the configuration names; the layout gives the physical addresses.
    pub(crate) fn open(config: &BoardConfig, layout: &EmulatorLayout) -> Result<(Self, Control)> {
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
            // Device first: within one call its device syncs precede its CPU sync.
            for which in [SyncFor::Device, SyncFor::Cpu] {
                let p = class_dir.join(which.attribute());
                let f = OpenOptions::new()
                    .read(true)
                    .custom_flags(OFlag::O_NONBLOCK.bits())
                    .open(&p)
                    .map_err(|e| io("open", &p, e))?;
                fifos.push((which, f, Vec::new()));
            }
            mems.push(Mem {
                name: u.name.clone(),
                phys: l.phys_addr,
                map,
                class_dir,
                fifos,
            });
        }
        let mut accels = Vec::new();
        for (idx, a) in config.accelerators.iter().enumerate() {
            accels.push(AccelModel {
                idx,
                name: a.name.clone(),
                kind: a.kind,
                dma: Page::open(&a.dma.path)?,
                ctrl: Page::open(&a.control.path)?,
                config_offset: a.config_offset.unwrap_or(0),
                mm2s: Chan::halted(),
                s2mm: Chan::halted(),
                armed: None,
                pending: None,
                planner: FftPlanner::new(),
            });
        }
        let control = Control::new(accels.iter().map(|a| a.name.clone()).collect());
        Ok((Self { mems, accels }, control))
    }

    /// Polls until `stop` is set.
    pub(crate) fn run(mut self, ctl: &Control, stop: &AtomicBool) {
        let mut idle = 0u32;
        while !stop.load(Ordering::Acquire) {
            let mut act = false;
            for a in &mut self.accels {
                act |= a.poll(&self.mems, ctl);
            }
            act |= drain_syncs(&mut self.mems, ctl);
            ctl.epoch.fetch_add(1, Ordering::AcqRel);
            if act {
                idle = 0;
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

/// The host pointer of `len` bytes at physical address `phys`, if one buffer holds them all.
fn locate(mems: &[Mem], phys: u64, len: usize) -> Option<*mut u8> {
    mems.iter().find_map(|m| {
        let off = usize::try_from(phys.checked_sub(m.phys)?).ok()?;
        let end = off.checked_add(len)?;
        // SAFETY: `off + len <= map.len()`, so the pointer stays inside the mapping.
        (end <= m.map.len()).then(|| unsafe { m.map.as_mut_ptr().add(off) })
    })
}

fn read_phys(mems: &[Mem], phys: u64, len: usize) -> Option<Vec<u8>> {
    let p = locate(mems, phys, len)?;
    let mut v = vec![0u8; len];
    // SAFETY: `p..p+len` is inside a live mapping (checked by `locate`) and `v` is a separate
    // allocation. The driver does not touch a range while the DMA owns it.
    unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len) };
    Some(v)
}

fn write_phys(mems: &[Mem], phys: u64, data: &[u8]) -> bool {
    match locate(mems, phys, data.len()) {
        Some(p) => {
            // SAFETY: as in `read_phys`, in the other direction.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
            true
        }
        None => false,
    }
}

impl AccelModel {
    fn chan(&mut self, ch: Channel) -> &mut Chan {
        match ch {
            Channel::Mm2s => &mut self.mm2s,
            Channel::S2mm => &mut self.s2mm,
        }
    }

    /// Publishes a channel's status; a write-1-to-clear store that landed meanwhile is applied
    /// first.
    fn publish(&mut self, ch: Channel) {
        let dma = &self.dma;
        let c = match ch {
            Channel::Mm2s => &mut self.mm2s,
            Channel::S2mm => &mut self.s2mm,
        };
        loop {
            match dma.cas(ch.dmasr(), c.pub_sr, c.status) {
                Ok(_) => {
                    c.pub_sr = c.status;
                    return;
                }
                Err(seen) => {
                    c.status &= !(seen & DMASR_IRQ_MASK);
                    c.pub_sr = seen;
                }
            }
        }
    }

    /// Takes a LENGTH write off the register (it then reads 0), so the same value written again
    /// is seen as a new write.
    fn consume_len(&mut self, ch: Channel, v: u32) {
        let ok = self.dma.cas(ch.length(), v, 0).is_ok();
        self.chan(ch).pub_len = if ok { 0 } else { v };
    }

    fn addr(&self, ch: Channel) -> u64 {
        (u64::from(self.dma.load(ch.addr_msb())) << 32) | u64::from(self.dma.load(ch.addr()))
    }

    fn poll(&mut self, mems: &[Mem], ctl: &Control) -> bool {
        let cr_m = self.dma.load(MM2S_DMACR);
        let cr_s = self.dma.load(S2MM_DMACR);
        if (cr_m != self.mm2s.pub_cr && cr_m & DMACR_RESET != 0)
            || (cr_s != self.s2mm.pub_cr && cr_s & DMACR_RESET != 0)
        {
            self.reset(cr_m, cr_s);
            return true;
        }
        let mut act = false;
        for ch in [Channel::Mm2s, Channel::S2mm] {
            if self.dma.load(ch.dmasr()) != self.chan(ch).pub_sr {
                self.publish(ch);
                act = true;
            }
        }
        // LENGTH before run/stop, so a LENGTH written while halted stays ignored even when the
        // run bit lands in the same poll; S2MM before MM2S, the order the driver writes them.
        let v = self.dma.load(S2MM_LENGTH);
        if v != self.s2mm.pub_len {
            self.s2mm_length(v, mems, ctl);
            act = true;
        }
        let v = self.dma.load(Channel::Mm2s.length());
        if v != self.mm2s.pub_len {
            self.mm2s_length(v, mems, ctl);
            act = true;
        }
        // The values read at the top: one written since is seen on the next poll, never
        // mistaken for an ordinary control write after a reset check that missed it.
        for (ch, v) in [(Channel::Mm2s, cr_m), (Channel::S2mm, cr_s)] {
            if v != self.chan(ch).pub_cr {
                self.control_write(ch, v);
                act = true;
            }
        }
        act
    }

    /// Soft reset, seen as `cr_m` / `cr_s` in the control registers.
    fn reset(&mut self, cr_m: u32, cr_s: u32) {
        for ch in [Channel::Mm2s, Channel::S2mm] {
            for off in [ch.addr(), ch.addr_msb(), ch.length()] {
                self.dma.store(off, 0);
            }
            self.dma.store(ch.dmasr(), DMASR_HALTED);
            *self.chan(ch) = Chan::halted();
        }
        self.armed = None;
        self.pending = None;
        // The reset bit clears last: the driver takes that as "reset done" and may write the
        // control registers at once. So a register without the bit is cleared first (the
        // driver is still waiting then), and each only if it still holds what was seen;
        // otherwise the driver's newer value stays and is handled on the next poll.
        let mut order = [(Channel::Mm2s, cr_m), (Channel::S2mm, cr_s)];
        order.sort_by_key(|&(_, v)| v & DMACR_RESET != 0);
        for (ch, seen) in order {
            let cleared = self.dma.cas(ch.dmacr(), seen, 0).is_ok();
            self.chan(ch).pub_cr = if cleared { 0 } else { seen };
        }
        tracing::debug!(accel = %self.name, "emulated AXI DMA reset");
    }

    fn control_write(&mut self, ch: Channel, v: u32) {
        let publish = {
            let c = self.chan(ch);
            c.pub_cr = v;
            if v & DMACR_RS != 0 {
                // Error bits keep a channel halted until a reset.
                if c.status & DMASR_HALTED != 0 && c.status & DMASR_ERR_MASK == 0 {
                    c.status &= !DMASR_HALTED;
                    true
                } else {
                    false
                }
            } else if c.status & DMASR_HALTED == 0 {
                c.status |= DMASR_HALTED;
                c.busy = false;
                true
            } else {
                false
            }
        };
        if ch == Channel::S2mm && v & DMACR_RS == 0 {
            self.armed = None;
        }
        if publish {
            self.publish(ch);
        }
    }

    fn s2mm_length(&mut self, v: u32, mems: &[Mem], ctl: &Control) {
        self.s2mm.pub_len = v;
        if v & LEN_MASK == 0 {
            return;
        }
        if self.s2mm.status & DMASR_HALTED != 0 {
            self.consume_len(Channel::S2mm, v);
            return;
        }
        if self.s2mm.busy {
            return;
        }
        self.publish(Channel::S2mm); // a pending acknowledgement first, as in `start_mm2s`
        self.armed = Some((self.addr(Channel::S2mm), v & LEN_MASK));
        self.s2mm.busy = true;
        self.s2mm.status &= !DMASR_IDLE;
        self.publish(Channel::S2mm);
        if let Some((out, fault)) = self.pending.take() {
            if let Some(target) = self.armed.take() {
                self.deliver(out, target, fault, mems, ctl);
            }
        }
    }

    fn mm2s_length(&mut self, v: u32, mems: &[Mem], ctl: &Control) {
        self.consume_len(Channel::Mm2s, v);
        let len = v & LEN_MASK;
        if len == 0 || self.mm2s.status & DMASR_HALTED != 0 || self.mm2s.busy {
            return;
        }
        self.start_mm2s(len as usize, mems, ctl);
    }

    fn raise(&mut self, ch: Channel, bit: DmaErrorBit) {
        let c = self.chan(ch);
        c.status = (c.status | bit.mask() | DMASR_ERR_IRQ | DMASR_HALTED) & !DMASR_IDLE;
        c.busy = false;
        self.publish(ch);
        tracing::debug!(accel = %self.name, channel = %ch, bit = bit.bit(), "emulated DMA error");
    }

    fn start_mm2s(&mut self, len: usize, mems: &[Mem], ctl: &Control) {
        // The driver acknowledged the previous completion (write-1-to-clear IOC) before it
        // started this transfer, but maybe after this poll read the status registers: apply
        // those writes now, or they would clear this transfer's IOC.
        self.publish(Channel::Mm2s);
        self.publish(Channel::S2mm);
        ctl.count_transfer(self.idx);
        let fault = ctl.take_fault(self.idx);
        self.mm2s.busy = true;
        self.mm2s.status &= !DMASR_IDLE;
        self.publish(Channel::Mm2s);
        if let Some(InjectedFault::DmaError {
            channel: Channel::Mm2s,
            bit,
        }) = fault
        {
            self.raise(Channel::Mm2s, bit);
            return;
        }
        let src = self.addr(Channel::Mm2s);
        let Some(input) = read_phys(mems, src, len) else {
            self.raise(Channel::Mm2s, DmaErrorBit::Decode);
            return;
        };
        self.mm2s.busy = false;
        self.mm2s.status |= DMASR_IDLE | DMASR_IOC_IRQ;
        self.publish(Channel::Mm2s);
        if fault == Some(InjectedFault::CoreHang) {
            tracing::debug!(accel = %self.name, "emulated core swallowed its input");
            return;
        }
        let output = match self.kind {
            AccelKind::Fft => cores::fft(
                &mut self.planner,
                self.ctrl.load(self.config_offset),
                &input,
            ),
            AccelKind::Zip => cores::zip(
                self.ctrl.load(ZIP_SIZE_REG),
                self.ctrl.load(ZIP_OP_REG),
                &input,
            ),
        };
        let Some(output) = output else {
            tracing::warn!(accel = %self.name, "emulated core produced nothing (bad configuration or short packet)");
            return;
        };
        let target = self.armed.take().or_else(|| {
            let reg = self.dma.load(S2MM_LENGTH) & LEN_MASK;
            (self.s2mm.status & DMASR_HALTED == 0 && !self.s2mm.busy && reg != 0)
                .then(|| (self.addr(Channel::S2mm), reg))
        });
        match target {
            Some(t) => self.deliver(output, t, fault, mems, ctl),
            None => self.pending = Some((output, fault)),
        }
    }

    fn deliver(
        &mut self,
        output: Vec<u8>,
        (da, cap): (u64, u32),
        fault: Option<InjectedFault>,
        mems: &[Mem],
        ctl: &Control,
    ) {
        if let Some(InjectedFault::DmaError {
            channel: Channel::S2mm,
            bit,
        }) = fault
        {
            self.raise(Channel::S2mm, bit);
            return;
        }
        let mut n = output.len();
        if let Some(InjectedFault::WrongLength { received }) = fault {
            n = n.min(received as usize);
        }
        if n > cap as usize {
            // The packet does not fit the S2MM buffer.
            self.raise(Channel::S2mm, DmaErrorBit::Internal);
            return;
        }
        if !write_phys(mems, da, &output[..n]) {
            self.raise(Channel::S2mm, DmaErrorBit::Decode);
            return;
        }
        let n = n as u32;
        if self.dma.cas(S2MM_LENGTH, self.s2mm.pub_len, n).is_err() {
            self.dma.store(S2MM_LENGTH, n);
        }
        self.s2mm.pub_len = n;
        self.s2mm.busy = false;
        self.s2mm.status |= DMASR_IDLE | DMASR_IOC_IRQ;
        self.publish(Channel::S2mm);
        ctl.count_completion(self.idx);
    }
}

/// Reads every sync FIFO; each newline-terminated write becomes one [`SyncRecord`].
fn drain_syncs(mems: &mut [Mem], ctl: &Control) -> bool {
    let mut any = false;
    for m in mems {
        for (which, file, buf) in &mut m.fifos {
            let mut chunk = [0u8; 512];
            loop {
                match file.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                any = true;
                let text = String::from_utf8_lossy(&line);
                match record(&m.name, &m.class_dir, *which, text.trim()) {
                    Some(r) => ctl.log_sync(r),
                    None => {
                        tracing::warn!(memory = %m.name, write = %text.trim(), "emulator: unparsable sync write")
                    }
                }
            }
        }
    }
    any
}

fn record(memory: &str, class_dir: &Path, which: SyncFor, text: &str) -> Option<SyncRecord> {
    let value = parse_number(text)?;
    if value == 1 {
        // The attribute method: the range is whatever the attributes hold now (the driver may
        // already be writing the next request's). A file the driver is rewriting reads empty
        // for a moment, so look again for up to 100 ms; an attribute still unreadable then is
        // logged as 0 (size) or `None` (direction), so the count stays exact.
        let deadline = Instant::now() + Duration::from_millis(100);
        let attr = |name: &str| loop {
            let v = std::fs::read_to_string(class_dir.join(name))
                .ok()
                .and_then(|t| parse_number(&t));
            if v.is_some() || Instant::now() > deadline {
                break v;
            }
            thread::yield_now();
        };
        return Some(SyncRecord {
            memory: memory.to_owned(),
            which,
            offset: attr("sync_offset").unwrap_or(0),
            size: attr("sync_size").unwrap_or(0),
            direction: attr("sync_direction").and_then(SyncDirection::from_number),
            packed: false,
        });
    }
    let (offset, size, direction) = decode_packed(value)?;
    Some(SyncRecord {
        memory: memory.to_owned(),
        which,
        offset,
        size,
        direction: Some(direction),
        packed: true,
    })
}

//! The Xilinx AXI DMA in simple (direct register) mode.
//!
//! Each accelerator sits between the two channels of its own AXI DMA: MM2S (memory to stream)
//! reads the input from the u-dma-buf into the core, S2MM (stream to memory) writes the core's
//! output back. The register map and behaviour are Xilinx PG021's (see docs/design.md, FPGA):
//!
//! | offset | register      | offset | register      |
//! |--------|---------------|--------|---------------|
//! | 0x00   | MM2S DMACR    | 0x30   | S2MM DMACR    |
//! | 0x04   | MM2S DMASR    | 0x34   | S2MM DMASR    |
//! | 0x18   | MM2S SA       | 0x48   | S2MM DA       |
//! | 0x1C   | MM2S SA (MSB) | 0x4C   | S2MM DA (MSB) |
//! | 0x28   | MM2S LENGTH   | 0x58   | S2MM LENGTH   |
//!
//! DMACR: bit 0 run/stop, bit 2 soft reset (self-clearing, resets both channels), bits 12/14
//! interrupt enables. DMASR: bit 0 Halted, bit 1 Idle, bits 4–6 internal / slave / decode
//! errors (cleared only by a reset), bits 12–14 interrupt flags (write 1 to clear). Writing
//! LENGTH last starts a transfer; zero, or a write while halted, does nothing. S2MM LENGTH reads
//! back the bytes actually received. The image's length field is 26 bits; addresses must be
//! 8-byte aligned.
//!
//! The driver programs S2MM first (so the core's output has somewhere to go), then MM2S, and
//! waits until both channels report Idle *and* their IOC flag (IOC is set only by a completion
//! and cleared by the driver after each transfer, so a stale Idle from the previous transfer
//! cannot be mistaken for this one's). Every wait is bounded by the configured timeout and
//! reads the error bits on every poll. After any fault the engine is marked not ready and the
//! next transfer starts with a soft reset, since error bits only clear on reset.
//!
//! Polling: the first polls spin (a transfer of a few KiB finishes in microseconds on
//! hardware), later ones sleep a few microseconds so a long wait does not hold a core.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::fault::{rejected, FpgaFault, Result};
use super::regs::RegisterPage;
pub use crate::hal::backend_error::{Channel, DmaErrorBit};

/// MM2S control register.
pub const MM2S_DMACR: usize = 0x00;
/// MM2S status register.
pub const MM2S_DMASR: usize = 0x04;
/// MM2S source address (low 32 bits).
pub const MM2S_SA: usize = 0x18;
/// MM2S source address (high 32 bits).
pub const MM2S_SA_MSB: usize = 0x1C;
/// MM2S transfer length in bytes; writing it starts the transfer.
pub const MM2S_LENGTH: usize = 0x28;
/// S2MM control register.
pub const S2MM_DMACR: usize = 0x30;
/// S2MM status register.
pub const S2MM_DMASR: usize = 0x34;
/// S2MM destination address (low 32 bits).
pub const S2MM_DA: usize = 0x48;
/// S2MM destination address (high 32 bits).
pub const S2MM_DA_MSB: usize = 0x4C;
/// S2MM buffer length; writing it arms the channel, reading it after completion gives the bytes
/// received.
pub const S2MM_LENGTH: usize = 0x58;

/// DMACR: run (1) / stop (0).
pub const DMACR_RS: u32 = 1 << 0;
/// DMACR: soft reset of both channels, self-clearing.
pub const DMACR_RESET: u32 = 1 << 2;
/// DMACR: interrupt on complete enable.
pub const DMACR_IOC_IRQ_EN: u32 = 1 << 12;
/// DMACR: interrupt on error enable.
pub const DMACR_ERR_IRQ_EN: u32 = 1 << 14;

/// DMASR: the channel is halted.
pub const DMASR_HALTED: u32 = 1 << 0;
/// DMASR: the channel is idle (its last transfer completed).
pub const DMASR_IDLE: u32 = 1 << 1;
/// DMASR: internal error.
pub const DMASR_INT_ERR: u32 = 1 << 4;
/// DMASR: slave error.
pub const DMASR_SLV_ERR: u32 = 1 << 5;
/// DMASR: decode error.
pub const DMASR_DEC_ERR: u32 = 1 << 6;
/// DMASR: all three error bits.
pub const DMASR_ERR_MASK: u32 = DMASR_INT_ERR | DMASR_SLV_ERR | DMASR_DEC_ERR;
/// DMASR: interrupt on complete (write 1 to clear).
pub const DMASR_IOC_IRQ: u32 = 1 << 12;
/// DMASR: delay interrupt (write 1 to clear).
pub const DMASR_DLY_IRQ: u32 = 1 << 13;
/// DMASR: error interrupt (write 1 to clear).
pub const DMASR_ERR_IRQ: u32 = 1 << 14;
/// DMASR: the three write-1-to-clear interrupt bits.
pub const DMASR_IRQ_MASK: u32 = DMASR_IOC_IRQ | DMASR_DLY_IRQ | DMASR_ERR_IRQ;

/// What the driver writes to each DMACR to start a channel.
pub const DMACR_START: u32 = DMACR_RS | DMACR_IOC_IRQ_EN | DMACR_ERR_IRQ_EN;

/// Polls that spin before the wait starts sleeping.
const SPIN_POLLS: u32 = 256;
/// Sleep between later polls.
const POLL_SLEEP: Duration = Duration::from_micros(5);

impl Channel {
    /// Offset of the channel's DMACR; its other registers follow at the same distances.
    pub fn base(self) -> usize {
        match self {
            Channel::Mm2s => MM2S_DMACR,
            Channel::S2mm => S2MM_DMACR,
        }
    }
    /// DMACR offset.
    pub fn dmacr(self) -> usize {
        self.base()
    }
    /// DMASR offset.
    pub fn dmasr(self) -> usize {
        self.base() + 0x04
    }
    /// Address register (SA or DA), low word.
    pub fn addr(self) -> usize {
        self.base() + 0x18
    }
    /// Address register, high word.
    pub fn addr_msb(self) -> usize {
        self.base() + 0x1C
    }
    /// LENGTH offset.
    pub fn length(self) -> usize {
        self.base() + 0x28
    }
}

/// Limits of one DMA instance, from the board configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaLimits {
    /// Width of the LENGTH field (PG021 allows 8 to 26; the image uses 26).
    pub length_bits: u32,
    /// Address width: 32, or up to 64 (then the MSB registers are written too).
    pub address_bits: u32,
}

impl Default for DmaLimits {
    fn default() -> Self {
        Self {
            length_bits: 26,
            address_bits: 32,
        }
    }
}

/// An AXI DMA engine in simple mode.
#[derive(Debug)]
pub struct AxiDma {
    name: String,
    regs: RegisterPage,
    timeout: Duration,
    limits: DmaLimits,
    /// Reset and started since the last fault.
    ready: AtomicBool,
}

impl AxiDma {
    /// Wraps a mapped register page. Nothing is written until [`reset`](Self::reset),
    /// [`start`](Self::start) or the first transfer.
    pub fn new(name: &str, regs: RegisterPage, timeout: Duration, limits: DmaLimits) -> Self {
        Self {
            name: name.to_owned(),
            regs,
            timeout,
            limits,
            ready: AtomicBool::new(false),
        }
    }

    /// The name used in errors (the accelerator's).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The register page (for inspection in tests and diagnostics).
    pub fn regs(&self) -> &RegisterPage {
        &self.regs
    }

    /// The bound on every wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The configured limits.
    pub fn limits(&self) -> DmaLimits {
        self.limits
    }

    /// The longest transfer in bytes (2^length_bits − 1).
    pub fn max_length(&self) -> u64 {
        (1u64 << self.limits.length_bits.min(32)) - 1
    }

    /// Whether the engine has been reset and started since the last fault.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Reads a channel's status register.
    pub fn status(&self, ch: Channel) -> Result<u32> {
        self.regs.read32(ch.dmasr())
    }

    /// Soft reset: sets DMACR bit 2 and waits (bounded) until it clears on both channels.
    /// Afterwards both channels are halted with their registers and error bits cleared.
    pub fn reset(&self) -> Result<()> {
        self.ready.store(false, Ordering::Release);
        self.regs.write32(MM2S_DMACR, DMACR_RESET)?;
        self.poll_until(
            &|| "the soft reset to finish (DMACR bit 2 to clear)",
            || {
                let a = self.regs.read32(MM2S_DMACR)?;
                let b = self.regs.read32(S2MM_DMACR)?;
                Ok((a | b) & DMACR_RESET == 0)
            },
        )?;
        tracing::debug!(dma = %self.name, "AXI DMA reset");
        Ok(())
    }

    /// Starts both channels (run bit and interrupt enables) and waits (bounded) until neither
    /// reports Halted.
    pub fn start(&self) -> Result<()> {
        self.regs.write32(S2MM_DMACR, DMACR_START)?;
        self.regs.write32(MM2S_DMACR, DMACR_START)?;
        self.poll_until(
            &|| "both channels to leave Halted after setting run",
            || {
                for ch in [Channel::Mm2s, Channel::S2mm] {
                    let sr = self.status(ch)?;
                    self.check_error(ch, sr)?;
                }
                let a = self.status(Channel::Mm2s)?;
                let b = self.status(Channel::S2mm)?;
                Ok((a | b) & DMASR_HALTED == 0)
            },
        )?;
        self.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Marks the engine as needing a reset before its next transfer.
    pub fn mark_not_ready(&self) {
        self.ready.store(false, Ordering::Release);
    }

    /// Reset and start unless already done since the last fault.
    pub fn ensure_ready(&self) -> Result<()> {
        if !self.is_ready() {
            self.reset()?;
            self.start()?;
        }
        Ok(())
    }

    /// Refuses a buffer the engine cannot move: zero or over-long length, misaligned or too
    /// wide an address. Writes nothing.
    pub fn check_buffer(&self, ch: Channel, phys: u64, len: usize) -> Result<()> {
        let what = match ch {
            Channel::Mm2s => "source",
            Channel::S2mm => "destination",
        };
        if len == 0 {
            return Err(rejected(&self.name, format!("{ch} {what} length is 0")));
        }
        if len as u64 > self.max_length() {
            return Err(rejected(
                &self.name,
                format!(
                    "{ch} {what} length {len} bytes exceeds the {}-bit length field (at most {})",
                    self.limits.length_bits,
                    self.max_length()
                ),
            ));
        }
        if phys % 8 != 0 {
            return Err(rejected(
                &self.name,
                format!("{ch} {what} address {phys:#x} is not 8-byte aligned"),
            ));
        }
        let end = phys.checked_add(len as u64);
        let limit = if self.limits.address_bits >= 64 {
            u64::MAX
        } else {
            1u64 << self.limits.address_bits
        };
        if end.is_none_or(|e| e > limit) {
            return Err(rejected(
                &self.name,
                format!(
                    "{ch} {what} {phys:#x}+{len:#x} does not fit a {}-bit address",
                    self.limits.address_bits
                ),
            ));
        }
        Ok(())
    }

    fn check_error(&self, ch: Channel, status: u32) -> Result<()> {
        match DmaErrorBit::from_status(status) {
            Some(bit) => Err(FpgaFault::DmaError {
                channel: ch,
                bit,
                status,
            }
            .on(&self.name)),
            None => Ok(()),
        }
    }

    fn program(&self, ch: Channel, phys: u64, len: usize) -> Result<()> {
        if self.limits.address_bits > 32 {
            self.regs.write32(ch.addr_msb(), (phys >> 32) as u32)?;
        }
        self.regs.write32(ch.addr(), phys as u32)?;
        // LENGTH last: this write starts the channel. `check_buffer` bounded it by 2^26 − 1.
        self.regs.write32(ch.length(), len as u32)
    }

    /// One transfer through the core: `src_len` bytes from `src` into the core, and exactly
    /// `dst_len` bytes of its output to `dst`. Validates both buffers first (nothing is written
    /// for a refused request), resets and starts the engine if a previous fault left it
    /// stopped, programs S2MM then MM2S (address, then LENGTH last), waits for both with the
    /// bounded wait, checks S2MM's received length, and acknowledges both IOC flags.
    pub fn transfer(&self, src: u64, src_len: usize, dst: u64, dst_len: usize) -> Result<()> {
        self.check_buffer(Channel::Mm2s, src, src_len)?;
        self.check_buffer(Channel::S2mm, dst, dst_len)?;
        let result = self.run_transfer(src, src_len, dst, dst_len);
        if let Err(e) = &result {
            self.ready.store(false, Ordering::Release);
            tracing::warn!(dma = %self.name, error = %e, "AXI DMA transfer failed; the next one resets the engine");
        }
        result
    }

    fn run_transfer(&self, src: u64, src_len: usize, dst: u64, dst_len: usize) -> Result<()> {
        self.ensure_ready()?;
        self.program(Channel::S2mm, dst, dst_len)?;
        self.program(Channel::Mm2s, src, src_len)?;
        self.wait_complete()?;
        let received = self.regs.read32(S2MM_LENGTH)?;
        let expected = dst_len as u32;
        if received != expected {
            return Err(FpgaFault::ShortTransfer { expected, received }.on(&self.name));
        }
        self.regs.write32(MM2S_DMASR, DMASR_IOC_IRQ)?;
        self.regs.write32(S2MM_DMASR, DMASR_IOC_IRQ)?;
        Ok(())
    }

    /// Waits until both channels report Idle with IOC set, failing at once on an error bit or
    /// an unexpected Halted on **either** channel (both are read on every poll, before either
    /// is judged incomplete: an S2MM error while MM2S is still running is an S2MM error, not an
    /// MM2S timeout), and after the timeout otherwise, naming the channel still pending and
    /// both status words.
    fn wait_complete(&self) -> Result<()> {
        let last = Cell::new((0u32, 0u32));
        let what = || {
            let (m, s) = last.get();
            let done = |sr: u32| sr & (DMASR_IDLE | DMASR_IOC_IRQ) == DMASR_IDLE | DMASR_IOC_IRQ;
            let pending = match (done(m), done(s)) {
                (false, false) => "both channels",
                (false, true) => "the MM2S channel",
                _ => "the S2MM channel",
            };
            format!(
                "{pending} to complete (Idle + IOC; MM2S DMASR {m:#010x}, S2MM DMASR {s:#010x})"
            )
        };
        self.poll_until(&what, || {
            let m = self.status(Channel::Mm2s)?;
            let s = self.status(Channel::S2mm)?;
            last.set((m, s));
            for (ch, sr) in [(Channel::Mm2s, m), (Channel::S2mm, s)] {
                self.check_error(ch, sr)?;
            }
            for (ch, sr) in [(Channel::Mm2s, m), (Channel::S2mm, s)] {
                if sr & DMASR_HALTED != 0 {
                    return Err(FpgaFault::Halted {
                        channel: ch,
                        status: sr,
                    }
                    .on(&self.name));
                }
            }
            let done = |sr: u32| sr & (DMASR_IDLE | DMASR_IOC_IRQ) == DMASR_IDLE | DMASR_IOC_IRQ;
            Ok(done(m) && done(s))
        })
    }

    /// Polls `cond` until it holds, an error, or the timeout; `what` names the awaited event.
    fn poll_until<W: ToString>(
        &self,
        what: &dyn Fn() -> W,
        mut cond: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let start = Instant::now();
        let mut polls = 0u32;
        // The reads of the evaluation that sees the event are the ones a board's driver makes
        // after the transfer's modelled time; earlier ones overlap it (see `RegisterPage::polled`).
        let mut cond = || {
            let (done, reads) = RegisterPage::polled(&mut cond);
            if matches!(done, Ok(true) | Err(_)) {
                self.regs.charge_reads(reads);
            }
            done
        };
        loop {
            if cond()? {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= self.timeout {
                // One last look: the event may have landed while we were asleep.
                if cond()? {
                    return Ok(());
                }
                return Err(FpgaFault::Timeout {
                    what: what().to_string(),
                    waited,
                }
                .on(&self.name));
            }
            polls = polls.saturating_add(1);
            if polls < SPIN_POLLS {
                std::hint::spin_loop();
            } else {
                thread::sleep(POLL_SLEEP);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> (tempfile::TempDir, AxiDma) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dma");
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        let regs = RegisterPage::open("dma", &path, 0, 4096).unwrap();
        let dma = AxiDma::new("acc", regs, Duration::from_millis(20), DmaLimits::default());
        (dir, dma)
    }

    fn refused(r: Result<()>) -> String {
        match r.as_ref().map_err(|e| e.fpga_fault()) {
            Err(Some((_, FpgaFault::Rejected(why)))) => why.clone(),
            _ => panic!("expected a refusal, got {r:?}"),
        }
    }

    #[test]
    fn bad_buffers_are_refused_before_any_register_write() {
        let (dir, dma) = page();
        let before = std::fs::read(dir.path().join("dma")).unwrap();
        assert!(refused(dma.transfer(0x7000_0004, 64, 0x7000_1000, 64)).contains("aligned"));
        assert!(refused(dma.transfer(0x7000_0000, 64, 0x7000_1001, 64)).contains("aligned"));
        assert!(refused(dma.transfer(0x7000_0000, 1 << 26, 0x7000_1000, 64)).contains("26-bit"));
        assert!(refused(dma.transfer(0x7000_0000, 0, 0x7000_1000, 64)).contains("length is 0"));
        assert!(refused(dma.transfer(0xFFFF_FFF8, 64, 0x7000_1000, 64)).contains("32-bit"));
        assert_eq!(std::fs::read(dir.path().join("dma")).unwrap(), before);
        // The largest legal length passes the check.
        dma.check_buffer(Channel::Mm2s, 0, (1 << 26) - 1).unwrap();
    }

    #[test]
    fn a_reset_that_never_clears_times_out_naming_the_bit() {
        // Nothing clears the bit in a plain file: the bounded wait must end it.
        let (_dir, dma) = page();
        let t = Instant::now();
        match dma
            .reset()
            .map_err(|e| e.fpga_fault().map(|(_, f)| f.clone()))
        {
            Err(Some(FpgaFault::Timeout { what, .. })) => assert!(what.contains("bit 2"), "{what}"),
            other => panic!("{other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn error_bits_decode_lowest_first() {
        assert_eq!(
            DmaErrorBit::from_status(0x4011),
            Some(DmaErrorBit::Internal)
        );
        assert_eq!(DmaErrorBit::from_status(0x60), Some(DmaErrorBit::Slave));
        assert_eq!(DmaErrorBit::from_status(0x1003), None);
        assert_eq!(DmaErrorBit::Decode.mask(), DMASR_DEC_ERR);
    }
}

//! Unit tests of the model driven by exact register sequences (issue 31): the model is called
//! directly, one bus write at a time, on a virtual clock (each register access takes 200 ns),
//! with no thread and no waiting, so a thousand driver calls take well under a second.
//!
//! CEDR's sequences are transcribed from its `libdash` sources: `dma/dma.cpp` (`reset_dma`,
//! `setup_rx`, `setup_tx`, the idle and completion polls), `fft/fft.h` (`config_fft` /
//! `config_ifft` over the AXI GPIO, `reset_fft_and_dma`), `fft/fft.cpp` (`fft_accel`: reset,
//! config, input copy, `setup_rx`, `setup_tx`, wait for RX) and `zip/zip.h`
//! (`config_zip_size`, `config_zip_op`); the ZIP call is assumed to follow `fft_accel`'s order
//! (its `zip_accel` body is not in the published tree). CEDR maps its u-dma-buf `O_SYNC`, so
//! the buffer here is uncached.

use std::time::{Duration, Instant};

use super::super::{files, Control, EmulatorLayout, Rule};
use super::Board;
use crate::backend::fpga::axi_dma::{
    MM2S_DMACR, MM2S_DMASR, MM2S_LENGTH, MM2S_SA, MM2S_SA_MSB, S2MM_DA, S2MM_DA_MSB, S2MM_DMACR,
    S2MM_DMASR, S2MM_LENGTH,
};
use crate::backend::fpga::buslog::BusWrite;
use crate::backend::fpga::fft_ip::{CONFIG_FORWARD, GPIO_DATA1, GPIO_DATA2, GPIO_TRI1, GPIO_TRI2};
use crate::backend::fpga::udmabuf::CacheMode;
use crate::backend::fpga::zip_ip::{ZIP_OP_REG, ZIP_SIZE_REG};

const DMA: usize = 0;
const CTRL: usize = 1;
const RESET: usize = 2;
/// zcu102_like's accelerators.
const FFT0: usize = 0;
const ZIP0: usize = 2;
/// One AXI-Lite access.
const ACCESS: Duration = Duration::from_nanos(200);
/// CEDR's `WAIT_LIMIT`: polls before a wait gives up silently.
const WAIT_LIMIT: usize = 10_000;

struct Rig {
    _dir: tempfile::TempDir,
    board: Board,
    ctl: Control,
    now: Instant,
}

impl Rig {
    fn new(strict: bool, address_bits: u32) -> Self {
        let mut layout = EmulatorLayout::zcu102_like();
        layout.strict = strict;
        Self::with_layout(layout, address_bits)
    }

    fn with_layout(mut layout: EmulatorLayout, address_bits: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        layout.udmabufs[0].cache = CacheMode::Uncached;
        let mut config = files::create_without_config(dir.path(), &layout).unwrap();
        for a in &mut config.accelerators {
            a.dma_address_bits = address_bits;
        }
        let (board, ctl) = Board::open(dir.path(), &config, &layout).unwrap();
        Self {
            _dir: dir,
            board,
            ctl,
            now: Instant::now(),
        }
    }

    fn w(&mut self, accel: usize, page: usize, off: usize, value: u32) {
        self.now += ACCESS;
        let w = BusWrite {
            tag: (3 * accel + page) as u16,
            offset: off as u32,
            value,
        };
        self.board.handle(w, self.now, &self.ctl);
    }

    fn r(&mut self, accel: usize, page: usize, off: usize) -> u32 {
        self.now += ACCESS;
        self.board.tick(self.now, &self.ctl);
        let a = &self.board.accels[accel];
        match page {
            DMA => a.dma.read(off),
            CTRL => a.ctrl.read(off),
            _ => a.reset.as_ref().unwrap().read(off),
        }
    }

    fn wait(&mut self, d: Duration) {
        self.now += d;
        self.board.tick(self.now, &self.ctl);
    }

    /// Polls `off` until `done`, at most CEDR's `WAIT_LIMIT` times; whether it held.
    fn poll(&mut self, accel: usize, off: usize, done: impl Fn(u32) -> bool) -> bool {
        (0..WAIT_LIMIT).any(|_| done(self.r(accel, DMA, off)))
    }

    fn rules(&self) -> Vec<Rule> {
        let v = self.ctl.violations.lock().unwrap();
        v.iter().map(|v| v.rule).collect()
    }

    fn clear(&self) {
        self.ctl.violations.lock().unwrap().clear();
    }

    fn phys(&self) -> u32 {
        self.board.mems[0].phys as u32
    }

    fn put(&mut self, byte_off: usize, words: &[f32]) {
        for (i, v) in words.iter().enumerate() {
            self.board.mems[0]
                .cpu(byte_off / 4 + i)
                .store(v.to_bits(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn get(&self, byte_off: usize, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let w = self.board.mems[0].cpu(byte_off / 4 + i);
                f32::from_bits(w.load(std::sync::atomic::Ordering::Relaxed))
            })
            .collect()
    }

    /// CEDR's `reset_dma`: both DMACRs to 4, then wait for Halted on both channels.
    fn cedr_reset_dma(&mut self, a: usize) {
        self.w(a, DMA, MM2S_DMACR, 0x4);
        self.w(a, DMA, S2MM_DMACR, 0x4);
        assert!(self.poll(a, MM2S_DMASR, |s| s & 1 == 1), "TX idle");
        assert!(self.poll(a, S2MM_DMASR, |s| s & 1 == 1), "RX idle");
    }

    /// CEDR's `reset_fft_and_dma`: the reset GPIO as output, low, a short delay, high.
    fn cedr_reset_fft_and_dma(&mut self, a: usize) {
        self.w(a, RESET, 0x04, 0);
        self.w(a, RESET, 0x00, 0);
        self.wait(Duration::from_nanos(50));
        self.w(a, RESET, 0x00, 1);
    }

    /// CEDR's `setup_rx` / `setup_tx` for one channel: DMACR = 3, address, LENGTH.
    fn cedr_setup(&mut self, a: usize, cr: usize, addr: usize, len: usize, phys: u32, n: u32) {
        self.w(a, DMA, cr, 0x3);
        self.w(a, DMA, addr, phys);
        self.w(a, DMA, len, n);
    }

    /// CEDR's `fft_accel` for an impulse of `n` points: the output must be all ones.
    fn cedr_fft(&mut self, a: usize, n: usize, forward: bool, gpio_reset: bool) {
        if gpio_reset {
            self.cedr_reset_fft_and_dma(a);
        } else {
            self.cedr_reset_dma(a);
        }
        // config_fft / config_ifft over the GPIO.
        let word = if forward { CONFIG_FORWARD } else { 0 } | n.trailing_zeros();
        self.w(a, CTRL, GPIO_TRI1, 0);
        self.w(a, CTRL, GPIO_TRI2, 0);
        self.w(a, CTRL, GPIO_DATA2, word);
        self.w(a, CTRL, GPIO_DATA1, 1);
        self.wait(Duration::from_nanos(100));
        self.w(a, CTRL, GPIO_DATA1, 0);
        let mut x = vec![0.0f32; 2 * n];
        x[0] = 1.0;
        self.put(0, &x);
        self.put(8 * n, &vec![7.0; 2 * n]);
        let (p, bytes) = (self.phys(), 8 * n as u32);
        self.cedr_setup(a, S2MM_DMACR, S2MM_DA, S2MM_LENGTH, p + bytes, bytes);
        self.cedr_setup(a, MM2S_DMACR, MM2S_SA, MM2S_LENGTH, p, bytes);
        assert!(
            self.poll(a, S2MM_DMASR, |s| s & 3 == 2),
            "RX complete: {:#x}",
            self.r(a, DMA, S2MM_DMASR)
        );
        let y = self.get(8 * n, 2 * n);
        assert!(
            y.chunks(2).all(|c| c == [1.0, 0.0]),
            "{n}-point impulse: {:?}",
            &y[..4]
        );
    }

    /// CEDR's ZIP call: reset_dma, size (floats), op, then the DMA as for the FFT (one MM2S
    /// packet of input 0 then input 1).
    fn cedr_zip_mul(&mut self, a: usize, n: usize) {
        self.cedr_reset_dma(a);
        self.w(a, CTRL, ZIP_SIZE_REG, 2 * n as u32);
        self.w(a, CTRL, ZIP_OP_REG, 4);
        self.put(0, &[1.0, 2.0].repeat(n));
        self.put(8 * n, &[3.0, -1.0].repeat(n));
        let (p, out) = (self.phys(), 16 * n as u32);
        self.cedr_setup(a, S2MM_DMACR, S2MM_DA, S2MM_LENGTH, p + out, 8 * n as u32);
        self.cedr_setup(a, MM2S_DMACR, MM2S_SA, MM2S_LENGTH, p, 16 * n as u32);
        assert!(self.poll(a, S2MM_DMASR, |s| s & 3 == 2), "RX complete");
        // (1 + 2j)(3 - j) = 5 + 5j
        let y = self.get(16 * n, 2 * n);
        assert!(y.chunks(2).all(|c| c == [5.0, 5.0]), "{:?}", &y[..2]);
    }

    /// Our driver's start: both channels to RS with the interrupt enables.
    fn start(&mut self, a: usize) {
        self.w(a, DMA, S2MM_DMACR, 0x5001);
        self.w(a, DMA, MM2S_DMACR, 0x5001);
    }
}

#[test]
fn cedrs_reset_fft_and_zip_sequences_break_no_rule_over_a_thousand_calls() {
    let mut rig = Rig::new(true, 32);
    // The FFT constructor's reset_fft_and_dma, then calls with the GPIO reset (ZCU102 images)
    // and with reset_dma (images without one); the ZIP with reset_dma.
    rig.cedr_reset_fft_and_dma(FFT0);
    for i in 0..1000 {
        let n = [16, 256, 64][i % 3];
        rig.cedr_fft(FFT0, n, i % 2 == 0, i % 4 == 1);
        rig.cedr_zip_mul(ZIP0, 32 + i % 7);
    }
    assert_eq!(rig.rules(), []);
    assert_eq!(
        rig.ctl.completions[FFT0].load(std::sync::atomic::Ordering::Relaxed),
        1000
    );
}

#[test]
fn cedrs_reset_asks_for_the_same_reset_twice_and_both_channels_take_it() {
    let mut rig = Rig::new(true, 32);
    rig.start(FFT0);
    rig.w(FFT0, DMA, MM2S_DMACR, 0x4);
    rig.w(FFT0, DMA, S2MM_DMACR, 0x4);
    assert_eq!(rig.rules(), []);
    // In progress: both DMACRs show bit 2 and the channels are not yet halted.
    for cr in [MM2S_DMACR, S2MM_DMACR] {
        assert_eq!(rig.r(FFT0, DMA, cr), 0x5007, "{cr:#x}");
    }
    assert_eq!(rig.r(FFT0, DMA, MM2S_DMASR) & 1, 0);
    rig.wait(Duration::from_millis(1));
    for (cr, sr) in [(MM2S_DMACR, MM2S_DMASR), (S2MM_DMACR, S2MM_DMASR)] {
        assert_eq!(rig.r(FFT0, DMA, cr), 0x0001_0002);
        assert_eq!(rig.r(FFT0, DMA, sr), 0x1);
    }
    // Resetting S2MM alone resets MM2S too.
    rig.start(FFT0);
    rig.w(FFT0, DMA, S2MM_DMACR, 0x4);
    rig.wait(Duration::from_millis(1));
    assert_eq!(rig.r(FFT0, DMA, MM2S_DMACR), 0x0001_0002);
    assert_eq!(rig.rules(), []);
}

#[test]
fn a_violation_during_a_reset_sticks_until_the_harness_clears_it() {
    let mut rig = Rig::new(true, 32);
    rig.start(FFT0);
    rig.w(FFT0, DMA, MM2S_DMACR, 0x4);
    rig.w(FFT0, DMA, S2MM_DMACR, 0x3); // RS during the reset: lost
    assert_eq!(rig.rules(), [Rule::WriteDuringReset]);
    rig.wait(Duration::from_millis(1));
    // The reset is over, and the error is still there for the driver to see.
    for sr in [MM2S_DMASR, S2MM_DMASR] {
        assert_eq!(rig.r(FFT0, DMA, sr), 0x4011, "{sr:#x}");
    }
    // A correct reset does not wipe it either.
    rig.w(FFT0, DMA, MM2S_DMACR, 0x4);
    assert!(rig.poll(FFT0, MM2S_DMACR, |c| c & 4 == 0));
    assert_eq!(rig.r(FFT0, DMA, S2MM_DMASR), 0x4011);
    // Once the harness has read and cleared the violation, a reset leaves the engine clean.
    rig.clear();
    rig.w(FFT0, DMA, MM2S_DMACR, 0x4);
    assert!(rig.poll(FFT0, MM2S_DMACR, |c| c & 4 == 0));
    assert_eq!(rig.r(FFT0, DMA, S2MM_DMASR), 0x1);
}

/// Issue 31, item 3: reset then RS with no wait for the reset to end is caught, leaves nothing
/// stuck, and the next correct reset recovers.
#[test]
fn a_reset_without_polling_recovers_on_the_next_correct_reset() {
    for strict in [false, true] {
        let mut rig = Rig::new(strict, 32);
        rig.start(FFT0);
        rig.w(FFT0, DMA, MM2S_DMACR, 0x4);
        rig.start(FFT0);
        assert_eq!(
            rig.rules(),
            [Rule::WriteDuringReset, Rule::WriteDuringReset]
        );
        rig.wait(Duration::from_millis(1));
        for cr in [MM2S_DMACR, S2MM_DMACR] {
            assert_eq!(rig.r(FFT0, DMA, cr) & 0x4, 0, "strict {strict}: {cr:#x}");
        }
        rig.clear();
        // Our driver's reset: bit 2, wait for it to clear on both, then start.
        rig.w(FFT0, DMA, MM2S_DMACR, 0x4);
        assert!(rig.poll(FFT0, MM2S_DMACR, |c| c & 4 == 0));
        assert!(rig.poll(FFT0, S2MM_DMACR, |c| c & 4 == 0));
        rig.start(FFT0);
        assert_eq!(rig.r(FFT0, DMA, MM2S_DMASR), 0);
        rig.cedr_fft(FFT0, 64, true, false);
        assert_eq!(rig.rules(), [], "strict {strict}");
    }
}

/// Issue 31, item 2: registers read back as PG021's core shows them.
#[test]
fn registers_read_back_as_the_core_shows_them() {
    let mut rig = Rig::new(false, 32);
    rig.w(FFT0, DMA, MM2S_DMACR, 0);
    assert_eq!(rig.r(FFT0, DMA, MM2S_DMACR), 0x2, "bit 1 reads 1");
    rig.w(FFT0, DMA, S2MM_DMACR, 0xFFFF_FFFB);
    assert_eq!(
        rig.r(FFT0, DMA, S2MM_DMACR),
        0xFFFF_701B,
        "reserved bits read 0"
    );
    for off in [0x08, 0x10, 0x2C, 0x38, 0x50, 0x5C, 0x100] {
        rig.w(FFT0, DMA, off, 0xdead_beef);
        assert_eq!(rig.r(FFT0, DMA, off), 0, "reserved offset {off:#x}");
    }
    rig.w(FFT0, DMA, MM2S_SA_MSB, 1);
    rig.w(FFT0, DMA, S2MM_DA_MSB, 1);
    assert_eq!(
        rig.r(FFT0, DMA, MM2S_SA_MSB),
        0,
        "no MSB on 32-bit addresses"
    );
    assert_eq!(rig.r(FFT0, DMA, S2MM_DA_MSB), 0);
    rig.start(FFT0);
    rig.w(FFT0, DMA, S2MM_DA, rig.phys());
    rig.w(FFT0, DMA, S2MM_LENGTH, (1 << 26) + 16);
    assert_eq!(rig.r(FFT0, DMA, S2MM_LENGTH), 16, "masked to 26 bits");
    assert_eq!(rig.rules(), [Rule::LengthTooWide]);

    // With a 64-bit address configuration the MSB registers hold what is written.
    let mut wide = Rig::new(false, 64);
    wide.w(FFT0, DMA, MM2S_SA_MSB, 1);
    assert_eq!(wide.r(FFT0, DMA, MM2S_SA_MSB), 1);
}

/// Issue 31, item 2: an S2MM overrun (a packet longer than LENGTH) shows DMASR 0x5011 and RS
/// cleared, and LENGTH reads the bytes written.
#[test]
fn an_s2mm_overrun_halts_with_dmainterr_and_clears_rs() {
    let mut rig = Rig::new(false, 32);
    rig.start(FFT0);
    for (off, v) in [
        (GPIO_TRI1, 0),
        (GPIO_TRI2, 0),
        (GPIO_DATA2, 0x108),
        (GPIO_DATA1, 1),
    ] {
        rig.w(FFT0, CTRL, off, v);
    }
    rig.w(FFT0, CTRL, GPIO_DATA1, 0);
    let p = rig.phys();
    rig.w(FFT0, DMA, S2MM_DA, p + 0x1_0000);
    rig.w(FFT0, DMA, S2MM_LENGTH, 1024); // half the 256-point frame
    rig.w(FFT0, DMA, MM2S_SA, p);
    rig.w(FFT0, DMA, MM2S_LENGTH, 2048);
    rig.wait(Duration::from_micros(10));
    assert_eq!(rig.r(FFT0, DMA, S2MM_DMASR), 0x5011);
    assert_eq!(rig.r(FFT0, DMA, S2MM_DMACR), 0x5002);
    assert_eq!(rig.r(FFT0, DMA, S2MM_LENGTH), 1024);
    assert_eq!(rig.rules(), []);
}

/// Issue 31, item 4: MM2S before S2MM, with a new destination address: the output waits in
/// the stream and lands at the new address; output nobody takes is flagged after the bound.
#[test]
fn output_waits_in_the_stream_for_s2mm() {
    let mut rig = Rig::new(true, 32);
    rig.start(FFT0);
    for (off, v) in [
        (GPIO_TRI1, 0),
        (GPIO_TRI2, 0),
        (GPIO_DATA2, 0x108),
        (GPIO_DATA1, 1),
    ] {
        rig.w(FFT0, CTRL, off, v);
    }
    rig.w(FFT0, CTRL, GPIO_DATA1, 0);
    let mut x = vec![0.0f32; 512];
    x[0] = 1.0;
    rig.put(0, &x);
    let p = rig.phys();
    rig.w(FFT0, DMA, MM2S_SA, p);
    rig.w(FFT0, DMA, MM2S_LENGTH, 2048);
    rig.wait(Duration::from_millis(1));
    // Within the stream's depth: MM2S completes; S2MM has nothing yet.
    assert_eq!(rig.r(FFT0, DMA, MM2S_DMASR), 0x1002);
    rig.w(FFT0, DMA, S2MM_DA, p + 0x2_0000);
    rig.w(FFT0, DMA, S2MM_LENGTH, 2048);
    assert_eq!(rig.r(FFT0, DMA, S2MM_DMASR), 0x1002);
    assert!(rig.get(0x2_0000, 512).chunks(2).all(|c| c == [1.0, 0.0]));
    assert_eq!(rig.rules(), []);

    // Again without ever arming S2MM: recorded once the output has waited past the bound.
    rig.w(FFT0, CTRL, GPIO_DATA1, 1);
    rig.w(FFT0, CTRL, GPIO_DATA1, 0);
    rig.w(FFT0, DMA, MM2S_SA, p);
    rig.w(FFT0, DMA, MM2S_LENGTH, 2048);
    rig.wait(Duration::from_micros(1)); // MM2S done: the output enters the stream
    rig.wait(super::STREAM_WAIT / 2);
    assert_eq!(rig.rules(), []);
    rig.wait(super::STREAM_WAIT / 2 + Duration::from_millis(1));
    assert_eq!(rig.rules(), [Rule::OutputWithoutS2mm]);
}

/// Output over the stream's depth holds MM2S until S2MM takes it.
#[test]
fn output_over_the_stream_depth_holds_mm2s() {
    let mut rig = Rig::new(false, 32);
    rig.start(ZIP0);
    let n = 2048; // complex: 4,096 floats per input, 16 KiB of output
    rig.w(ZIP0, CTRL, ZIP_SIZE_REG, 2 * n as u32);
    rig.w(ZIP0, CTRL, ZIP_OP_REG, 4);
    let p = rig.phys();
    // Three packets of 16 KiB: the third does not fit the 32 KiB stream.
    for k in 0..3 {
        rig.w(ZIP0, DMA, MM2S_SA, p);
        rig.w(ZIP0, DMA, MM2S_LENGTH, 16 * n as u32);
        rig.wait(Duration::from_micros(10));
        let sr = rig.r(ZIP0, DMA, MM2S_DMASR);
        assert_eq!(sr & 0x2 != 0, k < 2, "packet {k}: MM2S DMASR {sr:#x}");
        if k < 2 {
            rig.w(ZIP0, DMA, MM2S_DMASR, 0x1000);
        }
    }
    // S2MM takes the first packet: MM2S completes.
    rig.w(ZIP0, DMA, S2MM_DA, p + 0x10_0000);
    rig.w(ZIP0, DMA, S2MM_LENGTH, 8 * n as u32);
    assert_eq!(rig.r(ZIP0, DMA, MM2S_DMASR) & 0x2, 0x2);
}

/// Under a timing model, a 256-point FFT's transfer is modelled as 1 µs of DMA start-up and
/// 256 clocks each in, through the core and out at 100 MHz: 1,000 + 3 · 2,560 = 8,680 ns.
/// Without real-time pacing (a standalone emulator's default) the transfer is due as soon as
/// the MM2S LENGTH write is seen (the floor is 0): the modelled time is counted, not waited;
/// with it, exactly 8,680 ns later.
#[test]
fn modelled_transfer_time_is_waited_out_only_under_real_time_pacing() {
    use crate::backend::fpga::timing::TimingModel;
    for (real_time, wait) in [(false, 0), (true, 8_680)] {
        let mut layout = EmulatorLayout::zcu102_like();
        layout.timing = Some(TimingModel::zcu102());
        layout.real_time = real_time;
        let mut rig = Rig::with_layout(layout, 32);
        rig.cedr_reset_dma(FFT0);
        let (p, bytes) = (rig.phys(), 8 * 256);
        rig.cedr_setup(FFT0, S2MM_DMACR, S2MM_DA, S2MM_LENGTH, p + bytes, bytes);
        rig.cedr_setup(FFT0, MM2S_DMACR, MM2S_SA, MM2S_LENGTH, p, bytes);
        let started = rig.now; // the LENGTH write's time
        assert_eq!(
            rig.board.accels[FFT0].mm2s.due,
            Some(started + Duration::from_nanos(wait)),
            "real_time {real_time}"
        );
        let counted = rig.ctl.modelled[FFT0]
            .each_ref()
            .map(|c| c.load(std::sync::atomic::Ordering::Relaxed));
        assert_eq!(counted, [1_000, 2_560, 2_560, 2_560], "counted either way");
    }
}

/// A file swapped for a symbolic link after the emulator made it and before the model maps it
/// (the buffer, a register page, a sync FIFO, the acknowledgement page): the model refuses it,
/// named, instead of mapping, and later writing, what the link points at.
#[test]
fn the_model_maps_no_file_swapped_for_a_link_after_it_was_made() {
    const KEPT: &[u8] = b"a file of the user's, kept byte for byte\n";
    let entries = [
        "dev/udmabuf0",
        "regs/fft0.dma",
        "sys/class/u-dma-buf/udmabuf0/sync_for_device",
        "sys/class/u-dma-buf/udmabuf0/rimms_emu_sync",
    ];
    for entry in entries {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("emu");
        std::fs::create_dir(&dir).unwrap();
        let layout = EmulatorLayout::zcu102_like();
        let config = files::create_without_config(&dir, &layout).unwrap();
        let victim = outer.path().join("victim");
        std::fs::write(&victim, KEPT).unwrap();
        let at = dir.join(entry);
        assert!(at.exists(), "{entry} is one of the emulator's files");
        std::fs::remove_file(&at).unwrap();
        std::os::unix::fs::symlink(&victim, &at).unwrap();
        let e = match Board::open(&dir, &config, &layout) {
            Ok(_) => format!("mapped through the link {entry}"),
            Err(e) => e.to_string(),
        };
        assert_eq!(std::fs::read(&victim).unwrap(), KEPT, "{entry}");
        assert!(
            e.contains(&at.display().to_string()) && e.contains("symbolic link"),
            "{entry}: {e}"
        );
    }
}

//! Deliberately wrong drivers against the strict emulator: each breaks one rule of the hardware
//! (PG021's AXI DMA, the FFT core's config channel and framing, the ZIP core's capacity, the
//! caches of a cached u-dma-buf) and each is caught, as a recorded violation and, in strict
//! mode, as an error the driver sees. Plus the register trace of one FFT and one ZIP call
//! against the sequences of CEDR's headers, the hard reset clearing a partial frame, and the
//! driver's own calls running with zero violations.
//!
//! Expected values are worked out independently: an impulse transforms to all ones, a constant
//! to N at bin 0, a direct O(N²) DFT for general inputs.

use std::time::Duration;

use rimms_runtime::backend::fpga::axi_dma::{
    DMACR_RESET, DMACR_START, DMASR_ERR_MASK, DMASR_IOC_IRQ, MM2S_DMACR, MM2S_DMASR, MM2S_LENGTH,
    MM2S_SA, S2MM_DA, S2MM_DMACR, S2MM_DMASR, S2MM_LENGTH,
};
use rimms_runtime::backend::fpga::zip_ip::{ZIP_OP_REG, ZIP_SIZE_REG};
use rimms_runtime::backend::fpga::{
    Accelerator, Block, BusTrace, Emulator, EmulatorLayout, FftConfigPath, FpgaBoard, Rule,
};
use rimms_runtime::{Complex32, FftDirection, ZipOp};

const IN: usize = 0x1_0000;
const OUT: usize = 0x2_0000;

fn start(layout: EmulatorLayout) -> (tempfile::TempDir, Emulator, FpgaBoard) {
    let dir = tempfile::tempdir().unwrap();
    let emu = Emulator::start(dir.path(), &layout).unwrap();
    let board = FpgaBoard::open(emu.config()).unwrap();
    emu.clear_trace();
    (dir, emu, board)
}

fn strict() -> (tempfile::TempDir, Emulator, FpgaBoard) {
    let mut layout = EmulatorLayout::zcu102_like();
    layout.strict = true;
    layout.poll_timeout_ms = 100;
    start(layout)
}

fn lenient() -> (tempfile::TempDir, Emulator, FpgaBoard) {
    let mut layout = EmulatorLayout::zcu102_like();
    layout.poll_timeout_ms = 100;
    start(layout)
}

fn rules(emu: &Emulator) -> Vec<Rule> {
    emu.violations().iter().map(|v| v.rule).collect()
}

/// Strict mode stopped the engine: an error bit on both channels.
fn assert_engine_failed(a: &Accelerator, emu: &Emulator) {
    emu.settle();
    for sr in [MM2S_DMASR, S2MM_DMASR] {
        let v = a.dma().regs().read32(sr).unwrap();
        assert_ne!(v & DMASR_ERR_MASK, 0, "DMASR {sr:#x} = {v:#x}");
    }
}

fn phys(a: &Accelerator, off: usize) -> u32 {
    (a.memory().phys_addr() + off as u64) as u32
}

fn impulse(a: &Accelerator, off: usize, n: usize) {
    let mut x = vec![Complex32::new(0.0, 0.0); n];
    x[0] = Complex32::new(1.0, 0.0);
    a.memory().write_complex(off, &x).unwrap();
}

fn read(a: &Accelerator, off: usize, n: usize) -> Vec<Complex32> {
    let mut y = vec![Complex32::new(0.0, 0.0); n];
    a.memory().read_complex(off, &mut y).unwrap();
    y
}

fn all_ones(y: &[Complex32]) -> bool {
    y.iter()
        .all(|c| (c.re - 1.0).abs() < 1e-5 && c.im.abs() < 1e-5)
}

/// Hands input and output to the device as a correct driver would.
fn to_device(a: &Accelerator, bytes: usize) {
    a.memory().sync_for_device(IN, bytes).unwrap();
    a.memory().sync_for_device(OUT, bytes).unwrap();
}

#[test]
fn length_before_address_is_caught() {
    let (_d, emu, board) = strict();
    let a = board.accelerator("fft0").unwrap();
    let r = a.dma().regs();
    a.fft_ip().unwrap().write_config(0x108).unwrap();
    r.write32(S2MM_DA, phys(a, OUT)).unwrap();
    r.write32(S2MM_LENGTH, 2048).unwrap();
    r.write32(MM2S_LENGTH, 2048).unwrap(); // before its address
    r.write32(MM2S_SA, phys(a, IN)).unwrap();
    assert_eq!(rules(&emu).first(), Some(&Rule::AddressNotProgrammed));
    assert_engine_failed(a, &emu);
}

#[test]
fn s2mm_not_rearmed_is_caught() {
    let (_d, emu, board) = strict();
    let a = board.accelerator("fft0").unwrap();
    impulse(a, IN, 256);
    a.fft(FftDirection::Forward, 256, 1, IN, OUT).unwrap();
    assert_eq!(rules(&emu), []);
    // A second frame with only MM2S programmed: S2MM still holds the first transfer's values.
    let r = a.dma().regs();
    a.fft_ip().unwrap().write_config(0x108).unwrap();
    r.write32(MM2S_SA, phys(a, IN)).unwrap();
    r.write32(MM2S_LENGTH, 2048).unwrap();
    // The output waits in the stream (as on the board); once it has waited past the model's
    // bound with S2MM still not armed, the missing re-arm is recorded.
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(rules(&emu), [Rule::OutputWithoutS2mm]);
    assert_engine_failed(a, &emu);
}

/// Issue 31: MM2S before S2MM is not an error on the board: the core's output waits in the
/// stream until S2MM is armed, then lands at S2MM's (new) address.
#[test]
fn mm2s_before_s2mm_waits_in_the_stream() {
    let (_d, emu, board) = strict();
    let a = board.accelerator("fft1").unwrap();
    let r = a.dma().regs();
    impulse(a, IN, 256);
    to_device(a, 2048);
    a.fft_ip().unwrap().write_config(0x108).unwrap();
    r.write32(MM2S_SA, phys(a, IN)).unwrap();
    r.write32(MM2S_LENGTH, 2048).unwrap();
    emu.settle();
    r.write32(S2MM_DA, phys(a, OUT)).unwrap();
    r.write32(S2MM_LENGTH, 2048).unwrap();
    emu.settle();
    for sr in [MM2S_DMASR, S2MM_DMASR] {
        let v = r.read32(sr).unwrap();
        let want = DMASR_IOC_IRQ | 0x2;
        assert_eq!(v & (want | DMASR_ERR_MASK), want, "{sr:#x}: {v:#x}");
    }
    assert_eq!(r.read32(S2MM_LENGTH).unwrap(), 2048);
    a.memory().sync_for_cpu(OUT, 2048).unwrap();
    assert!(all_ones(&read(a, OUT, 256)));
    assert_eq!(rules(&emu), []);
}

#[test]
fn an_unaligned_address_is_caught() {
    let (_d, emu, board) = strict();
    let a = board.accelerator("fft0").unwrap();
    let r = a.dma().regs();
    r.write32(S2MM_DA, phys(a, OUT) + 4).unwrap();
    r.write32(S2MM_LENGTH, 2048).unwrap();
    assert_eq!(rules(&emu), [Rule::UnalignedAddress]);
    assert_engine_failed(a, &emu);
}

#[test]
fn an_over_wide_length_is_an_error_not_a_mask() {
    let (_d, emu, board) = strict();
    let a = board.accelerator("zip0").unwrap();
    let r = a.dma().regs();
    r.write32(S2MM_DA, phys(a, OUT)).unwrap();
    // 2^26 + 64 would be 64 bytes if the field were masked to 26 bits.
    r.write32(S2MM_LENGTH, (1 << 26) + 64).unwrap();
    assert_eq!(rules(&emu), [Rule::LengthTooWide]);
    assert_engine_failed(a, &emu);
}

#[test]
fn length_or_address_written_while_busy_is_caught() {
    let mut layout = EmulatorLayout::zcu102_like();
    // Slow transfers, so the second write surely lands while the first is in flight (even when
    // a loaded machine leaves the emulator's thread waiting for a core).
    layout.transfer_floor_us = 500_000;
    layout.poll_timeout_ms = 200;
    let (_d, emu, board) = start(layout);
    let a = board.accelerator("fft0").unwrap();
    let r = a.dma().regs();
    a.fft_ip().unwrap().write_config(0x108).unwrap();
    r.write32(S2MM_DA, phys(a, OUT)).unwrap();
    r.write32(S2MM_LENGTH, 2048).unwrap();
    r.write32(MM2S_SA, phys(a, IN)).unwrap();
    r.write32(MM2S_LENGTH, 2048).unwrap();
    r.write32(MM2S_SA, phys(a, IN + 2048)).unwrap();
    r.write32(MM2S_LENGTH, 2048).unwrap();
    assert_eq!(rules(&emu), [Rule::AddressWhileBusy, Rule::LengthWhileBusy]);
}

#[test]
fn rs_before_the_reset_completes_is_lost() {
    let mut layout = EmulatorLayout::zcu102_like();
    layout.strict = true;
    // A long reset, so the test does not depend on how fast this thread writes.
    layout.soft_reset_us = 20_000;
    let (_d, emu, board) = start(layout);
    let a = board.accelerator("fft0").unwrap();
    let r = a.dma().regs();
    r.write32(MM2S_DMACR, DMACR_RESET).unwrap();
    r.write32(MM2S_DMACR, DMACR_START).unwrap(); // no wait for bit 2 to clear
    assert_eq!(rules(&emu).first(), Some(&Rule::WriteDuringReset));
    // The write was lost: once the reset is over the channel is halted with reset values.
    std::thread::sleep(Duration::from_millis(40));
    emu.settle();
    assert_eq!(r.read32(MM2S_DMACR).unwrap(), 0x0001_0002);
    assert_eq!(r.read32(S2MM_DMACR).unwrap(), 0x0001_0002);
}

#[test]
fn a_missing_sync_for_device_reads_stale_memory() {
    let (_d, emu, board) = lenient();
    let a = board.accelerator("fft0").unwrap();
    // A correct call first, so DRAM holds a known input (a constant) at IN.
    a.memory()
        .write_complex(IN, &vec![Complex32::new(1.0, 0.0); 256])
        .unwrap();
    a.fft(FftDirection::Forward, 256, 1, IN, OUT).unwrap();
    emu.clear_trace();
    // Now the CPU writes an impulse and starts the DMA without cleaning its cache.
    impulse(a, IN, 256);
    a.memory().sync_for_device(OUT, 2048).unwrap();
    a.fft_ip().unwrap().write_config(0x108).unwrap();
    a.dma()
        .transfer(u64::from(phys(a, IN)), 2048, u64::from(phys(a, OUT)), 2048)
        .unwrap();
    a.memory().sync_for_cpu(OUT, 2048).unwrap();
    let y = read(a, OUT, 256);
    // The DMA read the constant still in DRAM: N at bin 0, not the impulse's flat spectrum.
    assert!(
        (y[0].re - 256.0).abs() < 1e-3 && !all_ones(&y),
        "{:?}",
        &y[..2]
    );
    assert_eq!(rules(&emu), [Rule::MissingSyncForDevice]);
}

#[test]
fn a_missing_sync_for_cpu_reads_stale_cache() {
    let (_d, emu, board) = lenient();
    let a = board.accelerator("fft1").unwrap();
    impulse(a, IN, 256);
    a.memory()
        .write_complex(OUT, &vec![Complex32::new(7.0, 7.0); 256])
        .unwrap();
    to_device(a, 2048);
    a.fft_ip().unwrap().write_config(0x108).unwrap();
    a.dma()
        .transfer(u64::from(phys(a, IN)), 2048, u64::from(phys(a, OUT)), 2048)
        .unwrap();
    // No sync_for_cpu: the CPU still sees its own old lines.
    assert!(read(a, OUT, 256)
        .iter()
        .all(|c| *c == Complex32::new(7.0, 7.0)));
    a.memory().sync_for_cpu(OUT, 2048).unwrap();
    assert!(all_ones(&read(a, OUT, 256)));
    assert_eq!(rules(&emu), []);
}

#[test]
fn fft_config_on_the_wrong_gpio_channel_is_caught_and_transforms_wrongly() {
    let (_d, emu, board) = lenient();
    let a = board.accelerator("fft0").unwrap();
    // The old driver: the word for a 512-point forward FFT (log2 = 9, odd) written to 0x00, on
    // a GPIO whose channels are outputs (as CEDR's own driver leaves them).
    let n = 512;
    impulse(a, IN, n);
    to_device(a, 8 * n);
    a.control().write32(0x04, 0).unwrap();
    a.control().write32(0x0C, 0).unwrap();
    a.control().write32(0x00, 0x109).unwrap();
    let r = a.dma().transfer(
        u64::from(phys(a, IN)),
        8 * n,
        u64::from(phys(a, OUT)),
        8 * n,
    );
    // tvalid saw bit 0 and pushed tdata = 0: clamped to an 8-point inverse FFT, so the
    // 512-point packet became 64 frames and S2MM got 8 points.
    assert!(r.is_err());
    assert_eq!(
        rules(&emu),
        [
            Rule::FftConfigWrongChannel,
            Rule::FftConfigClamped,
            Rule::FftFrameLength
        ]
    );
}

#[test]
fn the_register_config_path_is_written_where_the_board_says() {
    let mut layout = EmulatorLayout::zcu102_like();
    layout.strict = true;
    for a in &mut layout.accelerators {
        if a.kind == rimms_runtime::backend::fpga::AccelKind::Fft {
            a.fft_config = Some(FftConfigPath::Register);
        }
    }
    let (_d, emu, board) = start(layout);
    let a = board.accelerator("fft0").unwrap();
    for n in [8, 256, 2048] {
        impulse(a, IN, n);
        a.fft(FftDirection::Forward, n, 1, IN, OUT).unwrap();
        assert!(all_ones(&read(a, OUT, n)), "{n}");
        let word = n.trailing_zeros() | 0x100;
        assert_eq!(a.control().read32(0).unwrap(), word);
    }
    assert_eq!(rules(&emu), []);
}

#[test]
fn a_short_fft_frame_is_caught() {
    let (_d, emu, board) = strict();
    let a = board.accelerator("fft0").unwrap();
    let r = a.dma().regs();
    a.fft_ip().unwrap().write_config(0x108).unwrap(); // 256 points
    r.write32(S2MM_DA, phys(a, OUT)).unwrap();
    r.write32(S2MM_LENGTH, 2048).unwrap();
    r.write32(MM2S_SA, phys(a, IN)).unwrap();
    r.write32(MM2S_LENGTH, 1024).unwrap(); // 128 points
    emu.settle();
    assert_eq!(rules(&emu), [Rule::FftFrameLength]);
    assert_engine_failed(a, &emu);
}

#[test]
fn a_zip_over_the_cores_capacity_is_caught() {
    let (_d, emu, board) = strict();
    let z = board.accelerator("zip0").unwrap();
    let r = z.dma().regs();
    // The old driver's limit: 4,096 complex elements = 8,192 floats per input.
    let floats = 8192u32;
    z.control().write32(ZIP_SIZE_REG, floats).unwrap();
    z.control().write32(ZIP_OP_REG, 4).unwrap();
    r.write32(S2MM_DA, phys(z, 0x10_0000)).unwrap();
    r.write32(S2MM_LENGTH, 4 * floats).unwrap();
    r.write32(MM2S_SA, phys(z, 0)).unwrap();
    r.write32(MM2S_LENGTH, 8 * floats).unwrap();
    emu.settle();
    assert_eq!(rules(&emu), [Rule::ZipOverCapacity]);
    assert_engine_failed(z, &emu);
}

#[test]
fn a_long_zip_is_cut_to_the_cores_capacity() {
    let (_d, emu, board) = strict();
    let z = board.accelerator("zip1").unwrap();
    let n = 4096; // complex elements: 8,192 floats, twice the core
    let a: Vec<Complex32> = (0..n).map(|i| Complex32::new(i as f32, 1.0)).collect();
    let b: Vec<Complex32> = (0..n).map(|i| Complex32::new(2.0, -(i as f32))).collect();
    let (ao, bo, oo) = (0, 8 * n, 0x10_0000);
    z.memory().write_complex(ao, &a).unwrap();
    z.memory().write_complex(bo, &b).unwrap();
    z.zip_in_pieces(ZipOp::Mul, n, ao, bo, oo).unwrap();
    let y = read(z, oo, n);
    for (i, got) in y.iter().enumerate() {
        // (i + j)(2 - i j) = 2i + i + j(2 - i²)
        let want = Complex32::new(3.0 * i as f32, 2.0 - (i * i) as f32);
        assert!((got - want).norm() <= 1e-3 * want.norm().max(1.0), "{i}");
    }
    assert_eq!(emu.transfers("zip1").unwrap(), 2);
    let sizes: Vec<u32> = emu
        .bus_trace()
        .iter()
        .filter(|t| t.block == Block::Control && t.offset == ZIP_SIZE_REG as u32)
        .map(|t| t.value)
        .collect();
    assert_eq!(sizes, [4096, 4096]);
    assert_eq!(rules(&emu), []);
}

/// A partial frame left in the core by a fault, then one correct FFT: with the reset GPIO the
/// driver's recovery clears the core and the FFT is right; without it (a DMA soft reset only)
/// the leftover points shift the frame and the result is wrong.
fn fft_after_a_partial_frame(reset_gpio: bool) -> Vec<Complex32> {
    let mut layout = EmulatorLayout::zcu102_like();
    layout.poll_timeout_ms = 50;
    for a in &mut layout.accelerators {
        a.no_reset_gpio = !reset_gpio;
    }
    let (_d, _emu, board) = start(layout);
    let a = board.accelerator("fft0").unwrap();
    let n = 256;
    a.memory()
        .write_complex(IN, &vec![Complex32::new(5.0, 5.0); n])
        .unwrap();
    to_device(a, 8 * n);
    a.fft_ip().unwrap().write_config(0x108).unwrap();
    // Half a frame reaches the core; S2MM never completes: a timeout.
    let e = a.dma().transfer(
        u64::from(phys(a, IN)),
        4 * n,
        u64::from(phys(a, OUT)),
        8 * n,
    );
    assert!(e.is_err());
    impulse(a, IN, n);
    a.fft(FftDirection::Forward, n, 1, IN, OUT).unwrap();
    read(a, OUT, n)
}

#[test]
fn the_hard_reset_leaves_no_partial_frame_behind() {
    assert!(all_ones(&fft_after_a_partial_frame(true)));
    // Control: the same fault without the reset GPIO corrupts the next frame.
    assert!(!all_ones(&fft_after_a_partial_frame(false)));
}

#[test]
fn one_fft_and_one_zip_hit_the_registers_in_cedrs_order() {
    let (_d, emu, board) = strict();
    let f = board.accelerator("fft0").unwrap();
    impulse(f, IN, 256);
    f.fft(FftDirection::Forward, 256, 1, IN, OUT).unwrap();
    let t = |block, offset: usize, value: u32| BusTrace {
        accel: "fft0".into(),
        block,
        offset: offset as u32,
        value,
    };
    let (pi, po) = (phys(f, IN), phys(f, OUT));
    // CEDR's config_fft (fft.h, FFT_CONFIG_VIA_GPIO): tri 1 and tri 2 to 0, the word (forward
    // bit 8 | log2 N) to channel 2, tvalid 1 then 0. Our delay is a read-back, not a write.
    // Then setup_rx before setup_tx (S2MM armed before MM2S starts), address before LENGTH,
    // and the two IOC acknowledgements.
    let want = vec![
        t(Block::Control, 0x04, 0),
        t(Block::Control, 0x0C, 0),
        t(Block::Control, 0x08, 0x108),
        t(Block::Control, 0x00, 1),
        t(Block::Control, 0x00, 0),
        t(Block::Dma, S2MM_DA, po),
        t(Block::Dma, S2MM_LENGTH, 2048),
        t(Block::Dma, MM2S_SA, pi),
        t(Block::Dma, MM2S_LENGTH, 2048),
        t(Block::Dma, MM2S_DMASR, DMASR_IOC_IRQ),
        t(Block::Dma, S2MM_DMASR, DMASR_IOC_IRQ),
    ];
    assert_eq!(emu.bus_trace(), want);
    assert!(all_ones(&read(f, OUT, 256)));

    emu.clear_trace();
    let z = board.accelerator("zip0").unwrap();
    let n = 64;
    let (a, b, o) = (0x3_0000, 0x3_0000 + 8 * n, 0x4_0000);
    z.memory()
        .write_complex(a, &vec![Complex32::new(1.0, 2.0); n])
        .unwrap();
    z.memory()
        .write_complex(b, &vec![Complex32::new(3.0, -1.0); n])
        .unwrap();
    z.zip(ZipOp::Mul, n, a, b, o).unwrap();
    let t = |block, offset: usize, value: u32| BusTrace {
        accel: "zip0".into(),
        block,
        offset: offset as u32,
        value,
    };
    // CEDR's zip.h: config_zip_size (0x10, floats), config_zip_op (0x18, 4 = complex
    // multiply), then the DMA as for the FFT: one MM2S packet of input 0 then input 1.
    let want = vec![
        t(Block::Control, ZIP_SIZE_REG, 2 * n as u32),
        t(Block::Control, ZIP_OP_REG, 4),
        t(Block::Dma, S2MM_DA, phys(z, o)),
        t(Block::Dma, S2MM_LENGTH, 8 * n as u32),
        t(Block::Dma, MM2S_SA, phys(z, a)),
        t(Block::Dma, MM2S_LENGTH, 16 * n as u32),
        t(Block::Dma, MM2S_DMASR, DMASR_IOC_IRQ),
        t(Block::Dma, S2MM_DMASR, DMASR_IOC_IRQ),
    ];
    assert_eq!(emu.bus_trace(), want);
    // (1 + 2j)(3 - j) = 5 + 5j
    assert!(read(z, o, n).iter().all(|c| *c == Complex32::new(5.0, 5.0)));
    assert_eq!(rules(&emu), []);
}

#[test]
fn opening_resets_every_core_through_its_gpio_then_the_dma() {
    let dir = tempfile::tempdir().unwrap();
    let mut layout = EmulatorLayout::zcu102_like();
    layout.strict = true;
    let emu = Emulator::start(dir.path(), &layout).unwrap();
    let _board = FpgaBoard::open(emu.config()).unwrap();
    let fft0: Vec<(Block, u32, u32)> = emu
        .bus_trace()
        .into_iter()
        .filter(|t| t.accel == "fft0")
        .map(|t| (t.block, t.offset, t.value))
        .collect();
    // CEDR's reset_fft_and_dma: tri 0, data 0 (active low), hold, data 1; then the DMA's soft
    // reset (waited for), and run on both channels.
    assert_eq!(
        fft0,
        [
            (Block::Reset, 0x04, 0),
            (Block::Reset, 0x00, 0),
            (Block::Reset, 0x00, 1),
            (Block::Dma, MM2S_DMACR as u32, DMACR_RESET),
            (Block::Dma, S2MM_DMACR as u32, DMACR_START),
            (Block::Dma, MM2S_DMACR as u32, DMACR_START),
        ]
    );
    assert_eq!(rules(&emu), []);
}

#[test]
fn correct_calls_of_every_kind_break_no_rule() {
    let (_d, emu, board) = strict();
    let f = board.accelerator("fft1").unwrap();
    let mut rng = 1u32;
    let mut next = || {
        rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (rng >> 8) as f32 / (1 << 24) as f32 - 0.5
    };
    for (n, rows, dir) in [
        (8, 3, FftDirection::Forward),
        (64, 2, FftDirection::Inverse),
        (2048, 2, FftDirection::Forward),
    ] {
        let x: Vec<Complex32> = (0..n * rows)
            .map(|_| Complex32::new(next(), next()))
            .collect();
        f.memory().write_complex(IN, &x).unwrap();
        f.fft(dir, n, rows, IN, OUT).unwrap();
        let y = read(f, OUT, n * rows);
        let sign = if dir == FftDirection::Forward {
            -1.0
        } else {
            1.0
        };
        let scale = if dir == FftDirection::Forward {
            1.0
        } else {
            1.0 / n as f64
        };
        for r in 0..rows {
            for k in 0..n {
                let mut acc = (0.0f64, 0.0f64);
                for (j, v) in x[r * n..(r + 1) * n].iter().enumerate() {
                    let ph = sign * 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                    acc.0 += v.re as f64 * ph.cos() - v.im as f64 * ph.sin();
                    acc.1 += v.re as f64 * ph.sin() + v.im as f64 * ph.cos();
                }
                let got = y[r * n + k];
                let err = ((got.re as f64 - acc.0 * scale).powi(2)
                    + (got.im as f64 - acc.1 * scale).powi(2))
                .sqrt();
                assert!(err < 1e-3 * (n as f64).sqrt(), "{n} row {r} bin {k}: {err}");
            }
        }
    }
    // In place, and the ZIPs on both input paths.
    impulse(f, IN, 256);
    f.fft(FftDirection::Forward, 256, 1, IN, IN).unwrap();
    assert!(all_ones(&read(f, IN, 256)));
    let z = board.accelerator("zip0").unwrap();
    let n = 100;
    z.memory()
        .write_complex(0x5_0000, &vec![Complex32::new(1.0, 1.0); n])
        .unwrap();
    z.memory()
        .write_complex(0x6_0000, &vec![Complex32::new(2.0, 0.5); n])
        .unwrap();
    for op in [ZipOp::Add, ZipOp::Sub, ZipOp::Mul] {
        z.zip(op, n, 0x5_0000, 0x6_0000, 0x7_0000).unwrap();
        let want = match op {
            ZipOp::Add => Complex32::new(3.0, 1.5),
            ZipOp::Sub => Complex32::new(-1.0, 0.5),
            _ => Complex32::new(1.5, 2.5), // (1 + j)(2 + 0.5j) = 1.5 + 2.5j
        };
        assert!(read(z, 0x7_0000, n).iter().all(|c| *c == want), "{op:?}");
    }
    assert_eq!(rules(&emu), []);
}

/// Issue 31, item 3: reset, then RS without waiting for the reset to end (a driver bug, which
/// is recorded) leaves nothing stuck: DMACR's reset bit clears, and the driver's next correct
/// reset recovers, in strict and lenient mode alike (strict once the harness has taken the
/// violations, which until then keep the engine failing).
#[test]
fn a_reset_without_polling_recovers_on_the_next_correct_reset() {
    for strict in [false, true] {
        let mut layout = EmulatorLayout::zcu102_like();
        layout.strict = strict;
        layout.poll_timeout_ms = 50;
        // A long reset, so the RS writes surely land inside it.
        layout.soft_reset_us = 20_000;
        let (_d, emu, board) = start(layout);
        let a = board.accelerator("fft0").unwrap();
        let r = a.dma().regs();
        r.write32(MM2S_DMACR, DMACR_RESET).unwrap();
        // Lenient, the lost RS goes unnoticed (the channels are not yet halted while the
        // reset runs); strict, the recorded violation fails the call.
        let started = a.dma().start();
        assert_eq!(started.is_err(), strict, "{started:?}");
        std::thread::sleep(Duration::from_millis(40));
        emu.settle();
        for cr in [MM2S_DMACR, S2MM_DMACR] {
            assert_eq!(r.read32(cr).unwrap() & DMACR_RESET, 0, "{cr:#x}");
        }
        let taken: Vec<Rule> = emu.take_violations().iter().map(|v| v.rule).collect();
        assert_eq!(
            taken.first(),
            Some(&Rule::WriteDuringReset),
            "strict {strict}"
        );
        a.dma().reset().unwrap();
        a.dma().start().unwrap();
        impulse(a, IN, 256);
        a.fft(FftDirection::Forward, 256, 1, IN, OUT).unwrap();
        assert!(all_ones(&read(a, OUT, 256)));
        assert_eq!(rules(&emu), [], "strict {strict}");
    }
}

/// Issue 31, item 3's cause: the driver and the emulator both wrote the register page, and an
/// emulator update could overwrite a driver write it had not yet seen, after which DMACR kept
/// its reset bit for good. With the emulator the page's only writer, the sequence
/// (reset, then RS at once, with the default 50 µs reset) never leaves the bit set.
#[test]
fn reset_then_rs_at_once_never_leaves_the_reset_bit_stuck() {
    let (_d, emu, board) = lenient();
    let a = board.accelerator("fft0").unwrap();
    let r = a.dma().regs();
    for _ in 0..50 {
        r.write32(MM2S_DMACR, DMACR_RESET).unwrap();
        r.write32(S2MM_DMACR, DMACR_START).unwrap();
        r.write32(MM2S_DMACR, DMACR_START).unwrap();
        // Writes are posted and a read waits for them: the reset starts when the emulator
        // handles the first, which a loaded machine may delay past a sleep begun before it.
        r.read32(MM2S_DMACR).unwrap();
        std::thread::sleep(Duration::from_millis(1));
        emu.settle();
        for cr in [MM2S_DMACR, S2MM_DMACR] {
            let v = r.read32(cr).unwrap();
            assert_eq!(v & DMACR_RESET, 0, "{cr:#x} = {v:#x}");
        }
    }
    a.dma().reset().unwrap();
    a.dma().start().unwrap();
    impulse(a, IN, 256);
    a.fft(FftDirection::Forward, 256, 1, IN, OUT).unwrap();
    assert!(all_ones(&read(a, OUT, 256)));
}

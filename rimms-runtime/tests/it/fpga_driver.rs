//! The AXI DMA, FFT and ZIP drivers against the emulator thread: reset and start sequences read
//! back from the registers, completion, every injected fault arriving as the right error within
//! the bounded wait with the output range untouched, recovery after a fault, and requests over
//! the limits refused before any register is written.

use std::fs;
use std::time::{Duration, Instant};

use rimms_runtime::backend::fpga::axi_dma::{
    DMACR_START, DMASR_HALTED, DMASR_IDLE, DMASR_IOC_IRQ, MM2S_DMACR, MM2S_DMASR, MM2S_LENGTH,
    MM2S_SA, S2MM_DA, S2MM_DMACR, S2MM_DMASR, S2MM_LENGTH,
};
use rimms_runtime::backend::fpga::zip_ip::{ZIP_OP_REG, ZIP_SIZE_REG};
use rimms_runtime::backend::fpga::{
    Accelerator, Channel, DmaErrorBit, Emulator, EmulatorLayout, FpgaBoard, FpgaFault,
    InjectedFault, Rule,
};
use rimms_runtime::{BackendError, Complex32, FftDirection, ZipOp};

const TIMEOUT: Duration = Duration::from_millis(200);
const SENTINEL: u32 = 0xA5A5_5A5A;

fn setup() -> (tempfile::TempDir, Emulator, FpgaBoard) {
    let dir = tempfile::tempdir().unwrap();
    let mut layout = EmulatorLayout::zcu102_like();
    layout.poll_timeout_ms = TIMEOUT.as_millis() as u64;
    let emu = Emulator::start(dir.path(), &layout).unwrap();
    let board = FpgaBoard::open(emu.config()).unwrap();
    (dir, emu, board)
}

fn acc<'a>(board: &'a FpgaBoard, name: &str) -> &'a Accelerator {
    board.accelerator(name).unwrap()
}

/// An impulse at 0 transforms to all ones: a cheap correct-answer check.
fn write_impulse(a: &Accelerator, off: usize, n: usize) {
    let mut x = vec![Complex32::new(0.0, 0.0); n];
    x[0] = Complex32::new(1.0, 0.0);
    a.memory().write_complex(off, &x).unwrap();
}

fn assert_all_ones(a: &Accelerator, off: usize, n: usize) {
    let mut y = vec![Complex32::new(0.0, 0.0); n];
    a.memory().read_complex(off, &mut y).unwrap();
    assert!(
        y.iter()
            .all(|c| (c.re - 1.0).abs() < 1e-6 && c.im.abs() < 1e-6),
        "{:?}",
        &y[..4]
    );
}

fn fill_sentinel(a: &Accelerator, off: usize, bytes: usize) {
    a.memory()
        .write_words(off, &vec![SENTINEL; bytes / 4])
        .unwrap();
}

fn sentinel_words(a: &Accelerator, off: usize, bytes: usize) -> usize {
    let mut w = vec![0u32; bytes / 4];
    a.memory().read_words(off, &mut w).unwrap();
    w.iter().filter(|&&v| v == SENTINEL).count()
}

#[test]
fn reset_and_start_sequences_read_back_and_a_transfer_completes() {
    let (_dir, emu, board) = setup();
    let a = acc(&board, "fft0");
    let (dma, regs) = (a.dma(), a.dma().regs());
    // Opening the board reset and started every engine.
    assert!(dma.is_ready());

    dma.reset().unwrap();
    assert!(!dma.is_ready());
    // PG021's reset values: the reset bit self-clears, IRQThreshold = 1, bit 1 reads 1.
    assert_eq!(regs.read32(MM2S_DMACR).unwrap(), 0x0001_0002);
    assert_eq!(regs.read32(S2MM_DMACR).unwrap(), 0x0001_0002);
    assert_eq!(regs.read32(MM2S_DMASR).unwrap(), DMASR_HALTED);
    assert_eq!(regs.read32(S2MM_DMASR).unwrap(), DMASR_HALTED);

    dma.start().unwrap();
    assert!(dma.is_ready());
    // What was written, with bit 1 (reserved) reading 1 as PG021 says.
    assert_eq!(regs.read32(MM2S_DMACR).unwrap(), DMACR_START | 0x2);
    assert_eq!(regs.read32(S2MM_DMACR).unwrap(), DMACR_START | 0x2);
    assert_eq!(regs.read32(MM2S_DMASR).unwrap() & DMASR_HALTED, 0);
    assert_eq!(regs.read32(S2MM_DMASR).unwrap() & DMASR_HALTED, 0);

    let (n, input, output) = (256, 0x0, 0x1_0000);
    write_impulse(a, input, n);
    a.fft(FftDirection::Forward, n, 1, input, output).unwrap();
    assert_all_ones(a, output, n);
    let phys = a.memory().phys_addr();
    assert_eq!(regs.read32(S2MM_DA).unwrap() as u64, phys + output as u64);
    assert_eq!(regs.read32(MM2S_SA).unwrap() as u64, phys + input as u64);
    assert_eq!(
        regs.read32(S2MM_LENGTH).unwrap(),
        8 * n as u32,
        "bytes received"
    );
    // The config GPIO: the word on channel 2 (tdata), tvalid (channel 1) pulsed and released,
    // both channels outputs.
    let ctrl = a.control();
    assert_eq!(
        ctrl.read32(0x08).unwrap(),
        0x108,
        "log2 256 = 8, forward in bit 8"
    );
    assert_eq!(ctrl.read32(0x00).unwrap(), 0, "tvalid released");
    assert_eq!(
        (ctrl.read32(0x04).unwrap(), ctrl.read32(0x0C).unwrap()),
        (0, 0)
    );
    emu.settle();
    for sr in [MM2S_DMASR, S2MM_DMASR] {
        let v = regs.read32(sr).unwrap();
        assert_eq!(v & DMASR_IDLE, DMASR_IDLE, "{sr:#x}: {v:#x}");
        assert_eq!(v & DMASR_IOC_IRQ, 0, "{sr:#x}: IOC acknowledged: {v:#x}");
    }
    assert_eq!(emu.transfers("fft0").unwrap(), 1);
    assert_eq!(emu.completions("fft0").unwrap(), 1);

    // A second reset halts both channels again and clears the address and length registers.
    dma.reset().unwrap();
    assert_eq!(regs.read32(MM2S_DMASR).unwrap(), DMASR_HALTED);
    assert_eq!(regs.read32(S2MM_DA).unwrap(), 0);
    assert_eq!(regs.read32(S2MM_LENGTH).unwrap(), 0);
    assert!(!dma.is_ready());
    // The next call restarts the engine by itself.
    a.fft(FftDirection::Forward, n, 1, input, output).unwrap();
    assert_eq!(emu.completions("fft0").unwrap(), 2);
}

/// Runs one FFT with `fault` injected and checks the error, its timing, the output range, and
/// that the next call works again.
fn fault_case(
    board: &FpgaBoard,
    emu: &Emulator,
    fault: InjectedFault,
    check: impl Fn(&FpgaFault),
) -> Duration {
    let a = acc(board, "fft1");
    let (n, input, output) = (256, 0x2_0000, 0x3_0000);
    write_impulse(a, input, n);
    fill_sentinel(a, output, 8 * n);
    emu.inject("fft1", fault).unwrap();
    let t = Instant::now();
    let err = a
        .fft(FftDirection::Forward, n, 1, input, output)
        .unwrap_err();
    let took = t.elapsed();
    match &err {
        BackendError::Fpga { device, fault } => {
            assert_eq!(device, "fft1");
            check(fault);
        }
        other => panic!("{fault:?}: expected an FPGA fault, got {other:?}"),
    }
    assert!(
        took < Duration::from_secs(2),
        "{fault:?}: the error took {took:?}"
    );
    let intact = sentinel_words(a, output, 8 * n);
    match fault {
        InjectedFault::WrongLength { received } => {
            assert_eq!(
                intact,
                (8 * n - received as usize) / 4,
                "only the received bytes changed"
            )
        }
        _ => assert_eq!(
            intact,
            2 * n,
            "{fault:?}: the output range kept its contents"
        ),
    }
    // The engine recovers: the next call resets it and runs.
    a.fft(FftDirection::Forward, n, 1, input, output).unwrap();
    assert_all_ones(a, output, n);
    took
}

#[test]
fn every_injected_dma_error_is_reported_naming_channel_and_bit() {
    let (_dir, emu, board) = setup();
    for channel in [Channel::Mm2s, Channel::S2mm] {
        for bit in [
            DmaErrorBit::Internal,
            DmaErrorBit::Slave,
            DmaErrorBit::Decode,
        ] {
            let took = fault_case(
                &board,
                &emu,
                InjectedFault::DmaError { channel, bit },
                |f| match f {
                    FpgaFault::DmaError {
                        channel: c,
                        bit: b,
                        status,
                    } => {
                        assert_eq!((*c, *b), (channel, bit));
                        assert_ne!(status & bit.mask(), 0);
                        let msg = f.to_string();
                        assert!(msg.contains(&channel.to_string()), "{msg}");
                        assert!(msg.contains(&format!("bit {}", bit.bit())), "{msg}");
                    }
                    other => panic!("{channel} {bit}: {other:?}"),
                },
            );
            // An error bit ends the wait at once, not at the timeout.
            assert!(took < TIMEOUT, "{channel} {bit}: {took:?}");
        }
    }
}

#[test]
fn a_core_that_never_finishes_times_out_within_the_bound() {
    let (_dir, emu, board) = setup();
    let took = fault_case(&board, &emu, InjectedFault::CoreHang, |f| match f {
        FpgaFault::Timeout { what, waited } => {
            assert!(what.contains("S2MM"), "{what}");
            assert!(*waited >= TIMEOUT);
        }
        other => panic!("{other:?}"),
    });
    assert!(took >= TIMEOUT, "{took:?}");
}

#[test]
fn a_wrong_received_length_is_a_short_transfer() {
    let (_dir, emu, board) = setup();
    fault_case(
        &board,
        &emu,
        InjectedFault::WrongLength { received: 1000 },
        |f| {
            assert_eq!(
                *f,
                FpgaFault::ShortTransfer {
                    expected: 2048,
                    received: 1000
                }
            )
        },
    );
}

#[test]
fn a_zip_fault_keeps_the_output_and_the_next_zip_works() {
    let (_dir, emu, board) = setup();
    let z = acc(&board, "zip1");
    let n = 64;
    let (a_off, b_off, out) = (0x4_0000, 0x4_0000 + 8 * n, 0x5_0000);
    let ones = vec![Complex32::new(1.0, 2.0); n];
    z.memory().write_complex(a_off, &ones).unwrap();
    z.memory().write_complex(b_off, &ones).unwrap();
    fill_sentinel(z, out, 8 * n);
    emu.inject(
        "zip1",
        InjectedFault::DmaError {
            channel: Channel::S2mm,
            bit: DmaErrorBit::Slave,
        },
    )
    .unwrap();
    let e = z.zip(ZipOp::Add, n, a_off, b_off, out).unwrap_err();
    assert!(matches!(
        e.fpga_fault(),
        Some((
            _,
            FpgaFault::DmaError {
                channel: Channel::S2mm,
                bit: DmaErrorBit::Slave,
                ..
            }
        ))
    ));
    assert_eq!(sentinel_words(z, out, 8 * n), 2 * n);
    z.zip(ZipOp::Add, n, a_off, b_off, out).unwrap();
    let mut y = vec![Complex32::new(0.0, 0.0); n];
    z.memory().read_complex(out, &mut y).unwrap();
    assert!(y.iter().all(|c| *c == Complex32::new(2.0, 4.0)));
}

#[test]
fn requests_over_the_limits_are_refused_before_any_register_write() {
    let (dir, emu, board) = setup();
    let pages = || {
        ["fft0", "zip0"]
            .iter()
            .flat_map(|a| {
                ["ctrl", "dma"].map(|k| fs::read(dir.path().join(format!("regs/{a}.{k}"))).unwrap())
            })
            .collect::<Vec<_>>()
    };
    let before = pages();
    let f = acc(&board, "fft0");
    let z = acc(&board, "zip0");
    let unsupported = |r: Result<(), BackendError>| match r {
        Err(BackendError::Unsupported { .. }) => {}
        other => panic!("expected Unsupported, got {other:?}"),
    };
    let rejected = |r: Result<(), BackendError>| match r {
        Err(BackendError::Fpga { fault, .. }) if matches!(*fault, FpgaFault::Rejected(_)) => {}
        other => panic!("expected a refusal, got {other:?}"),
    };
    unsupported(f.fft(FftDirection::Forward, 4096, 1, 0, 0x10000));
    unsupported(f.fft(FftDirection::Forward, 4, 1, 0, 0x10000));
    unsupported(f.fft(FftDirection::Inverse, 100, 1, 0, 0x10000));
    unsupported(f.zip(ZipOp::Add, 16, 0, 128, 0x10000));
    rejected(f.fft(FftDirection::Forward, 256, 0, 0, 0x10000));
    rejected(f.fft(FftDirection::Forward, 256, 1, 4, 0x10000));
    rejected(f.fft(FftDirection::Forward, 256, 1, 0, 0x400)); // overlaps the input
    rejected(f.fft(FftDirection::Forward, 2048, 1 << 20, 0, 0)); // past the buffer
    let staging = z.staging().unwrap();
    rejected(f.fft(FftDirection::Forward, 256, 1, 0, staging.start));
    // CEDR's core holds 4,096 floats per input: 2,048 complex elements.
    unsupported(z.zip(ZipOp::Mul, 2049, 0, 0x10000, 0x20000));
    unsupported(z.zip(ZipOp::Div, 16, 0, 128, 0x20000));
    unsupported(z.zip(ZipOp::MulConj, 16, 0, 128, 0x20000));
    unsupported(z.zip(ZipOp::Add, 0, 0, 128, 0x20000));
    unsupported(z.fft(FftDirection::Forward, 256, 1, 0, 0x10000));
    rejected(z.zip(ZipOp::Add, 16, 0, 128, 0x20004));
    emu.settle();
    assert_eq!(pages(), before, "no register was written");
    assert_eq!(emu.transfers("fft0").unwrap(), 0);
    assert_eq!(emu.transfers("zip0").unwrap(), 0);
    assert!(
        f.dma().is_ready() && z.dma().is_ready(),
        "a refusal is no fault: no reset is due"
    );
    assert_eq!(emu.violations(), vec![]);
    assert_eq!(f.check_fft(2048).ok(), Some(()));
    assert_eq!(z.check_zip(ZipOp::Mul, 2048).ok(), Some(()));
    assert!(z.check_zip(ZipOp::Mul, 2049).is_err());
}

#[test]
fn a_length_written_while_halted_or_zero_does_nothing() {
    let (_dir, emu, board) = setup();
    let z = acc(&board, "zip0");
    let (dma, regs) = (z.dma(), z.dma().regs());
    let phys = z.memory().phys_addr();
    let n = 16;
    let (input, out) = (0x1000u64, 0x8000usize);
    z.memory().write_f32(input as usize, &[1.0; 64]).unwrap();
    fill_sentinel(z, out, 8 * n);
    z.control().write32(ZIP_SIZE_REG, 32).unwrap();
    z.control().write32(ZIP_OP_REG, 0).unwrap();

    dma.reset().unwrap();
    regs.write32(S2MM_DA, (phys + out as u64) as u32).unwrap();
    regs.write32(S2MM_LENGTH, 128).unwrap();
    regs.write32(MM2S_SA, (phys + input) as u32).unwrap();
    regs.write32(MM2S_LENGTH, 256).unwrap();
    emu.settle();
    assert_eq!(
        emu.transfers("zip0").unwrap(),
        0,
        "halted: LENGTH does nothing"
    );
    assert_eq!(regs.read32(MM2S_DMASR).unwrap(), DMASR_HALTED);
    assert_eq!(regs.read32(S2MM_DMASR).unwrap(), DMASR_HALTED);

    // Starting afterwards does not replay the ignored writes.
    dma.start().unwrap();
    emu.settle();
    assert_eq!(emu.transfers("zip0").unwrap(), 0);

    // A zero length does nothing either.
    regs.write32(MM2S_LENGTH, 0).unwrap();
    emu.settle();
    assert_eq!(emu.transfers("zip0").unwrap(), 0);
    assert_eq!(sentinel_words(z, out, 8 * n), 2 * n);

    // While a real transfer goes through (with the cache maintenance a driver owes).
    z.memory().sync_for_device(input as usize, 256).unwrap();
    z.memory().sync_for_device(out, 128).unwrap();
    dma.transfer(phys + input, 256, phys + out as u64, 128)
        .unwrap();
    z.memory().sync_for_cpu(out, 128).unwrap();
    assert_eq!(emu.transfers("zip0").unwrap(), 1);
    let mut y = [0.0f32; 32];
    z.memory().read_f32(out, &mut y).unwrap();
    assert_eq!(y, [2.0; 32]);
    // Each ignored write is a protocol violation the emulator recorded.
    let rules: Vec<Rule> = emu.violations().iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        [
            Rule::LengthWhileHalted,
            Rule::LengthWhileHalted,
            Rule::ZeroLength
        ]
    );
}

#[test]
fn bad_addresses_and_small_buffers_raise_the_errors_hardware_would() {
    let (_dir, _emu, board) = setup();
    let f = acc(&board, "fft0");
    let phys = f.memory().phys_addr();
    f.fft_ip().unwrap().write_config(0x108).unwrap(); // 256-point forward
                                                      // A source outside every u-dma-buf decodes to nothing.
    match f.dma().transfer(0x1000_0000, 2048, phys, 2048) {
        Err(e)
            if matches!(
                e.fpga_fault(),
                Some((
                    _,
                    FpgaFault::DmaError {
                        channel: Channel::Mm2s,
                        bit: DmaErrorBit::Decode,
                        ..
                    }
                ))
            ) => {}
        other => panic!("{other:?}"),
    }
    // A 2 KiB frame does not fit a 1 KiB S2MM buffer.
    match f.dma().transfer(phys, 2048, phys + 0x1_0000, 1024) {
        Err(e)
            if matches!(
                e.fpga_fault(),
                Some((
                    _,
                    FpgaFault::DmaError {
                        channel: Channel::S2mm,
                        bit: DmaErrorBit::Internal,
                        ..
                    }
                ))
            ) => {}
        other => panic!("{other:?}"),
    }
    // And the engine comes back.
    f.dma().transfer(phys, 2048, phys + 0x1_0000, 2048).unwrap();
}

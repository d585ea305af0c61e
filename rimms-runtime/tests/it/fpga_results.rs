//! What the emulated cores compute, through the real drivers and the board facade, against
//! independent references: a direct DFT in f64 for the FFT (forward, and inverse scaled by 1/N),
//! explicit formulas for every ZIP operation. Also: the cache maintenance for exactly the ranges
//! that change hands, both ZIP input paths (adjacent and staged), batched FFTs, the old sysfs
//! class path and the attribute sync method end to end, and four instances at once.

use std::thread;

use crate::reference::{assert_close, dft};
use rimms_runtime::backend::fpga::{
    Accelerator, Emulator, EmulatorLayout, FpgaBoard, SyncDirection, SyncFor, SyncMethod,
    SyncRecord, ZipCoreOp,
};
use rimms_runtime::{Complex32, FftDirection, ZipOp};

/// A small deterministic generator (xorshift64*), values in [-1, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((v >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn complex(&mut self, n: usize) -> Vec<Complex32> {
        (0..n)
            .map(|_| Complex32::new(self.next(), self.next()))
            .collect()
    }
}

fn setup(layout: EmulatorLayout) -> (tempfile::TempDir, Emulator, FpgaBoard) {
    let dir = tempfile::tempdir().unwrap();
    let emu = Emulator::start(dir.path(), &layout).unwrap();
    let board = FpgaBoard::open(emu.config()).unwrap();
    (dir, emu, board)
}

fn read(a: &Accelerator, off: usize, n: usize) -> Vec<Complex32> {
    let mut y = vec![Complex32::new(0.0, 0.0); n];
    a.memory().read_complex(off, &mut y).unwrap();
    y
}

fn check_fft(a: &Accelerator, rng: &mut Rng, n: usize, input: usize, output: usize) {
    let x = rng.complex(n);
    a.memory().write_complex(input, &x).unwrap();
    a.fft(FftDirection::Forward, n, 1, input, output).unwrap();
    let y = read(a, output, n);
    let passes = n.trailing_zeros();
    assert_close(&y, &dft(&x, false), passes, &format!("forward {n}"));
    // Inverse of the original data, in place, scaled by 1/N by the driver.
    a.memory().write_complex(input, &x).unwrap();
    a.fft(FftDirection::Inverse, n, 1, input, input).unwrap();
    let z = read(a, input, n);
    assert_close(&z, &dft(&x, true), passes, &format!("inverse {n}"));
}

#[test]
fn fft_matches_a_direct_dft_at_every_size() {
    let (_dir, emu, board) = setup(EmulatorLayout::zcu102_like());
    let a = board.accelerator("fft0").unwrap();
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for n in [8, 16, 64, 256, 1024, 2048] {
        check_fft(a, &mut rng, n, 0x0, 0x10000);
    }
    assert_eq!(emu.completions("fft0").unwrap(), 12);
}

#[test]
fn batched_fft_transforms_every_row() {
    let (_dir, _emu, board) = setup(EmulatorLayout::zcu102_like());
    let a = board.accelerator("fft1").unwrap();
    let (n, rows) = (64, 5);
    let mut rng = Rng(99);
    let x = rng.complex(n * rows);
    a.memory().write_complex(0x2000, &x).unwrap();
    a.fft(FftDirection::Inverse, n, rows, 0x2000, 0x2000)
        .unwrap();
    let y = read(a, 0x2000, n * rows);
    for r in 0..rows {
        let want = dft(&x[r * n..(r + 1) * n], true);
        let row = &y[r * n..(r + 1) * n];
        assert_close(row, &want, n.trailing_zeros(), &format!("row {r}"));
    }
}

fn complex_ref(op: ZipOp, a: Complex32, b: Complex32) -> (f64, f64) {
    let (ar, ai, br, bi) = (
        f64::from(a.re),
        f64::from(a.im),
        f64::from(b.re),
        f64::from(b.im),
    );
    match op {
        ZipOp::Add => (ar + br, ai + bi),
        ZipOp::Sub => (ar - br, ai - bi),
        ZipOp::Mul => (ar * br - ai * bi, ar * bi + ai * br),
        other => panic!("no reference for {other:?}"),
    }
}

/// The `sync_for_device` requests logged so far, as sorted (offset, size) pairs.
fn device_syncs(emu: &Emulator) -> Vec<(u64, u64)> {
    let mut v: Vec<_> = emu
        .sync_log()
        .into_iter()
        .filter(|r| r.which == SyncFor::Device)
        .map(|r| (r.offset, r.size))
        .collect();
    v.sort();
    v
}

/// The log, sorted: the set of requests a call made (their order is fixed by the code; the
/// emulator's log interleaves its two FIFOs only approximately).
fn sorted_log(emu: &Emulator) -> Vec<SyncRecord> {
    sorted(emu.sync_log())
}

fn sorted(mut v: Vec<SyncRecord>) -> Vec<SyncRecord> {
    v.sort();
    v
}

#[test]
fn complex_zip_matches_the_formulas_on_both_input_paths() {
    let (_dir, emu, board) = setup(EmulatorLayout::zcu102_like());
    let z = board.accelerator("zip0").unwrap();
    let mut rng = Rng(7);
    for (op, n) in [(ZipOp::Add, 1000), (ZipOp::Sub, 8), (ZipOp::Mul, 2048)] {
        let (xa, xb) = (rng.complex(n), rng.complex(n));
        let want: Vec<(f64, f64)> = xa
            .iter()
            .zip(&xb)
            .map(|(a, b)| complex_ref(op, *a, *b))
            .collect();
        let bytes = 8 * n;
        // Adjacent inputs: the DMA reads them in place.
        let (a_off, b_off, out) = (0x10000, 0x10000 + bytes, 0x80000);
        z.memory().write_complex(a_off, &xa).unwrap();
        z.memory().write_complex(b_off, &xb).unwrap();
        emu.clear_sync_log();
        z.zip(op, n, a_off, b_off, out).unwrap();
        let got = read(z, out, n);
        assert_close(&got, &want, 1, &format!("{op:?} {n} adjacent"));
        let log = device_syncs(&emu);
        assert_eq!(
            log[0],
            (a_off as u64, 2 * bytes as u64),
            "{op:?}: inputs synced in place"
        );

        // Inputs apart: staged through the driver's area.
        let (a_off, b_off, out) = (0x100000, 0x180000, 0x0);
        z.memory().write_complex(a_off, &xa).unwrap();
        z.memory().write_complex(b_off, &xb).unwrap();
        emu.clear_sync_log();
        z.zip(op, n, a_off, b_off, out).unwrap();
        let got = read(z, out, n);
        assert_close(&got, &want, 1, &format!("{op:?} {n} staged"));
        let log = device_syncs(&emu);
        let staging = z.staging().unwrap().start as u64;
        assert_eq!(log[1], (staging, 2 * bytes as u64), "{op:?}: staged");
        assert_eq!(log[0], (out as u64, bytes as u64), "{op:?}: and the output");
    }
}

#[test]
fn float_zip_ops_match_the_formulas() {
    let (_dir, _emu, board) = setup(EmulatorLayout::zcu102_like());
    let z = board.accelerator("zip1").unwrap();
    let mut rng = Rng(3);
    let n = 999; // odd: b is only 4-byte aligned when adjacent, and staging handles it
    let xa: Vec<f32> = (0..n).map(|_| rng.next()).collect();
    let xb: Vec<f32> = (0..n).map(|_| rng.next() + 2.0).collect(); // no division by ~0
    z.memory().write_f32(0x1000, &xa).unwrap();
    z.memory().write_f32(0x1000 + 4 * n, &xb).unwrap();
    for op in [
        ZipCoreOp::Add,
        ZipCoreOp::Sub,
        ZipCoreOp::Mul,
        ZipCoreOp::Div,
    ] {
        z.zip_f32(op, n, 0x1000, 0x1000 + 4 * n, 0x9000).unwrap();
        let mut y = vec![0.0f32; n];
        z.memory().read_f32(0x9000, &mut y).unwrap();
        for i in 0..n {
            let (a, b) = (f64::from(xa[i]), f64::from(xb[i]));
            let want = match op {
                ZipCoreOp::Add => a + b,
                ZipCoreOp::Sub => a - b,
                ZipCoreOp::Mul => a * b,
                ZipCoreOp::Div => a / b,
                ZipCoreOp::ComplexMul => unreachable!(),
            };
            assert!(
                (f64::from(y[i]) - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{op:?}[{i}]: {} vs {want}",
                y[i]
            );
        }
    }
}

fn rec(which: SyncFor, offset: usize, size: usize, dir: SyncDirection) -> SyncRecord {
    SyncRecord {
        memory: "udmabuf0".to_owned(),
        which,
        offset: offset as u64,
        size: size as u64,
        direction: Some(dir),
        packed: true,
    }
}

#[test]
fn cache_maintenance_covers_exactly_the_ranges_that_change_hands() {
    let (_dir, emu, board) = setup(EmulatorLayout::zcu102_like());
    let f = board.accelerator("fft0").unwrap();
    let z = board.accelerator("zip0").unwrap();
    emu.clear_sync_log();

    f.fft(FftDirection::Forward, 256, 1, 0x0, 0x4000).unwrap();
    assert_eq!(
        sorted_log(&emu),
        sorted(vec![
            rec(SyncFor::Device, 0x0, 2048, SyncDirection::ToDevice),
            rec(SyncFor::Device, 0x4000, 2048, SyncDirection::ToDevice),
            rec(SyncFor::Cpu, 0x4000, 2048, SyncDirection::FromDevice),
        ])
    );
    emu.clear_sync_log();
    // In place, batched: one range each way.
    f.fft(FftDirection::Inverse, 128, 3, 0x8000, 0x8000)
        .unwrap();
    assert_eq!(
        sorted_log(&emu),
        sorted(vec![
            rec(SyncFor::Device, 0x8000, 3 * 1024, SyncDirection::ToDevice),
            rec(SyncFor::Cpu, 0x8000, 3 * 1024, SyncDirection::FromDevice),
        ])
    );
    emu.clear_sync_log();
    // ZIP with adjacent inputs, output written over input a: the input sync covers it.
    z.zip(ZipOp::Mul, 64, 0x20000, 0x20200, 0x20000).unwrap();
    assert_eq!(
        sorted_log(&emu),
        sorted(vec![
            rec(SyncFor::Device, 0x20000, 1024, SyncDirection::ToDevice),
            rec(SyncFor::Cpu, 0x20000, 512, SyncDirection::FromDevice),
        ])
    );
    // A refused call syncs nothing.
    emu.clear_sync_log();
    assert!(z.zip(ZipOp::Div, 64, 0x20000, 0x20200, 0x30000).is_err());
    assert_eq!(emu.sync_log(), []);
}

#[test]
fn the_old_class_path_and_the_attribute_method_work_end_to_end() {
    let mut layout = EmulatorLayout::zcu102_like();
    layout.udmabufs[0].old_class_path = true;
    layout.udmabufs[0].sync = SyncMethod::Attributes;
    let (dir, emu, board) = setup(layout);
    let mem = &board.memories()[0];
    assert!(mem.class_dir().ends_with("class/udmabuf/udmabuf0"));
    let f = board.accelerator("fft1").unwrap();
    let mut rng = Rng(11);
    check_fft(f, &mut rng, 512, 0x0, 0x10000);
    let log = emu.sync_log();
    // Forward: two device syncs and one CPU sync; inverse in place: one of each.
    assert_eq!(log.len(), 5, "{log:?}");
    assert!(log.iter().all(|r| !r.packed));
    assert_eq!(log.iter().filter(|r| r.which == SyncFor::Cpu).count(), 2);
    // The attribute files hold the last request: the CPU sync of the in-place inverse.
    let class = dir.path().join("sys/class/udmabuf/udmabuf0");
    let attr = |a: &str| std::fs::read_to_string(class.join(a)).unwrap();
    assert_eq!(attr("sync_offset"), "0\n");
    assert_eq!(attr("sync_size"), "4096\n");
    assert_eq!(attr("sync_direction"), "2\n");
}

#[test]
fn four_instances_run_at_once_on_one_buffer() {
    let (_dir, emu, board) = setup(EmulatorLayout::zcu102_like());
    let rounds = 10;
    thread::scope(|s| {
        for (k, name) in ["fft0", "fft1", "zip0", "zip1"].into_iter().enumerate() {
            let a = board.accelerator(name).unwrap();
            s.spawn(move || {
                let base = k * 0x40000;
                let mut rng = Rng(1000 + k as u64);
                for _ in 0..rounds {
                    if name.starts_with("fft") {
                        let x = rng.complex(256);
                        a.memory().write_complex(base, &x).unwrap();
                        a.fft(FftDirection::Forward, 256, 1, base, base + 0x10000)
                            .unwrap();
                        let got = read(a, base + 0x10000, 256);
                        assert_close(&got, &dft(&x, false), 8, name);
                    } else {
                        let (xa, xb) = (rng.complex(512), rng.complex(512));
                        a.memory().write_complex(base, &xa).unwrap();
                        a.memory().write_complex(base + 0x1000, &xb).unwrap();
                        a.zip(ZipOp::Mul, 512, base, base + 0x1000, base + 0x10000)
                            .unwrap();
                        let want: Vec<_> = xa
                            .iter()
                            .zip(&xb)
                            .map(|(p, q)| complex_ref(ZipOp::Mul, *p, *q))
                            .collect();
                        let got = read(a, base + 0x10000, 512);
                        assert_close(&got, &want, 1, name);
                    }
                }
            });
        }
    });
    for name in ["fft0", "fft1", "zip0", "zip1"] {
        assert_eq!(emu.completions(name).unwrap(), rounds);
    }
}

//! FZF on the FPGA emulator, the paper's two CPU+FPGA cases, three ways in one run:
//! `baseline` (CEDR: every call stages its arguments through the accelerator's memory),
//! `rimms` (tracked), and `native` (hand-written against the board driver with the fewest
//! transfers). Prints median frame times and ratios.
//!
//! `cargo run --release --example fpga_fzf [frames]`

use rimms::drivers::fpga::{Emulator, FpgaBoard};
use rimms::{Complex32, Device, ExecMode, FftDirection, FpgaSource, HeteData, Runtime, ZipOp};
use std::time::{Duration, Instant};

const N: usize = 2048;
const ROWS: usize = 16;
const LEN: usize = N * ROWS;
const FFT: Device = Device::Fpga(0);
const IFFT: Device = Device::Fpga(1);
const ZIP: Device = Device::Fpga(2);

fn input(frame: usize) -> Vec<Complex32> {
    (0..LEN)
        .map(|i| Complex32::new(((i * 7 + frame) % 31) as f32 - 15.0, (i % 5) as f32))
        .collect()
}

fn filter() -> Vec<Complex32> {
    (0..LEN)
        .map(|i| Complex32::new(1.0 / (1 + i % N) as f32, 0.0))
        .collect()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The runtime version: the same code in baseline and tracked mode. `zip_on` is an FPGA ZIP
/// core or the CPU; either takes the whole product in one call. (CEDR's core holds 4,096 floats
/// per input, 2,048 complex elements, but the runtime's FPGA kernel cuts a longer ZIP into
/// pieces the core takes, so nothing here is per row; `rimms devices` shows the limits.)
fn with_runtime(
    mode: ExecMode,
    zip_on: Device,
    frames: usize,
) -> rimms::Result<(Duration, f32, u64)> {
    let rt = Runtime::builder()
        .fpga(FpgaSource::Emulated(FpgaSource::default_layout()))
        .mode(mode)
        .build()?;
    let h = HeteData::from_slice(&rt, &filter())?;
    let mut x = HeteData::alloc(&rt, LEN)?;
    let (mut spectrum, mut product, mut y) = (
        HeteData::alloc(&rt, LEN)?,
        HeteData::alloc(&rt, LEN)?,
        HeteData::alloc(&rt, LEN)?,
    );
    // Frames and the CPU's product are written where the accelerators read them.
    x.place(FFT)?;
    product.place(IFFT)?;
    let mut times = Vec::new();
    let mut peak = 0.0;
    for frame in 0..frames + 1 {
        let data = input(frame);
        let start = Instant::now();
        x.host_write()?.copy_from_slice(&data);
        rt.fft(FFT, FftDirection::Forward, N, &x, &mut spectrum)?;
        rt.zip(zip_on, ZipOp::Mul, &spectrum, &h, &mut product)?;
        rt.fft(IFFT, FftDirection::Inverse, N, &product, &mut y)?;
        peak = y.host()?.iter().map(|v| v.norm()).fold(0.0, f32::max);
        if frame > 0 {
            times.push(start.elapsed()); // frame 0 warms plans and pools up
        }
    }
    Ok((median(times), peak, rt.stats().total_bytes()))
}

/// Hand-written: buffers at fixed offsets in the u-dma-buf, the input copied in, the result
/// read where the accelerator wrote it; with a CPU ZIP the product is written straight into
/// the u-dma-buf.
fn native(zip_on_cpu: bool, frames: usize) -> rimms::Result<(Duration, f32, u64)> {
    let dir = tempfile::tempdir().map_err(|e| rimms::Error::Config(e.to_string()))?;
    let emulator = Emulator::start(dir.path(), &FpgaSource::default_layout())?;
    let board = FpgaBoard::open(emulator.config())?;
    let acc = board.accelerators();
    let (fft, ifft, zip) = (&acc[0], &acc[1], &acc[2]);
    let mem = fft.memory();
    let bytes = LEN * 8;
    let (x, h, s, p, y) = (0, bytes, 2 * bytes, 3 * bytes, 4 * bytes);
    mem.write_complex(h, &filter())?;
    let (mut times, mut peak, mut moved) = (Vec::new(), 0.0, bytes as u64);
    let (mut spectrum, mut hv, mut out) = (
        vec![Complex32::default(); LEN],
        filter(),
        vec![Complex32::default(); LEN],
    );
    for frame in 0..frames + 1 {
        let data = input(frame);
        let start = Instant::now();
        mem.write_complex(x, &data)?;
        fft.fft(FftDirection::Forward, N, ROWS, x, s)?;
        if zip_on_cpu {
            mem.sync_for_cpu(s, bytes)?;
            mem.read_complex(s, &mut spectrum)?;
            mem.read_complex(h, &mut hv)?;
            let prod: Vec<Complex32> = spectrum.iter().zip(&hv).map(|(a, b)| a * b).collect();
            mem.write_complex(p, &prod)?;
        } else {
            for r in 0..ROWS {
                let off = r * N * 8;
                zip.zip(ZipOp::Mul, N, s + off, h + off, p + off)?;
            }
        }
        ifft.fft(FftDirection::Inverse, N, ROWS, p, y)?;
        mem.read_complex(y, &mut out)?;
        peak = out.iter().map(|v| v.norm()).fold(0.0, f32::max);
        if frame > 0 {
            times.push(start.elapsed());
            moved += bytes as u64;
        }
    }
    drop(board);
    emulator.stop();
    Ok((median(times), peak, moved))
}

fn main() -> rimms::Result<()> {
    let frames: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    println!(
        "FZF, {N} points x {ROWS} rows, {frames} frames on the FPGA emulator (median frame)\n"
    );
    println!(
        "{:<22} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "case", "baseline ms", "rimms ms", "native ms", "base/rimms", "rimms/native"
    );
    for (name, zip_on) in [
        ("FFT+ZIP+IFFT on FPGA", ZIP),
        ("FFT on FPGA, ZIP on CPU", Device::Cpu),
    ] {
        let (b, pb, _) = with_runtime(ExecMode::Baseline, zip_on, frames)?;
        let (r, pr, _) = with_runtime(ExecMode::Tracked, zip_on, frames)?;
        let (n, pn, _) = native(zip_on == Device::Cpu, frames)?;
        assert!(
            (pb - pr).abs() <= 1e-3 * pr.abs() && (pn - pr).abs() <= 1e-3 * pr.abs(),
            "results differ: {pb} {pr} {pn}"
        );
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{:<22} {:>12.3} {:>12.3} {:>12.3} {:>9.2}x {:>9.2}x",
            name,
            ms(b),
            ms(r),
            ms(n),
            b.as_secs_f64() / r.as_secs_f64(),
            r.as_secs_f64() / n.as_secs_f64()
        );
    }
    Ok(())
}

//! The radar built-ins (`power`, `window`, `zip_rows`) on the CPU, a sim device on its own
//! memory and one with device-only memory, against plain loops in f64; their shape checks;
//! and the bytes they move.

use crate::common::signal;
use rimms::{Complex32, Device, Error, HeteData, Runtime, SimConfig, ZipOp};

const ROWS: usize = 37;
const COLS: usize = 64;

/// The CPU, sim0 on its own host-addressable memory, sim1 with device-only memory.
fn runtime() -> Runtime {
    let device_only = SimConfig {
        device_memory: true,
        ..SimConfig::default()
    };
    Runtime::builder()
        .sim(SimConfig::default())
        .sim(device_only)
        .build()
        .expect("runtime")
}

const DEVICES: [Device; 3] = [Device::Cpu, Device::Sim(0), Device::Sim(1)];

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-5 * want.abs().max(1.0)
}

#[test]
fn power_is_the_squared_modulus() {
    let rt = runtime();
    let x = signal(ROWS * COLS, 3);
    let input = HeteData::from_slice(&rt, &x).expect("x");
    for device in DEVICES {
        let mut out = HeteData::<f32>::alloc(&rt, x.len()).expect("out");
        rt.power(device, &input, &mut out).expect("power");
        let out = out.host().expect("host");
        for (i, (o, z)) in out.iter().zip(&x).enumerate() {
            let want = (z.re as f64).powi(2) + (z.im as f64).powi(2);
            assert!(close(*o as f64, want), "{device}: [{i}] {o} vs {want}");
        }
    }
}

#[test]
fn window_tapers_every_row_and_scales_per_element() {
    let rt = runtime();
    let x = signal(ROWS * COLS, 4);
    let input = HeteData::from_slice(&rt, &x).expect("x");
    // A Hann window over a row, and a per-element scale as long as the whole input.
    let hann: Vec<f32> = (0..COLS)
        .map(|j| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * j as f32 / COLS as f32).cos())
        .collect();
    let per_element: Vec<f32> = (0..x.len()).map(|i| (i % 7) as f32 - 3.0).collect();
    for window in [hann, per_element] {
        let w = HeteData::from_slice(&rt, &window).expect("w");
        for device in DEVICES {
            let mut out = HeteData::<Complex32>::alloc(&rt, x.len()).expect("out");
            rt.window(device, &input, &w, &mut out).expect("window");
            let out = out.host().expect("host");
            for i in 0..x.len() {
                let f = window[i % window.len()] as f64;
                let (re, im) = (x[i].re as f64 * f, x[i].im as f64 * f);
                assert!(
                    close(out[i].re as f64, re) && close(out[i].im as f64, im),
                    "{device}: [{i}]"
                );
            }
        }
    }
}

#[test]
fn zip_rows_applies_one_row_to_every_row_for_every_op() {
    let rt = runtime();
    let a = signal(ROWS * COLS, 5);
    let row = signal(COLS, 6);
    let (ha, hrow) = (
        HeteData::from_slice(&rt, &a).expect("a"),
        HeteData::from_slice(&rt, &row).expect("row"),
    );
    for device in DEVICES {
        for op in ZipOp::ALL {
            let mut out = HeteData::<Complex32>::alloc(&rt, a.len()).expect("out");
            rt.zip_rows(device, op, &ha, &hrow, &mut out)
                .expect("zip_rows");
            let out = out.host().expect("host");
            for r in 0..ROWS {
                for j in 0..COLS {
                    let (x, y) = (a[r * COLS + j], row[j]);
                    let (xr, xi, yr, yi) = (x.re as f64, x.im as f64, y.re as f64, y.im as f64);
                    let want = match op {
                        ZipOp::Add => (xr + yr, xi + yi),
                        ZipOp::Sub => (xr - yr, xi - yi),
                        ZipOp::Mul => (xr * yr - xi * yi, xr * yi + xi * yr),
                        ZipOp::MulConj => (xr * yr + xi * yi, xi * yr - xr * yi),
                        ZipOp::Div => {
                            let d = yr * yr + yi * yi;
                            ((xr * yr + xi * yi) / d, (xi * yr - xr * yi) / d)
                        }
                    };
                    let got = out[r * COLS + j];
                    let tol = 1e-4 * (want.0.abs() + want.1.abs()).max(1.0);
                    assert!(
                        (got.re as f64 - want.0).abs() <= tol
                            && (got.im as f64 - want.1).abs() <= tol,
                        "{device} {op:?} row {r} col {j}: {got} vs {want:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_row_that_does_not_tile_the_matrix_is_refused_before_anything_moves() {
    let rt = runtime();
    let a = HeteData::from_slice(&rt, &signal(ROWS * COLS, 7)).expect("a");
    let row = HeteData::from_slice(&rt, &signal(COLS - 1, 8)).expect("row");
    let mut out = HeteData::<Complex32>::alloc(&rt, ROWS * COLS).expect("out");
    let err = rt
        .zip_rows(Device::Sim(0), ZipOp::Mul, &a, &row, &mut out)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Shape {
                api: "zip_rows",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("63"), "{err}");
    let w = HeteData::<f32>::alloc(&rt, COLS + 1).expect("w");
    let err = rt.window(Device::Sim(0), &a, &w, &mut out).unwrap_err();
    assert!(matches!(err, Error::Shape { api: "window", .. }), "{err}");
    assert_eq!(rt.stats().total_bytes(), 0, "nothing moved");
}

/// A broadcast ZIP moves the matrix and the one row once: no per-row calls, no copies of the
/// row per row.
#[test]
fn zip_rows_moves_the_row_once() {
    let rt = runtime();
    let a = HeteData::from_slice(&rt, &signal(ROWS * COLS, 9)).expect("a");
    let row = HeteData::from_slice(&rt, &signal(COLS, 10)).expect("row");
    let mut out = HeteData::<Complex32>::alloc(&rt, ROWS * COLS).expect("out");
    rt.zip_rows(Device::Sim(0), ZipOp::MulConj, &a, &row, &mut out)
        .expect("zip_rows");
    out.host().expect("back");
    let s = rt.stats();
    let element = 8u64;
    assert_eq!(
        s.bytes("host", "sim0").unwrap(),
        element * (ROWS * COLS + COLS) as u64
    );
    assert_eq!(
        s.bytes("sim0", "host").unwrap(),
        element * (ROWS * COLS) as u64
    );
    assert_eq!(s.total_bytes(), element * (2 * ROWS * COLS + COLS) as u64);
    assert_eq!(s.api("zip_rows").unwrap().calls, 1);
}

//! `Runtime::capabilities` against what calls do: every API a device reports runs on it, every
//! built-in it does not report is refused; every FFT size it reports transforms and the next
//! size up does not; every ZIP operation it reports runs (at its limit, where it has one) and
//! every one it refuses is refused by the call, with the two-call equivalent in the error.

use rimms::{
    Capabilities, Complex32, Device, Error, FftDirection, FpgaSource, HeteData, Runtime, SimConfig,
    ZipOp, ZipSupport,
};

fn runtime() -> Runtime {
    Runtime::builder()
        .sim(SimConfig {
            max_fft_points: Some(1024),
            ..SimConfig::default()
        })
        .sim(SimConfig {
            device_memory: true,
            ..SimConfig::default()
        })
        .fpga(FpgaSource::Emulated(FpgaSource::default_layout()))
        .build()
        .expect("runtime")
}

fn c(len: usize) -> Vec<Complex32> {
    (0..len)
        .map(|i| Complex32::new(1.0 + (i % 5) as f32, (i % 3) as f32))
        .collect()
}

/// Calls the built-in `api` on `device` with small valid arguments.
fn call(rt: &Runtime, device: Device, api: &str) -> Option<rimms::Result<()>> {
    let n = 64;
    let x = HeteData::from_slice(rt, &c(n)).expect("x");
    let y = HeteData::from_slice(rt, &c(n)).expect("y");
    let mut out = HeteData::<Complex32>::alloc(rt, n).expect("out");
    let mut real = HeteData::<f32>::alloc(rt, n).expect("real");
    let w = HeteData::from_slice(rt, &[0.5f32; 8]).expect("w");
    let row = HeteData::from_slice(rt, &c(8)).expect("row");
    let mut data = HeteData::from_slice(rt, &c(n)).expect("data");
    Some(match api {
        "fft" => rt.fft(device, FftDirection::Forward, 16, &x, &mut out),
        "fft_in_place" => rt.fft_in_place(device, FftDirection::Forward, 16, &mut data),
        "zip" => rt.zip(device, ZipOp::Add, &x, &y, &mut out),
        "conj" => rt.conj(device, &x, &mut out),
        "magnitude" => rt.magnitude(device, &x, &mut real),
        "power" => rt.power(device, &x, &mut real),
        "window" => rt.window(device, &x, &w, &mut out),
        "zip_rows" => rt.zip_rows(device, ZipOp::Mul, &x, &row, &mut out),
        "fftshift" => rt.fftshift(device, 8, &x, &mut out),
        "transpose" => rt.transpose(device, 8, 8, &x, &mut out),
        "scale" => rt.scale(device, Complex32::new(2.0, 0.0), &mut data),
        "gemm" => rt.gemm(device, 8, 8, 8, &x, &y, &mut out),
        _ => return None,
    })
}

const BUILTINS: [&str; 12] = [
    "fft",
    "fft_in_place",
    "zip",
    "conj",
    "magnitude",
    "power",
    "window",
    "zip_rows",
    "fftshift",
    "transpose",
    "scale",
    "gemm",
];

fn caps_of(rt: &Runtime, device: Device) -> Capabilities {
    rt.capabilities()
        .into_iter()
        .find(|c| c.device == device)
        .expect("every device is reported")
}

#[test]
fn every_device_is_reported_with_its_space() {
    let rt = runtime();
    let caps = rt.capabilities();
    let devices: Vec<Device> = caps.iter().map(|c| c.device).collect();
    assert_eq!(devices, rt.devices());
    for c in &caps {
        let space = rt.space_of(c.device).expect("space");
        assert_eq!(c.space, rt.space_name(space), "{}", c.device);
    }
}

#[test]
fn reported_apis_run_and_the_others_are_refused() {
    let rt = runtime();
    for device in rt.devices() {
        let caps = caps_of(&rt, device);
        for api in BUILTINS {
            let result = call(&rt, device, api).expect("a built-in");
            if caps.has(api) {
                result.unwrap_or_else(|e| panic!("{device} reports {api} but: {e}"));
            } else {
                let err = result.expect_err(&format!("{device} does not report {api}, yet it ran"));
                // No implementation for its kind, or one its checks refuse (a ZIP on an
                // FPGA's FFT core).
                assert!(
                    matches!(
                        err,
                        Error::NoImplementation { .. } | Error::Unsupported { .. }
                    ),
                    "{device} {api}: {err}"
                );
            }
        }
        // Every built-in is somewhere.
        assert!(caps.apis.iter().all(|a| !a.is_empty()));
    }
    // The CPU runs every built-in.
    let cpu = caps_of(&rt, Device::Cpu);
    assert!(BUILTINS.iter().all(|a| cpu.has(a)), "{:?}", cpu.apis);
}

#[test]
fn reported_fft_sizes_are_exactly_those_a_call_takes() {
    let rt = runtime();
    for device in rt.devices() {
        let caps = caps_of(&rt, device);
        if !caps.has("fft") {
            assert!(caps.fft_points.is_empty());
            continue;
        }
        // Probe calls over the small sizes (a large call would take long for nothing).
        for log2 in 1..=13 {
            let n = 1usize << log2;
            let x = HeteData::from_slice(&rt, &c(n)).expect("x");
            let mut y = HeteData::<Complex32>::alloc(&rt, n).expect("y");
            let ran = rt.fft(device, FftDirection::Forward, n, &x, &mut y);
            assert_eq!(
                ran.is_ok(),
                caps.fft_points.contains(&n),
                "{device}, {n} points: {ran:?}"
            );
        }
    }
    assert_eq!(caps_of(&rt, Device::Sim(0)).fft_points.last(), Some(&1024));
}

#[test]
fn reported_zip_operations_are_exactly_those_a_call_takes() {
    let rt = runtime();
    for device in rt.devices() {
        let caps = caps_of(&rt, device);
        for (op, support) in &caps.zip {
            let len = match support {
                ZipSupport::Yes {
                    max_elements: Some(max),
                } => (*max).min(1 << 16),
                _ => 256,
            };
            let (a, b) = (
                HeteData::from_slice(&rt, &c(len)).expect("a"),
                HeteData::from_slice(&rt, &c(len)).expect("b"),
            );
            let mut out = HeteData::<Complex32>::alloc(&rt, len).expect("out");
            let ran = rt.zip(device, *op, &a, &b, &mut out);
            match support {
                ZipSupport::Yes { .. } => {
                    ran.unwrap_or_else(|e| panic!("{device} reports {op:?}: {e}"))
                }
                ZipSupport::No(why) => {
                    let err = ran.expect_err("refused op ran");
                    assert!(err.to_string().contains(why.as_str()), "{err} / {why}");
                    if *op == ZipOp::MulConj {
                        assert!(err.to_string().contains("ZipOp::Mul"), "{err}");
                    }
                }
            }
        }
    }
}

#[test]
fn the_fpga_reports_fft_and_zip_and_no_mul_conj() {
    let rt = runtime();
    let fft0 = caps_of(&rt, Device::Fpga(0));
    let zip0 = caps_of(&rt, Device::Fpga(2));
    assert!(fft0.has("fft") && !fft0.has("power"), "{fft0}");
    assert!(zip0.has("zip"), "{zip0}");
    let mul_conj = zip0.zip.iter().find(|(op, _)| *op == ZipOp::MulConj);
    assert!(matches!(mul_conj, Some((_, ZipSupport::No(_)))), "{zip0}");
    // The table `rimms devices` prints names the device and its memory.
    assert!(
        zip0.to_string().starts_with("fpga2 (memory: udmabuf0)"),
        "{zip0}"
    );
}

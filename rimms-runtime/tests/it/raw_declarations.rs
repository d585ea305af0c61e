//! The built-in declarations called raw (`rimms_runtime::apis::zip(&rt, …)`), without the shape
//! check of the runtime's methods: lengths a host kernel cannot take are refused by the CPU's
//! and the staged sim's implementations with a shape error naming the API and the device, and
//! the output is left as it was (a debug build's kernel would otherwise trip its assertion, a
//! release build's work on a prefix).

use rimms_runtime::{
    apis, Complex32, Device, Error, FftDirection, HeteData, Runtime, SimConfig, ZipOp,
};

fn runtime() -> Runtime {
    let sim = SimConfig {
        device_memory: true,
        ..SimConfig::default()
    };
    Runtime::builder().sim(sim).build().expect("runtime")
}

fn data(rt: &Runtime, len: usize, value: f32) -> HeteData<Complex32> {
    HeteData::from_slice(rt, &vec![Complex32::new(value, 0.0); len]).expect("data")
}

fn refused(outcome: rimms_runtime::Result<()>, api: &str, device: Device) {
    match outcome {
        Err(Error::Shape {
            api: got,
            device: on,
            ..
        }) => {
            assert_eq!(got, api);
            assert_eq!(on, device.into());
        }
        other => panic!("{api} on {device:?}: want a shape error, got {other:?}"),
    }
}

#[test]
fn lengths_the_kernels_cannot_take_are_refused_on_every_host_kernel_device() {
    let rt = runtime();
    for device in [Device::Cpu, Device::Sim(0)] {
        let (a, b) = (data(&rt, 64, 1.0), data(&rt, 48, 2.0));
        let mut out = data(&rt, 64, 7.0);
        let zip = apis::zip(
            &rt,
            device,
            ZipOp::Add,
            &a.as_slice(),
            &b.as_slice(),
            &mut out.as_slice_mut(),
        );
        refused(zip, "zip", device);
        // 64 elements are not whole rows of 3 points.
        let fft = apis::fft(
            &rt,
            device,
            FftDirection::Forward,
            3,
            &a.as_slice(),
            &mut out.as_slice_mut(),
        );
        refused(fft, "fft", device);
        let mut short = data(&rt, 48, 7.0);
        let conj = apis::conj(&rt, device, &a.as_slice(), &mut short.as_slice_mut());
        refused(conj, "conj", device);
        let transpose = apis::transpose(&rt, device, 5, 4, &a.as_slice(), &mut out.as_slice_mut());
        refused(transpose, "transpose", device);
        // a is 8 × 8 and c 8 × 8, but b has 48 elements, not 8 × 8.
        let gemm = apis::gemm(
            &rt,
            device,
            8,
            8,
            8,
            &a.as_slice(),
            &b.as_slice(),
            &mut out.as_slice_mut(),
        );
        refused(gemm, "gemm", device);
        assert!(out
            .host()
            .expect("out")
            .iter()
            .all(|&v| v == Complex32::new(7.0, 0.0)));
        // The same calls with lengths that fit run.
        apis::zip(
            &rt,
            device,
            ZipOp::Add,
            &a.as_slice(),
            &a.as_slice(),
            &mut out.as_slice_mut(),
        )
        .expect("zip that fits");
        assert!(out
            .host()
            .expect("out")
            .iter()
            .all(|&v| v == Complex32::new(2.0, 0.0)));
    }
}

//! The built-in declarations called raw (`rimms_runtime::apis::zip(&rt, …)`), without the shape
//! check of the runtime's methods: lengths a host kernel cannot take are refused by the CPU's
//! and the staged sim's implementations with a shape error naming the API and the device, and
//! the output is left as it was (a debug build's kernel would otherwise trip its assertion, a
//! release build's work on a prefix). The FPGA's and the GPU's implementations refuse the same
//! lengths: there a misfit would have the DMA (or a kernel) overrun a buffer or fill a prefix.

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

/// The FPGA's cores move as many elements as the input has: a raw FFT into a shorter output,
/// or a ZIP whose inputs are shorter than its output, would have the DMA write past the
/// output or read past an input, into the buffers beside it in the u-dma-buf. Both are
/// refused before a register is written, and the neighbours keep their bytes.
#[cfg(feature = "fpga-emulator")]
#[test]
fn the_fpga_refuses_lengths_its_dma_would_overrun() {
    use rimms_runtime::backend::fpga::Emulator;
    use rimms_runtime::FpgaSource;
    let dir = tempfile::tempdir().expect("dir");
    let emulator = Emulator::start(dir.path(), &FpgaSource::default_layout()).expect("emulator");
    let rt = Runtime::builder()
        .fpga(FpgaSource::Board(emulator.config().clone()))
        .build()
        .expect("runtime");
    // The default layout: two FFT cores, then two ZIP cores.
    let (fft_core, zip_core) = (Device::Fpga(0), Device::Fpga(2));
    let a = data(&rt, 64, 1.0);
    let mut short = data(&rt, 32, 7.0);
    let neighbour = data(&rt, 64, 5.0);
    let fft = apis::fft(
        &rt,
        fft_core,
        FftDirection::Forward,
        32,
        &a.as_slice(),
        &mut short.as_slice_mut(),
    );
    refused(fft, "fft", fft_core);
    // 64 elements are not whole rows of 128 points (a size the core takes).
    let mut whole = data(&rt, 64, 7.0);
    let rows = apis::fft_in_place(
        &rt,
        fft_core,
        FftDirection::Forward,
        128,
        &mut whole.as_slice_mut(),
    );
    refused(rows, "fft_in_place", fft_core);
    let (b, mut out) = (data(&rt, 32, 2.0), data(&rt, 64, 7.0));
    let zip = apis::zip(
        &rt,
        zip_core,
        ZipOp::Add,
        &b.as_slice(),
        &b.as_slice(),
        &mut out.as_slice_mut(),
    );
    refused(zip, "zip", zip_core);
    let untouched = |d: &HeteData<Complex32>, v: f32| {
        d.host()
            .expect("host")
            .iter()
            .all(|&x| x == Complex32::new(v, 0.0))
    };
    assert!(untouched(&short, 7.0) && untouched(&whole, 7.0) && untouched(&out, 7.0));
    assert!(
        untouched(&neighbour, 5.0),
        "a neighbouring buffer was overwritten"
    );
}

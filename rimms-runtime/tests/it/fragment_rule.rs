//! The fragment size from the devices present: what the runtime reports, and what buffers get
//! with `fragments_from_devices(true)`, against the numbers worked out here from the devices'
//! documented grains (the CPU's L2 line read from sysfs by this test itself).

use rimms_runtime::{
    Complex32, Device, FftDirection, HeteData, Runtime, SimConfig, DEFAULT_FRAGMENT_BYTES,
};

/// CPU 0's L2 line as Linux reports it, else the 64 bytes the runtime assumes.
fn l2_line() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/coherency_line_size")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .filter(|n| n.is_power_of_two() && (16..=4096).contains(n))
        .unwrap_or(64)
}

#[test]
fn a_cpu_and_a_sim_call_for_one_l2_line_and_buffers_get_it_when_asked() {
    let line = l2_line();
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .fragments_from_devices(true)
        .build()
        .expect("runtime");
    let rule = rt.fragment_rule();
    assert_eq!(rule.devices().len(), 2);
    assert_eq!(rule.bytes_for(4), line);
    // A warp of 1: the element size matters only past the line.
    assert_eq!(rule.bytes_for(8192), 8192);
    let x = HeteData::<u32>::alloc(&rt, 4096).expect("x");
    assert_eq!(x.fragment_bytes(), line);
    assert_eq!(x.fragment_count(), 4096 * 4 / line);
    // `fragment` still overrides it.
    let mut y = HeteData::<u32>::alloc(&rt, 4096).expect("y");
    y.fragment(8192).expect("override");
    assert_eq!(y.fragment_bytes(), 8192);
    // An FFT over line-sized fragments on the sim device: the impulse's spectrum is all ones.
    let n = 512;
    let mut impulse = vec![Complex32::new(0.0, 0.0); n];
    impulse[0] = Complex32::new(1.0, 0.0);
    let input = HeteData::from_slice(&rt, &impulse).expect("input");
    let mut output = HeteData::<Complex32>::alloc(&rt, n).expect("output");
    assert_eq!(output.fragment_bytes(), line.max(8));
    rt.fft(
        Device::Sim(0),
        FftDirection::Forward,
        n,
        &input,
        &mut output,
    )
    .expect("fft");
    assert!(output
        .host()
        .expect("host")
        .iter()
        .all(|v| (v.re - 1.0).abs() < 1e-5 && v.im.abs() < 1e-5));
}

#[test]
fn without_asking_buffers_keep_4_kib() {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    assert_eq!(
        HeteData::<u32>::alloc(&rt, 4096)
            .expect("x")
            .fragment_bytes(),
        DEFAULT_FRAGMENT_BYTES
    );
}

/// An FPGA board's accelerators move 16-beat bursts of 16 bytes: 256 bytes, more than a
/// line, so the board sets the size for small types.
#[cfg(feature = "fpga-emulator")]
#[test]
fn an_fpga_boards_dma_burst_sets_the_size() {
    use rimms_runtime::backend::fpga::Emulator;
    use rimms_runtime::FpgaSource;
    let dir = tempfile::tempdir().expect("dir");
    let emulator = Emulator::start(dir.path(), &FpgaSource::default_layout()).expect("emulator");
    let rt = Runtime::builder()
        .fpga(FpgaSource::Board(emulator.config().clone()))
        .fragments_from_devices(true)
        .build()
        .expect("runtime");
    let want = l2_line().max(256);
    assert_eq!(rt.fragment_rule().bytes_for(4), want);
    let x = HeteData::<Complex32>::alloc(&rt, 1024).expect("x");
    assert_eq!(x.fragment_bytes(), want);
    assert!(rt
        .fragment_rule()
        .devices()
        .iter()
        .any(|(d, g)| matches!(d, Device::Fpga(_)) && g.dma_burst == 256));
}

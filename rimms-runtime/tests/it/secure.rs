//! Secure buffers through the public API: a fragment evicted into an untrusted space and read
//! back; ciphertext at rest in an emulated board's u-dma-buf (untrusted by default), seen
//! through a second mapping of it; a flipped bit there caught; kernels refused where their
//! memory is untrusted and run where it is trusted; and the key in no trace, stats page or
//! `Debug` output.

use rimms_runtime::{
    ApiDecl, Complex32, Device, Error, FftDirection, HeteData, KernelArg, Policy, Runtime,
    SecureKey, SimConfig, SpaceSet, Target,
};

static FILL: ApiDecl = ApiDecl::new("secure_fill_u32");

const KEY: [u8; 32] = [
    0x4d, 0xe1, 0x07, 0xb9, 0x62, 0x1a, 0xf5, 0x38, 0xcc, 0x90, 0x2b, 0x7e, 0x03, 0xd4, 0x59, 0xa6,
    0x81, 0x3f, 0xe2, 0x17, 0x6c, 0xb0, 0x45, 0x9d, 0x28, 0xf3, 0x5e, 0x0a, 0xc7, 0x72, 0x1b, 0x94,
];

/// Two fragments of 4 KiB.
const LEN: usize = 2048;

/// Ways the key could be spelled in text: hex either case, its `Debug` as an array, and any
/// 4 of its bytes in a row either way.
fn key_spellings() -> Vec<String> {
    let hex: String = KEY.iter().map(|b| format!("{b:02x}")).collect();
    let mut spellings = vec![hex.clone(), hex.to_uppercase(), format!("{KEY:?}")];
    for w in KEY.windows(4) {
        spellings.push(format!("{}, {}, {}, {}", w[0], w[1], w[2], w[3]));
        spellings.push(w.iter().map(|b| format!("{b:02x}")).collect());
    }
    spellings
}

fn assert_no_key(what: &str, text: &str) {
    for needle in key_spellings() {
        assert!(!text.contains(&needle), "{what} shows the key ({needle})");
    }
}

/// A device pool evicts a secure buffer while the host has no room: its only copy goes to
/// the untrusted sim0 (as ciphertext), and once the host has room again it reads back as the
/// kernel wrote it.
#[test]
fn a_secure_buffer_evicted_into_an_untrusted_space_reads_back_intact() {
    let rt = Runtime::builder()
        .host_pool(4 * 4096)
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .trust("sim0", false)
        .pool("sim1", 2 * 4096)
        .build()
        .expect("runtime");
    let (sim0, sim1) = (
        rt.space_of(Device::Sim(0)).expect("sim0"),
        rt.space_of(Device::Sim(1)).expect("sim1"),
    );
    let key = SecureKey::new(KEY);
    // The host pool full: two plain buffers of 8 KiB.
    let filler = HeteData::from_slice(&rt, &[1u32; LEN]).expect("filler");
    let other = HeteData::from_slice(&rt, &[2u32; LEN]).expect("other");
    // y, written on sim1 (trusted), valid only there.
    let mut y = HeteData::<u32>::alloc_secure(&rt, LEN, &key).expect("y");
    let expected: Vec<u32> = (0..LEN as u32).map(|i| i * 3 + 11).collect();
    let want = expected.clone();
    rt.launch_host(
        Device::Sim(1),
        &FILL,
        [KernelArg::write("out", &mut y)],
        |[out]| {
            out.into_slice_mut::<u32>()?.copy_from_slice(&want);
            Ok(())
        },
    )
    .expect("y on sim1");
    // Another buffer on sim1 evicts y; the host is full, so y goes to sim0.
    let mut z = HeteData::<u32>::alloc(&rt, LEN).expect("z");
    rt.launch_host(
        Device::Sim(1),
        &FILL,
        [KernelArg::write("out", &mut z)],
        |[out]| {
            out.into_slice_mut::<u32>()?.fill(5);
            Ok(())
        },
    )
    .expect("z on sim1");
    for frag in 0..y.fragment_count() {
        let valid = y.fragment_state(frag).expect("fragment").valid;
        assert_eq!(valid, SpaceSet::only(sim0), "fragment {frag}");
        assert!(!valid.contains(sim1));
    }
    drop(filler);
    assert_eq!(y.to_vec().expect("opened on the host"), expected);
    y.validate().expect("copies agree");
    assert_eq!(other.to_vec().expect("other")[0], 2);
}

/// Sealing, opening, a refusal and a tampered run, all traced and on the stats page: the key
/// is in neither file, nor in any `Debug` or error message.
#[test]
fn the_key_is_in_no_trace_stats_page_or_debug_output() {
    let dir = tempfile::tempdir().expect("dir");
    let (trace, page) = (dir.path().join("trace.json"), dir.path().join("stats"));
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .trust("sim0", false)
        .trace_file(&trace)
        .stats_page(&page)
        .build()
        .expect("runtime");
    let key = SecureKey::new(KEY);
    let values: Vec<u32> = (0..LEN as u32).collect();
    let mut x = HeteData::from_slice_secure(&rt, &values, &key).expect("x");
    x.prefetch(Device::Sim(0)).expect("sealed into sim0");
    x.validate().expect("opened");
    let refused = rt
        .launch_host(
            Device::Sim(0),
            &FILL,
            [KernelArg::write("out", &mut x)],
            |[out]| {
                out.into_slice_mut::<u32>()?.fill(1);
                Ok(())
            },
        )
        .expect_err("refused");
    let mut run = vec![7u8; 100];
    let seals = key.seal_run(x.secure_id(), 0, 64, &mut run).expect("seal");
    run[3] ^= 1;
    let tampered = key
        .open_run(x.secure_id(), 0, 64, &mut run, &seals)
        .expect_err("tampered");
    let shown = format!(
        "{key:?} {x:?} {rt:?} {:?} {refused:?} {refused} {tampered:?} {tampered} {seals:?} {:?}",
        rt.stats(),
        x.secure_key()
    );
    assert_no_key("Debug output", &shown);
    assert!(shown.contains("redacted"), "{shown}");
    // The stats page goes with the runtime: read while it is up.
    let page = std::fs::read(&page).expect("stats page");
    assert!(!page.is_empty());
    assert_no_key("the stats page", &String::from_utf8_lossy(&page));
    assert!(
        !page.windows(KEY.len()).any(|w| w == KEY),
        "raw key bytes in the stats page"
    );
    drop(x);
    drop(rt);
    let trace = std::fs::read_to_string(&trace).expect("trace file");
    assert!(trace.contains("sim0"), "the trace has the transfers");
    assert_no_key("the trace file", &trace);
}

/// A kernel on a device whose memory is untrusted is refused, saying why, and nothing moves.
#[test]
fn a_kernel_on_an_untrusted_device_is_refused_saying_why() {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .trust("sim0", false)
        .build()
        .expect("runtime");
    let mut x = HeteData::<u32>::alloc_secure(&rt, LEN, &SecureKey::generate()).expect("x");
    let err = rt
        .launch_host(
            Device::Sim(0),
            &FILL,
            [KernelArg::write("out", &mut x)],
            |[out]| {
                out.into_slice_mut::<u32>()?.fill(1);
                Ok(())
            },
        )
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        matches!(&err, Error::Untrusted { space, .. } if space == "sim0"),
        "{text}"
    );
    assert!(
        text.contains("not trusted") && text.contains("secure_fill_u32"),
        "{text}"
    );
    assert!(x.host().expect("zeros").iter().all(|&v| v == 0));
    assert_eq!(rt.stats().links.iter().map(|l| l.bytes).sum::<u64>(), 0);
}

/// The scheduler never picks a device whose memory is untrusted for a call with a secure
/// argument: taking turns over the CPU, sim0 (untrusted) and sim1, every call runs; a plain
/// buffer still goes to sim0 in its turn.
#[test]
fn automatic_placement_passes_over_untrusted_devices_for_secure_arguments() {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .trust("sim0", false)
        .scheduler(Policy::RoundRobin)
        .build()
        .expect("runtime");
    let sim0 = rt.space_of(Device::Sim(0)).expect("sim0");
    let key = SecureKey::generate();
    let n = 256;
    let mut impulse = vec![Complex32::new(0.0, 0.0); n];
    impulse[0] = Complex32::new(1.0, 0.0);
    let x = HeteData::from_slice_secure(&rt, &impulse, &key).expect("x");
    for call in 0..6 {
        let mut y = HeteData::<Complex32>::alloc_secure(&rt, n, &key).expect("y");
        rt.fft(Target::Auto, FftDirection::Forward, n, &x, &mut y)
            .unwrap_or_else(|e| panic!("call {call}: {e}"));
        assert!(y
            .host()
            .expect("y")
            .iter()
            .all(|v| (v.re - 1.0).abs() < 1e-5));
    }
    let plain = HeteData::from_slice(&rt, &impulse).expect("plain");
    let mut used_sim0 = false;
    for _ in 0..3 {
        let mut y = HeteData::<Complex32>::alloc(&rt, n).expect("y");
        rt.fft(Target::Auto, FftDirection::Forward, n, &plain, &mut y)
            .expect("plain fft");
        used_sim0 |= y.fragment_state(0).expect("0").valid.contains(sim0);
    }
    assert!(used_sim0, "a plain buffer's call takes its turn on sim0");
}

#[test]
fn the_host_cannot_be_untrusted_and_a_trusted_name_must_exist() {
    let err = Runtime::builder().trust("host", false).build().unwrap_err();
    assert!(
        err.to_string().contains("host cannot be untrusted"),
        "{err}"
    );
    let err = Runtime::builder().trust("sim7", true).build().unwrap_err();
    assert!(matches!(err, Error::NoSuchSpace { .. }), "{err}");
}

/// An emulated board's u-dma-buf, untrusted by default: seen through a second mapping, it
/// holds no plaintext of a secure buffer prefetched there; a flipped bit there is
/// `Error::Tampered` at `validate()`; a kernel on the board is refused until the u-dma-buf
/// is marked trusted; and the key is in neither the trace file, nor the stats page, nor any
/// `Debug`.
#[cfg(feature = "fpga-emulator")]
mod udmabuf {
    use super::*;
    use rimms_runtime::backend::fpga::{Emulator, Udmabuf};
    use rimms_runtime::FpgaSource;

    fn words(buf: &Udmabuf) -> Vec<u32> {
        let mut all = vec![0u32; buf.len() / 4];
        buf.read_words(0, &mut all).expect("read the mapping");
        all
    }

    #[test]
    fn ciphertext_at_rest_in_the_udmabuf_a_flipped_bit_caught_no_key_anywhere() {
        let dir = tempfile::tempdir().expect("dir");
        let emulator =
            Emulator::start(dir.path(), &FpgaSource::default_layout()).expect("emulator");
        let (trace, page) = (dir.path().join("trace.json"), dir.path().join("stats"));
        let rt = Runtime::builder()
            .fpga(FpgaSource::Board(emulator.config().clone()))
            .trace_file(&trace)
            .stats_page(&page)
            .build()
            .expect("runtime");
        let mapping = Udmabuf::open(&emulator.config().udmabufs[0]).expect("a second mapping");
        let key = SecureKey::new(KEY);
        let values: Vec<u32> = (0..LEN as u32)
            .map(|i| i.wrapping_mul(0x9e37_79b9))
            .collect();
        let x = HeteData::from_slice_secure(&rt, &values, &key).expect("x");
        let before = words(&mapping);
        x.prefetch(Device::Fpga(0))
            .expect("prefetch into the u-dma-buf");
        let after = words(&mapping);
        let changed: Vec<usize> = (0..after.len())
            .filter(|&i| before[i] != after[i])
            .collect();
        let (first, last) = (changed[0], changed[changed.len() - 1]);
        assert!(
            last - first < LEN && last - first > LEN - 64,
            "{first}..{last}"
        );
        // The bytes at rest are not the values: almost no word matches, and no run of 4 of
        // the values appears anywhere in the mapping.
        let at_rest = &after[first..first + LEN];
        let same = at_rest.iter().zip(&values).filter(|(a, b)| a == b).count();
        assert!(same < 8, "{same} words in the clear");
        for frag in [0, 1024] {
            let run = &values[frag..frag + 4];
            assert!(
                !after.windows(4).any(|a| a == run),
                "plaintext of fragment {} in the u-dma-buf",
                frag / 1024
            );
        }
        x.validate().expect("the copies agree in the clear");
        // A bit flipped in the second fragment through the second mapping.
        let at = (first + 1024 + 3) * 4;
        mapping
            .write_words(at, &[after[first + 1024 + 3] ^ 0x0100])
            .expect("flip");
        let err = x.validate().expect_err("tampered");
        assert!(
            matches!(&err, Error::Tampered { buffer, fragment: 1, start: 4096, end: 8192, held_in }
                if *buffer == x.secure_id() && held_in == "udmabuf0"),
            "{err}"
        );
        assert_eq!(x.to_vec().expect("the host copy"), values);

        // A kernel on the board is refused while the u-dma-buf is untrusted.
        let n = 256;
        let mut impulse = vec![Complex32::new(0.0, 0.0); n];
        impulse[0] = Complex32::new(1.0, 0.0);
        let signal = HeteData::from_slice_secure(&rt, &impulse, &key).expect("signal");
        let mut spectrum = HeteData::<Complex32>::alloc(&rt, n).expect("spectrum");
        let err = rt
            .fft(
                Device::Fpga(0),
                FftDirection::Forward,
                n,
                &signal,
                &mut spectrum,
            )
            .expect_err("refused");
        assert!(
            matches!(&err, Error::Untrusted { space, .. } if space == "udmabuf0"),
            "{err}"
        );

        let shown = format!(
            "{key:?} {x:?} {rt:?} {:?} {err:?} {err} {:?}",
            rt.stats(),
            x.secure_key()
        );
        // The stats page goes with the runtime: read while it is up.
        let page = std::fs::read(&page).expect("stats page");
        drop((x, signal, spectrum));
        drop(rt);
        assert_no_key("Debug output", &shown);
        let trace = std::fs::read_to_string(&trace).expect("trace file");
        assert!(trace.contains("udmabuf0"), "the trace has the transfers");
        assert_no_key("the trace file", &trace);
        assert!(!page.is_empty());
        assert_no_key("the stats page", &String::from_utf8_lossy(&page));
        let raw_key_in_page = page.windows(KEY.len()).any(|w| w == KEY);
        assert!(!raw_key_in_page, "the stats page holds the key's bytes");
    }

    /// Marked trusted, the u-dma-buf runs the kernel on the plaintext, and the result is the
    /// FFT of an impulse: all ones.
    #[test]
    fn a_trusted_udmabuf_runs_kernels_on_secure_buffers() {
        let dir = tempfile::tempdir().expect("dir");
        let emulator =
            Emulator::start(dir.path(), &FpgaSource::default_layout()).expect("emulator");
        let rt = Runtime::builder()
            .fpga(FpgaSource::Board(emulator.config().clone()))
            .trust("udmabuf0", true)
            .build()
            .expect("runtime");
        let key = SecureKey::generate();
        let n = 256;
        let mut impulse = vec![Complex32::new(0.0, 0.0); n];
        impulse[0] = Complex32::new(1.0, 0.0);
        let signal = HeteData::from_slice_secure(&rt, &impulse, &key).expect("signal");
        let mut spectrum = HeteData::<Complex32>::alloc_secure(&rt, n, &key).expect("spectrum");
        rt.fft(
            Device::Fpga(0),
            FftDirection::Forward,
            n,
            &signal,
            &mut spectrum,
        )
        .expect("runs in a trusted u-dma-buf");
        for (i, v) in spectrum.host().expect("spectrum").iter().enumerate() {
            assert!(
                (v.re - 1.0).abs() < 1e-3 && v.im.abs() < 1e-3,
                "bin {i}: {v}"
            );
        }
    }
}

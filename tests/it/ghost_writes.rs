//! Ghost writes (bytes changed behind the runtime's API) with fragment checksums on and off:
//! on, the next read of the fragment is `Error::GhostWrite` naming the buffer, the fragments,
//! the space and the last writer; off, the changed bytes are used silently, and `validate()`
//! cannot see them where the fragment has one valid copy. Each scenario runs both ways.

use rimms::{ApiDecl, Device, Error, HeteData, KernelArg, Runtime, SimConfig};

static FILL: ApiDecl = ApiDecl::new("fill_u32");
static OVERRUN: ApiDecl = ApiDecl::new("overrun_u32");

/// 2 fragments of 4 KiB.
const LEN: usize = 2048;
const HALF: usize = LEN / 2;
const GHOST: u32 = 0xdead_beef;

fn sim_runtime(checksums: bool) -> Runtime {
    Runtime::builder()
        .sim(SimConfig::default())
        .checksums(checksums)
        .build()
        .expect("runtime")
}

/// Writes `value` everywhere in `out`: a correct kernel.
fn fill(rt: &Runtime, device: Device, out: &mut HeteData<u32>, value: u32) -> rimms::Result<()> {
    rt.launch_host(device, &FILL, [KernelArg::write("out", out)], |[out]| {
        out.into_slice_mut::<u32>()?.fill(value);
        Ok(())
    })
}

/// A deliberately wrong kernel: writes its output, then one element past its end, into the
/// next fragment of the same buffer, which it did not declare.
fn overrun(
    rt: &Runtime,
    device: Device,
    out: &mut rimms::HeteSliceMut<'_, u32>,
) -> rimms::Result<()> {
    rt.launch_host(device, &OVERRUN, [KernelArg::write("out", out)], |[out]| {
        let out = out.into_slice_mut::<u32>()?;
        out.fill(2);
        let past = out.as_mut_ptr().wrapping_add(out.len());
        // SAFETY: test-only, the bug under test. `out` is the first half of a buffer of
        // `LEN` elements whose block in this device's space holds the whole buffer, so the
        // element just past it is the first of the second half: inside the same allocation,
        // aligned, and written by nothing else while the call runs (the caller holds the
        // buffer mutably).
        unsafe { past.write(GHOST) };
        Ok(())
    })
}

/// A kernel that writes past its declared output into a neighbouring fragment, on a sim
/// device, then the host reads that fragment.
fn overrun_then_read(checksums: bool) -> (rimms::Result<Vec<u32>>, rimms::Result<()>) {
    let rt = sim_runtime(checksums);
    let mut data = HeteData::from_slice(&rt, &vec![1u32; LEN]).expect("data");
    // The whole buffer is written on sim0 and is valid only there.
    fill(&rt, Device::Sim(0), &mut data, 7).expect("fill on sim0");
    {
        let mut whole = data.as_slice_mut();
        let (mut first, _second) = whole.split_at_mut(HALF).expect("fragment boundary");
        overrun(&rt, Device::Sim(0), &mut first).expect("the overrun returns Ok");
    }
    let validated = data.validate();
    let read = data
        .slice(HALF..)
        .and_then(|second| second.host().map(<[u32]>::to_vec));
    (read, validated)
}

#[test]
fn a_kernel_writing_past_its_output_is_caught_with_checksums_on() {
    let (read, validated) = overrun_then_read(true);
    let err = validated.unwrap_err();
    assert!(
        matches!(&err, Error::GhostWrite { fragments, start: 4096, end: 8192, space, writer, .. }
            if *fragments == (1..2) && space == "sim0" && writer == "fill_u32 on sim0"),
        "{err}"
    );
    let err = read.unwrap_err();
    assert!(
        matches!(&err, Error::GhostWrite { fragments, space, writer, .. }
            if *fragments == (1..2) && space == "sim0" && writer == "fill_u32 on sim0"),
        "{err}"
    );
}

#[test]
fn a_kernel_writing_past_its_output_goes_unseen_with_checksums_off() {
    let (read, validated) = overrun_then_read(false);
    // One valid copy: nothing to compare it with.
    validated.expect("validate cannot see a ghost write to a fragment's only copy");
    let read = read.expect("the ghost bytes are used");
    assert_eq!(read[0], GHOST, "silently");
    assert!(read[1..].iter().all(|&v| v == 7));
}

#[test]
fn checksums_leave_correct_programs_alone() {
    let rt = sim_runtime(true);
    let mut a = HeteData::from_slice(&rt, &vec![3u32; LEN]).expect("a");
    fill(&rt, Device::Sim(0), &mut a, 5).expect("fill");
    a.host_mut().expect("host")[10] = 9;
    fill(&rt, Device::Cpu, &mut a, 6).expect("fill on the cpu");
    a.validate().expect("valid");
    a.as_slice_mut().host_mut().expect("host")[HALF] = 1;
    a.prefetch(Device::Sim(0)).expect("prefetch");
    a.validate().expect("valid");
    let v = a.to_vec().expect("read");
    assert_eq!(v[HALF], 1);
    assert_eq!(v[0], 6);
    a.reset();
    assert!(a.host().expect("zeros").iter().all(|&v| v == 0));
    a.validate().expect("valid");
}

/// The u-dma-buf of an emulated FPGA board: a shared mapping, written behind the runtime's
/// back by a second mapping of it in this process, and by another process.
#[cfg(feature = "fpga-emulator")]
mod udmabuf {
    use super::*;
    use rimms::drivers::fpga::{Emulator, Udmabuf};
    use rimms::{Complex32, FftDirection, FpgaSource};

    const N: usize = 256;
    const ROWS: usize = 8;
    const FFT0: Device = Device::Fpga(0);
    const CHILD_ENV: &str = "RIMMS_GHOST_WRITER";

    struct Board {
        _dir: tempfile::TempDir,
        emulator: Emulator,
        rt: Runtime,
    }

    fn board(checksums: bool) -> Board {
        let dir = tempfile::tempdir().expect("dir");
        let emulator =
            Emulator::start(dir.path(), &FpgaSource::default_layout()).expect("emulator");
        let rt = Runtime::builder()
            .fpga(FpgaSource::Board(emulator.config().clone()))
            .checksums(checksums)
            .build()
            .expect("runtime");
        Board {
            _dir: dir,
            emulator,
            rt,
        }
    }

    /// `y` = FFT of a signal, computed on fft0 and so valid only in the u-dma-buf.
    fn fft_in_udmabuf(rt: &Runtime) -> HeteData<Complex32> {
        let x: Vec<Complex32> = (0..N * ROWS)
            .map(|i| Complex32::new((i % 17) as f32, (i % 5) as f32))
            .collect();
        let x = HeteData::from_slice(rt, &x).expect("x");
        let mut y = HeteData::alloc(rt, N * ROWS).expect("y");
        rt.fft(FFT0, FftDirection::Forward, N, &x, &mut y)
            .expect("fft on fpga0");
        y
    }

    /// Where `y`'s bytes start in the u-dma-buf: blocks start on a 4 KiB granule, so compare
    /// the first row at each.
    fn offset_of(buf: &Udmabuf, first: &[Complex32]) -> usize {
        let mut probe = vec![Complex32::new(0.0, 0.0); first.len()];
        (0..buf.len() - first.len() * 8)
            .step_by(4096)
            .find(|&at| {
                buf.read_complex(at, &mut probe).expect("read");
                probe == first
            })
            .expect("y's bytes are in the u-dma-buf")
    }

    /// A second mapping of the u-dma-buf (what legacy code or a second driver holds) writes
    /// the second row of `y`; `writer` does it.
    fn ghost_write_row_1(b: &Board, y: &HeteData<Complex32>, writer: impl FnOnce(&Udmabuf, usize)) {
        let cfg = &b.emulator.config().udmabufs[0];
        let buf = Udmabuf::open(cfg).expect("a second mapping of the u-dma-buf");
        // Read in place (the CPU reaches the u-dma-buf): the first row, to find it.
        let first: Vec<Complex32> = y
            .slice(..N)
            .expect("row 0")
            .host()
            .expect("in place")
            .to_vec();
        let at = offset_of(&buf, &first);
        writer(&buf, at + N * 8);
    }

    fn write_ghost(buf: &Udmabuf, at: usize) {
        buf.write_complex(at, &[Complex32::new(-1.0, -1.0); 4])
            .expect("ghost write");
    }

    /// Bytes written through a second mapping of the u-dma-buf, then read by host code in
    /// place: `Ok(row 1)` or the error.
    fn mapped_ghost(checksums: bool) -> rimms::Result<Vec<Complex32>> {
        let b = board(checksums);
        let y = fft_in_udmabuf(&b.rt);
        ghost_write_row_1(&b, &y, write_ghost);
        let row = y.slice(N..2 * N)?.host().map(<[Complex32]>::to_vec);
        drop(y);
        row
    }

    fn assert_ghost_in_udmabuf(err: &Error) {
        assert!(
            matches!(err, Error::GhostWrite { fragments, start: 0, end: 4096, space, writer, .. }
                if *fragments == (0..1) && space == "udmabuf0" && writer == "fft on fpga0"),
            "{err}"
        );
    }

    #[test]
    fn a_write_through_a_second_mapping_of_the_udmabuf_is_caught_with_checksums_on() {
        let err = mapped_ghost(true).unwrap_err();
        assert_ghost_in_udmabuf(&err);
    }

    #[test]
    fn a_write_through_a_second_mapping_of_the_udmabuf_goes_unseen_with_checksums_off() {
        let row = mapped_ghost(false).expect("the ghost bytes are used");
        assert_eq!(row[0], Complex32::new(-1.0, -1.0), "silently");
    }

    /// The same, written by another process: this test binary run again, filtered to
    /// [`ghost_writer_process`], told where through the environment.
    fn process_ghost(checksums: bool) -> (rimms::Result<()>, rimms::Result<Vec<Complex32>>) {
        let b = board(checksums);
        let y = fft_in_udmabuf(&b.rt);
        ghost_write_row_1(&b, &y, |_, at| {
            let cfg = &b.emulator.config().udmabufs[0];
            let status = crate::rerun_test(module_path!(), "ghost_writer_process")
                .env(
                    CHILD_ENV,
                    format!("{}\n{at}", cfg.dev_root.join(&cfg.name).display()),
                )
                .status()
                .expect("the writer process runs");
            assert!(status.success(), "the writer process failed");
        });
        let validated = y.validate();
        let row = y
            .slice(N..2 * N)
            .and_then(|r| r.host().map(<[Complex32]>::to_vec));
        (validated, row)
    }

    /// Only as the child of [`process_ghost`]: another process writes the file behind the
    /// u-dma-buf's shared mapping (what the emulated device is).
    #[test]
    fn ghost_writer_process() {
        use std::os::unix::fs::FileExt;
        let Some(spec) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let spec = spec.to_string_lossy().into_owned();
        let (path, at) = spec.rsplit_once('\n').expect("path and offset");
        let at: u64 = at.parse().expect("offset");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("the u-dma-buf, from another process");
        let ghost: Vec<u8> = [-1.0f32; 8].iter().flat_map(|f| f.to_ne_bytes()).collect();
        file.write_all_at(&ghost, at).expect("ghost write");
    }

    #[test]
    fn another_process_writing_the_udmabuf_is_caught_with_checksums_on() {
        let (validated, row) = process_ghost(true);
        assert_ghost_in_udmabuf(&validated.unwrap_err());
        assert_ghost_in_udmabuf(&row.unwrap_err());
    }

    #[test]
    fn another_process_writing_the_udmabuf_goes_unseen_with_checksums_off() {
        let (validated, row) = process_ghost(false);
        validated.expect("one valid copy: validate cannot see it");
        assert_eq!(
            row.expect("used")[0],
            Complex32::new(-1.0, -1.0),
            "silently"
        );
    }
}

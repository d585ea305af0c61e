//! Every error case of DESIGN.md's "Errors and bad input": the call returns a `rimms::Error`
//! that names what and where, and nothing changes — contents, valid copies, stats.

use crate::common::signal;
use rimms::coherence::FragmentState;
use rimms::{Complex32, Device, Error, FftDirection, HeteData, Runtime, SimConfig, Stats, ZipOp};

fn runtime_with(sim: SimConfig) -> Runtime {
    Runtime::builder().sim(sim).build().expect("runtime")
}

fn runtime() -> Runtime {
    runtime_with(SimConfig::default())
}

/// Everything observable about a buffer without moving data: its fragment states.
fn states<T: bytemuck::Pod>(x: &HeteData<T>) -> Vec<FragmentState> {
    (0..x.fragment_count())
        .map(|i| x.fragment_state(i).expect("state"))
        .collect()
}

fn assert_unchanged(rt: &Runtime, before: &Stats) {
    let after = rt.stats();
    assert_eq!(after.links, before.links, "no copy may happen");
    assert_eq!(after.spaces, before.spaces, "no pool may change");
}

#[test]
fn a_zero_sized_element_type_is_refused() {
    let rt = runtime();
    let err = HeteData::<()>::alloc(&rt, 4).unwrap_err();
    assert!(matches!(err, Error::EmptyBuffer { .. }), "{err}");
    assert!(err.to_string().contains("()"), "names the type: {err}");
}

#[test]
fn overflowing_length_is_refused() {
    let rt = runtime();
    let err = HeteData::<Complex32>::alloc(&rt, usize::MAX / 4).unwrap_err();
    assert!(
        matches!(err, Error::LengthOverflow { elem_size: 8, .. }),
        "{err}"
    );
}

/// A length that fits the address space but whose fragment records cannot be allocated (no
/// block is taken at `alloc`, so no pool bounds it) is an error naming the sizes, not an
/// abort on a failed allocation; the runtime goes on.
#[test]
fn a_buffer_whose_fragment_records_cannot_be_allocated_is_refused() {
    let rt = runtime();
    let err = HeteData::<u8>::alloc(&rt, isize::MAX as usize).unwrap_err();
    assert!(
        matches!(err, Error::TooManyFragments { bytes, .. } if bytes == isize::MAX as usize),
        "{err}"
    );
    assert!(err.to_string().contains("use larger fragments"), "{err}");
    let x = HeteData::from_slice(&rt, &[1u8, 2, 3]).expect("a buffer after it");
    assert_eq!(x.host().expect("x"), &[1, 2, 3]);
}

#[test]
fn fragment_sizes_must_be_powers_of_two_and_whole_elements() {
    let rt = runtime();
    let mut x = HeteData::from_slice(&rt, &signal(1024, 1)).expect("x");
    let before = (x.fragment_bytes(), states(&x));
    let err = x.fragment(3000).unwrap_err();
    assert!(
        matches!(err, Error::FragmentSize { bytes: 3000, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("power of two"));
    let err = x.fragment(4).unwrap_err();
    assert!(
        err.to_string().contains("whole number of elements"),
        "{err}"
    );
    assert_eq!((x.fragment_bytes(), states(&x)), before);
    assert_eq!(x.host().expect("host"), &signal(1024, 1)[..]);
}

#[test]
fn element_sizes_that_cannot_fill_a_fragment_are_refused() {
    let rt = runtime();
    let err = HeteData::<[f32; 3]>::alloc(&rt, 10).unwrap_err();
    assert!(
        matches!(err, Error::FragmentSize { elem_size: 12, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("pad the type"), "{err}");
}

#[test]
fn element_types_the_pools_cannot_align_are_refused() {
    #[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
    #[repr(C, align(8192))]
    struct Page([u64; 1024]);
    let rt = runtime();
    let err = HeteData::<Page>::alloc(&rt, 1).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Alignment {
                align: 8192,
                granule: 4096,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn an_fft_beyond_the_device_limit_is_refused_before_anything_moves() {
    let rt = runtime_with(SimConfig {
        max_fft_points: Some(2048),
        ..SimConfig::default()
    });
    let x = HeteData::from_slice(&rt, &signal(4096, 2)).expect("x");
    let mut y = HeteData::from_slice(&rt, &signal(4096, 3)).expect("y");
    let (before, sx, sy) = (rt.stats(), states(&x), states(&y));
    let err = rt
        .fft(Device::Sim(0), FftDirection::Forward, 4096, &x, &mut y)
        .unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { api: "fft", .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("sim0") && err.to_string().contains("2048"),
        "{err}"
    );
    assert_unchanged(&rt, &before);
    assert_eq!((states(&x), states(&y)), (sx, sy));
    assert_eq!(y.host().expect("host"), &signal(4096, 3)[..]);
    // The same size is fine on the CPU.
    rt.fft(Device::Cpu, FftDirection::Forward, 4096, &x, &mut y)
        .expect("cpu fft");
}

#[test]
fn fft_sizes_must_be_powers_of_two_and_divide_the_data() {
    let rt = runtime();
    let x = HeteData::from_slice(&rt, &signal(1000, 4)).expect("x");
    let mut y = HeteData::alloc(&rt, 1000).expect("y");
    let before = rt.stats();
    let err = rt
        .fft(Device::Cpu, FftDirection::Forward, 1000, &x, &mut y)
        .unwrap_err();
    assert!(err.to_string().contains("power of two"), "{err}");
    let err = rt
        .fft(Device::Cpu, FftDirection::Forward, 512, &x, &mut y)
        .unwrap_err();
    assert!(err.to_string().contains("rows"), "{err}");
    assert_unchanged(&rt, &before);
}

#[test]
fn shapes_that_do_not_fit_are_refused_by_name() {
    let rt = runtime();
    let a = HeteData::from_slice(&rt, &signal(100, 5)).expect("a");
    let b = HeteData::from_slice(&rt, &signal(99, 6)).expect("b");
    let mut out = HeteData::<Complex32>::alloc(&rt, 100).expect("out");
    let before = rt.stats();
    let err = rt
        .zip(Device::Sim(0), ZipOp::Add, &a, &b, &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::Shape { api: "zip", .. }), "{err}");
    assert!(err.to_string().contains("`b` has 99"), "{err}");
    let err = rt.transpose(Device::Cpu, 7, 7, &a, &mut out).unwrap_err();
    assert!(err.to_string().contains("7 × 7"), "{err}");
    let err = rt
        .gemm(Device::Cpu, 10, 10, 5, &a, &a, &mut out)
        .unwrap_err();
    assert!(
        err.to_string().contains("`b` has 100 elements, not 10 × 5"),
        "{err}"
    );
    assert_unchanged(&rt, &before);
    assert_eq!(
        states(&out),
        vec![FragmentState {
            valid: rimms::SpaceSet::EMPTY,
            owner: None,
            zero: true
        }]
    );
}

#[test]
fn an_absent_device_is_named_with_those_present() {
    let rt = runtime();
    let x = HeteData::from_slice(&rt, &signal(64, 7)).expect("x");
    let mut y = HeteData::alloc(&rt, 64).expect("y");
    let before = rt.stats();
    let err = rt.conj(Device::Sim(3), &x, &mut y).unwrap_err();
    assert_eq!(
        err.to_string(),
        "device sim3 is not present in this runtime (it has: cpu, sim0)"
    );
    let err = x.prefetch(Device::Sim(1)).unwrap_err();
    assert!(matches!(err, Error::NoDevice { .. }));
    assert_unchanged(&rt, &before);
}

/// The device table keeps a kind's devices together, so an absent device's place can hold a
/// device of a later kind: here `sim1`'s place is the FPGA's first core. The call must still
/// be refused by name, not run there.
#[cfg(feature = "fpga-emulator")]
#[test]
fn an_absent_device_is_refused_where_its_place_holds_another_kind() {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .fpga(rimms::FpgaSource::Emulated(
            rimms::FpgaSource::default_layout(),
        ))
        .build()
        .expect("runtime");
    let x = HeteData::from_slice(&rt, &signal(64, 7)).expect("x");
    let mut y = HeteData::alloc(&rt, 64).expect("y");
    let before = rt.stats();
    match rt.conj(Device::Sim(1), &x, &mut y) {
        Err(Error::NoDevice { device, .. }) => assert_eq!(device, Device::Sim(1)),
        other => panic!("want sim1 refused as absent, got {other:?}"),
    }
    assert_unchanged(&rt, &before);
}

#[test]
fn exhausting_a_pool_names_the_space_and_changes_nothing() {
    let rt = runtime_with(SimConfig {
        pool_bytes: 64 << 10,
        ..SimConfig::default()
    });
    let big = HeteData::from_slice(&rt, &signal(16 * 1024, 8)).expect("128 KiB on the host");
    let mut out = HeteData::from_slice(&rt, &signal(16 * 1024, 9)).expect("out");
    let (before, sb, so) = (rt.stats(), states(&big), states(&out));
    let err = rt.conj(Device::Sim(0), &big, &mut out).unwrap_err();
    match &err {
        // A device pool too small for the call even after evicting everything evictable
        // (here: nothing else is resident) says so up front.
        Error::DoesNotFit {
            space,
            needed,
            free,
            evictable,
            in_use,
            ..
        } => {
            assert_eq!(
                (space.as_str(), *needed, *free, *evictable, *in_use),
                ("sim0", 128 << 10, 64 << 10, 0, 0)
            );
        }
        other => panic!("expected DoesNotFit, got {other}"),
    }
    assert!(err.to_string().contains("sim0"));
    assert_unchanged(&rt, &before);
    assert_eq!((states(&big), states(&out)), (sb, so));
    assert_eq!(out.host().expect("host"), &signal(16 * 1024, 9)[..]);
}

#[test]
fn the_host_pool_can_be_exhausted_too() {
    let rt = Runtime::builder()
        .host_pool(16 << 10)
        .build()
        .expect("runtime");
    let mut x = HeteData::<Complex32>::alloc(&rt, 4096).expect("lazy: nothing allocated yet");
    let err = x.host_write().map(|_| ()).unwrap_err();
    assert!(
        err.to_string().contains("memory space host is exhausted"),
        "{err}"
    );
    assert!(x.fragment_state(0).expect("state").zero, "still fresh");
}

#[test]
fn a_failed_copy_leaves_every_buffer_as_it_was() {
    let rt = runtime_with(SimConfig {
        fail_copies: true,
        ..SimConfig::default()
    });
    let x = HeteData::from_slice(&rt, &signal(2048, 10)).expect("x");
    let mut y = HeteData::from_slice(&rt, &signal(2048, 11)).expect("y");
    let (sx, sy) = (states(&x), states(&y));
    let err = rt
        .zip(Device::Sim(0), ZipOp::Mul, &x, &x, &mut y)
        .unwrap_err();
    assert!(matches!(err, Error::Transfer { .. }), "{err}");
    assert!(err.to_string().contains("host to sim0"), "{err}");
    assert_eq!((states(&x), states(&y)), (sx, sy));
    assert_eq!(rt.stats().total_copies(), 0);
    assert_eq!(y.host().expect("host"), &signal(2048, 11)[..]);
}

#[test]
fn a_failed_kernel_keeps_the_last_valid_copy() {
    let rt = runtime_with(SimConfig {
        fail_kernels: true,
        ..SimConfig::default()
    });
    let mut x = HeteData::from_slice(&rt, &signal(2048, 12)).expect("x");
    let err = rt
        .scale(Device::Sim(0), Complex32::new(5.0, 0.0), &mut x)
        .unwrap_err();
    assert!(matches!(err, Error::Kernel { api: "scale", .. }), "{err}");
    assert!(err.to_string().contains("sim0"), "{err}");
    // The sim0 copy was written by a kernel that failed: only the host copy counts.
    let st = x.fragment_state(0).expect("state");
    assert_eq!(st.valid, rimms::SpaceSet::only(rimms::SpaceId::HOST));
    assert_eq!(x.host().expect("host"), &signal(2048, 12)[..]);
    let stats = rt.stats();
    assert_eq!(stats.bytes("sim0", "host").unwrap(), 0);
    // Nothing else moved either: only x's one trip to sim0.
    assert_eq!(stats.total_bytes(), 2048 * 8);
}

#[test]
fn views_out_of_bounds_or_misaligned_are_refused() {
    let rt = runtime();
    let mut x = HeteData::from_slice(&rt, &signal(2048, 13)).expect("x"); // 4 fragments of 512
    assert!(matches!(
        x.slice(100..3000).unwrap_err(),
        Error::OutOfBounds {
            end: 3000,
            len: 2048,
            ..
        }
    ));
    let (start, end) = (6, 5);
    assert!(matches!(
        x.slice(start..end).unwrap_err(),
        Error::OutOfBounds {
            start: 6,
            end: 5,
            ..
        }
    ));
    assert!(matches!(
        x.slice(2049..2049).unwrap_err(),
        Error::OutOfBounds { .. }
    ));
    // One mutable view may end inside a fragment (it borrows the buffer whole); views that
    // exist together may not share one.
    assert_eq!(x.slice_mut(0..100).expect("one view").len(), 100);
    let err = x.split_at_mut(700).unwrap_err();
    assert!(
        matches!(
            err,
            Error::MisalignedSplit {
                at: 700,
                fragment_bytes: 4096,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        x.chunks_mut(100).unwrap_err(),
        Error::MisalignedSplit { .. }
    ));
    // Fragments hold 512 elements. The first boundary on one but the next not (512, then
    // 612), and the step whole fragments but the first boundary not (612): both refused at
    // the boundary that misses. A view with its one boundary on a fragment is cut.
    let misses = |from: usize, chunk: usize, x: &mut HeteData<Complex32>| match x
        .slice_mut(from..)
        .expect("view")
        .chunks_mut(chunk)
    {
        Err(Error::MisalignedSplit { at, .. }) => Some(at),
        _ => None,
    };
    assert_eq!(misses(412, 100, &mut x), Some(612));
    assert_eq!(misses(100, 512, &mut x), Some(612));
    let mut one_cut = x.slice_mut(412..612).expect("view");
    assert_eq!(one_cut.chunks_mut(100).expect("chunks").len(), 2);
    assert!(matches!(x.chunks(0).unwrap_err(), Error::BadPieces { .. }));
    assert!(matches!(x.rows(1000).unwrap_err(), Error::BadPieces { .. }));
    // Reads may take any range; aligned mutable splits work.
    assert_eq!(x.slice(100..200).expect("view").len(), 100);
    assert_eq!(x.chunks_mut(512).expect("chunks").len(), 4);
    assert_eq!(x.host().expect("host"), &signal(2048, 13)[..]);
}

#[test]
fn a_buffer_of_another_runtime_is_refused() {
    let (rt, other) = (runtime(), runtime());
    let x = HeteData::from_slice(&other, &signal(64, 14)).expect("x");
    let mut y = HeteData::alloc(&rt, 64).expect("y");
    let before = rt.stats();
    let err = rt.conj(Device::Cpu, &x, &mut y).unwrap_err();
    assert_eq!(
        err.to_string(),
        "argument `input` of conj belongs to another runtime"
    );
    assert_unchanged(&rt, &before);
}

#[test]
fn impossible_configurations_are_refused() {
    let err = Runtime::builder().granule(1000).build().unwrap_err();
    assert!(err.to_string().contains("power of two"), "{err}");
    let err = Runtime::builder().host_pool(0).build().unwrap_err();
    assert!(err.to_string().contains("at least one granule"), "{err}");
    let mut too_many = Runtime::builder();
    for _ in 0..16 {
        too_many = too_many.sim(SimConfig::default());
    }
    assert!(too_many
        .build()
        .unwrap_err()
        .to_string()
        .contains("at most 15 sim devices"));
}

/// Runs `f` on a thread of its own and waits at most ten seconds for its answer, so that a
/// call that blocks forever (an `open` of a FIFO) fails the test instead of hanging the
/// suite. A thread still blocked is left behind; it ends with the test process.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what} still blocks after 10 s"))
}

/// A FIFO at `path`, as a hostile user or another local user could plant one.
fn fifo(path: &std::path::Path) {
    nix::unistd::mkfifo(
        path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .expect("mkfifo");
}

#[cfg(feature = "fpga")]
#[test]
fn a_fifo_a_device_or_a_huge_file_as_a_board_file_is_refused_without_blocking() {
    use rimms::drivers::fpga::BoardConfig;
    let dir = tempfile::tempdir().expect("temp dir");
    // A FIFO first: opened for reading, it blocks until a writer comes, which never does.
    let board = dir.path().join("board.toml");
    fifo(&board);
    let path = board.clone();
    let err = within("loading a FIFO as a board file", move || {
        BoardConfig::load(&path)
    })
    .expect_err("a FIFO is no board file");
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "{} is a FIFO, not a regular file",
            board.display()
        )),
        "{err}"
    );
    // /dev/zero never ends: read whole, it would take all memory.
    let err = within("loading /dev/zero as a board file", || {
        BoardConfig::load(std::path::Path::new("/dev/zero"))
    })
    .expect_err("/dev/zero is no board file");
    assert!(
        err.to_string()
            .contains("/dev/zero is a character device, not a regular file"),
        "{err}"
    );
    // A regular file past the cap is refused before it is read (a sparse file: no disk used).
    let huge = dir.path().join("huge.toml");
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len((4 << 20) + 1))
        .expect("sparse file");
    let err = BoardConfig::load(&huge).expect_err("larger than a board file may be");
    assert!(
        err.to_string().contains(&format!(
            "{} is larger than the 4 MiB a board file may be",
            huge.display()
        )),
        "{err}"
    );
}

#[test]
fn a_fifo_as_a_stats_page_is_refused_before_anything_is_mapped() {
    use rimms::stats::page::{PageError, StatsPage};
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("page");
    fifo(&page);
    let path = page.clone();
    let err = within("opening a FIFO as a stats page", move || {
        StatsPage::open(&path).map(|p| p.pid())
    })
    .expect_err("a FIFO is no stats page");
    assert!(
        err.to_string()
            .contains(&format!("{} is a FIFO, not a regular file", page.display())),
        "{err}"
    );
    assert!(!matches!(err, PageError::Missing { .. }), "{err}");
    let err = within("opening /dev/zero as a stats page", || {
        StatsPage::open("/dev/zero").map(|p| p.pid())
    })
    .expect_err("/dev/zero is no stats page");
    assert!(
        err.to_string()
            .contains("/dev/zero is a character device, not a regular file"),
        "{err}"
    );
}

#[test]
fn absurd_link_models_are_refused_naming_the_device_and_the_field() {
    use rimms::LinkModel;
    use std::time::Duration;
    let us = Duration::from_micros(1);
    let bad = [
        (us, 1e-300, "bytes_per_second"),
        (us, 0.0, "bytes_per_second"),
        (us, -1e9, "bytes_per_second"),
        (us, f64::NAN, "bytes_per_second"),
        (us, f64::INFINITY, "bytes_per_second"),
        (us, 1e300, "bytes_per_second"),
        (us, 999.0, "bytes_per_second"),
        (Duration::MAX, 1e9, "latency"),
        (Duration::from_secs(3600), 1e9, "latency"),
        (Duration::from_millis(1001), 1e9, "latency"),
    ];
    for (latency, bytes_per_second, field) in bad {
        let link = LinkModel {
            latency,
            bytes_per_second,
        };
        // As the second sim, so the message must say which device's link it is.
        let built = Runtime::builder()
            .sim(SimConfig::default())
            .sim(SimConfig {
                link,
                simulate_link: true,
                ..SimConfig::default()
            })
            .build();
        let err = built
            .map(|_| ())
            .expect_err(&format!("{link:?} is accepted"));
        assert!(matches!(err, Error::Config(_)), "{link:?}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains("sim1") && msg.contains(field),
            "{link:?}: {msg}"
        );
        // Not simulated, the model still ranks copy sources: refused all the same.
        let err = Runtime::builder()
            .sim(SimConfig {
                link,
                ..SimConfig::default()
            })
            .build()
            .map(|_| ())
            .expect_err(&format!("{link:?} is accepted unsimulated"));
        assert!(err.to_string().contains("sim0"), "{err}");
    }
    // The bounds themselves are fine: 1 kB/s with a second's latency, and 10 TB/s.
    for (latency, bytes_per_second) in [
        (Duration::from_secs(1), 1e3),
        (Duration::ZERO, 1e13),
        (us, 1e6),
    ] {
        let link = LinkModel {
            latency,
            bytes_per_second,
        };
        let rt = Runtime::builder()
            .sim(SimConfig {
                link,
                simulate_link: true,
                ..SimConfig::default()
            })
            .build();
        assert!(rt.is_ok(), "{link:?}: {:?}", rt.err());
    }
}

#[test]
fn one_stats_page_under_two_spellings_is_one_page_and_a_drop_removes_only_its_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().join("d");
    std::fs::create_dir(&d).expect("mkdir");
    std::os::unix::fs::symlink(&d, dir.path().join("link")).expect("symlink");
    let page = d.join("p");
    let first = Runtime::builder().stats_page(&page).build().expect("first");
    for other in [
        d.join("..").join("d").join("p"),
        dir.path().join("link").join("p"),
        d.join(".").join("p"),
    ] {
        let err = Runtime::builder()
            .stats_page(&other)
            .build()
            .map(|_| ())
            .expect_err(&format!("{} is {}", other.display(), page.display()));
        assert!(matches!(err, Error::Config(_)), "{err}");
        assert!(err.to_string().contains("already published"), "{err}");
        assert!(
            page.exists(),
            "refusing {} removed the page",
            other.display()
        );
    }
    // Another program published at the same path since (its page renamed over this one's):
    // the first runtime's drop must leave it.
    let theirs = d.join("theirs");
    std::fs::write(&theirs, b"another program's page").expect("write");
    std::fs::rename(&theirs, &page).expect("rename");
    drop(first);
    // The publisher thread may finish the drop a moment later.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        std::fs::read(&page).ok().as_deref(),
        Some(&b"another program's page"[..]),
        "the drop removed a page it did not create"
    );
    // The first runtime's claim is gone: the path can be published again.
    std::fs::remove_file(&page).expect("remove");
    drop(Runtime::builder().stats_page(&page).build().expect("again"));
}

/// A pool for a space the runtime does not have is its own error, naming the space and the
/// ones there are (a pool beyond a u-dma-buf's memory: `rimms-cli`'s `left_behind` tests).
#[test]
fn a_pool_for_a_space_the_runtime_lacks_is_refused_by_name() {
    let err = Runtime::builder()
        .sim(SimConfig::default())
        .pool("nosuch", 1 << 20)
        .build()
        .expect_err("no space is called nosuch");
    match err {
        Error::NoSuchSpace { name, known } => {
            assert_eq!(name, "nosuch");
            assert!(known.contains("host") && known.contains("sim0"), "{known}");
        }
        other => panic!("{other}"),
    }
}

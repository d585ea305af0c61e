//! `Runtime::scope`: concurrent calls on disjoint views, the per-device queues, errors and
//! panics, and one copy for concurrent reads of the same fragment.

use crate::common::{assert_close, cpu_and_two_sims, dft_rows, signal};
use rimms::{Complex32, Device, Error, FftDirection, HeteData, ZipOp};
use std::sync::Mutex;

const ROW: usize = 1024;
const ROWS: usize = 12;
const ROW_BYTES: u64 = (ROW * 8) as u64;
/// Radix-2 passes of one FFT of a row.
const PASSES: u32 = ROW.trailing_zeros();

#[test]
fn rows_on_three_devices_at_once_match_a_direct_dft() {
    let rt = cpu_and_two_sims();
    let x = signal(ROW * ROWS, 7);
    let input = HeteData::from_slice(&rt, &x).unwrap();
    let mut output = HeteData::<Complex32>::alloc(&rt, ROW * ROWS).unwrap();
    output.fragment(ROW * 8).unwrap();
    let devices = [Device::Cpu, Device::Sim(0), Device::Sim(1)];
    let rows_in = input.rows(ROW).unwrap();
    let mut rows_out = output.rows_mut(ROW).unwrap();
    rt.scope(|s| {
        for (k, (row, out)) in rows_in.iter().zip(rows_out.iter_mut()).enumerate() {
            let device = devices[k % 3];
            s.spawn(move |rt| rt.fft(device, FftDirection::Forward, ROW, row, out));
        }
    })
    .unwrap();
    drop(rows_out);
    let got = output.to_vec().unwrap();
    assert_close(
        &got,
        &dft_rows(&x, ROW, false),
        PASSES,
        "rows on three devices",
    );
    // Each sim took 4 rows in and gave 4 back; nothing else moved.
    let stats = rt.stats();
    for sim in ["sim0", "sim1"] {
        assert_eq!(
            stats.bytes("host", sim).unwrap(),
            4 * ROW_BYTES,
            "host → {sim}"
        );
        assert_eq!(
            stats.bytes(sim, "host").unwrap(),
            4 * ROW_BYTES,
            "{sim} → host"
        );
    }
    assert_eq!(stats.total_bytes(), 16 * ROW_BYTES);
}

#[test]
fn concurrent_reads_of_one_fragment_copy_it_once_per_device() {
    let rt = cpu_and_two_sims();
    let shared = HeteData::from_slice(&rt, &signal(ROW, 3)).unwrap();
    let mut outs: Vec<HeteData<Complex32>> = (0..16)
        .map(|_| HeteData::alloc(&rt, ROW).unwrap())
        .collect();
    rt.scope(|s| {
        for (k, out) in outs.iter_mut().enumerate() {
            let device = if k % 2 == 0 {
                Device::Sim(0)
            } else {
                Device::Sim(1)
            };
            let shared = &shared;
            s.spawn(move |rt| rt.zip(device, ZipOp::Add, shared, shared, out));
        }
    })
    .unwrap();
    let stats = rt.stats();
    assert_eq!(stats.copies("host", "sim0").unwrap(), 1);
    assert_eq!(stats.copies("host", "sim1").unwrap(), 1);
    assert_eq!(stats.bytes("host", "sim0").unwrap(), ROW_BYTES);
    let x = shared.to_vec().unwrap();
    for out in &outs {
        let got = out.to_vec().unwrap();
        assert!(got.iter().zip(&x).all(|(g, v)| *g == *v + *v));
    }
}

/// An accelerator's jobs run one at a time, in the order they came, on its worker or on the
/// thread waiting for the scope (which runs the jobs still queued on an idle device itself),
/// never anywhere else.
#[test]
fn a_device_queue_runs_its_jobs_in_order_one_at_a_time() {
    let rt = cpu_and_two_sims();
    let ran = Mutex::new(Vec::new());
    let running = std::sync::atomic::AtomicBool::new(false);
    let scope_thread = std::thread::current().id();
    rt.scope(|s| {
        for k in 0..20 {
            let (ran, running) = (&ran, &running);
            s.spawn_on(Device::Sim(1), move |_| {
                let alone = !running.swap(true, std::sync::atomic::Ordering::AcqRel);
                let thread = std::thread::current();
                let on = if thread.id() == scope_thread {
                    Some("the scope's thread".to_string())
                } else {
                    thread.name().map(str::to_string)
                };
                ran.lock().unwrap().push((k, on, alone));
                running.store(false, std::sync::atomic::Ordering::Release);
                Ok(())
            });
        }
    })
    .unwrap();
    let ran = ran.into_inner().unwrap();
    let order: Vec<usize> = ran.iter().map(|(k, _, _)| *k).collect();
    assert_eq!(order, (0..20).collect::<Vec<_>>());
    assert!(ran.iter().all(|(_, _, alone)| *alone), "one job at a time");
    assert!(
        ran.iter()
            .all(|(_, t, _)| matches!(t.as_deref(), Some("rimms-sim1" | "the scope's thread"))),
        "{ran:?}"
    );
}

#[test]
fn a_failed_call_is_the_scope_error_and_the_others_still_run() {
    let rt = cpu_and_two_sims();
    let x = HeteData::from_slice(&rt, &signal(ROW, 1)).unwrap();
    let mut good = HeteData::<Complex32>::alloc(&rt, ROW).unwrap();
    let mut short = HeteData::<Complex32>::alloc(&rt, ROW / 2).unwrap();
    let outcome = rt.scope(|s| {
        let x = &x;
        s.spawn(|rt| rt.zip(Device::Sim(0), ZipOp::Add, x, x, &mut short));
        s.spawn(|rt| rt.zip(Device::Sim(1), ZipOp::Add, x, x, &mut good));
    });
    assert!(
        matches!(outcome, Err(Error::Shape { api: "zip", .. })),
        "{outcome:?}"
    );
    let want: Vec<Complex32> = x.to_vec().unwrap().iter().map(|v| v + v).collect();
    assert_eq!(good.to_vec().unwrap(), want);
}

#[test]
fn an_unknown_device_is_the_scope_error() {
    let rt = cpu_and_two_sims();
    let ran = Mutex::new(false);
    let outcome = rt.scope(|s| {
        s.spawn_on(Device::Sim(5), |_| {
            *ran.lock().unwrap() = true;
            Ok(())
        })
    });
    match outcome {
        Err(Error::NoDevice { device, .. }) => assert_eq!(device, Device::Sim(5)),
        other => panic!("expected NoDevice, got {other:?}"),
    }
    assert!(!*ran.lock().unwrap(), "the job must not run");
}

#[test]
fn a_panicking_job_panics_the_scope_after_the_others_finished() {
    let rt = cpu_and_two_sims();
    let finished = Mutex::new(0);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.scope(|s| {
            s.spawn_on(Device::Sim(0), |_| panic!("kernel bug"));
            for _ in 0..8 {
                s.spawn_on(Device::Sim(0), |_| {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    *finished.lock().unwrap() += 1;
                    Ok(())
                });
            }
        })
    }));
    let payload = caught.expect_err("the panic must reach the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"kernel bug"));
    // Every job behind the panicking one on the same queue ran before the scope returned.
    assert_eq!(*finished.lock().unwrap(), 8);
}

#[test]
fn a_scope_opened_inside_a_cpu_job_finishes() {
    let rt = cpu_and_two_sims();
    let x = HeteData::from_slice(&rt, &signal(4 * ROW, 5)).unwrap();
    let mut y = HeteData::<Complex32>::alloc(&rt, 4 * ROW).unwrap();
    y.fragment(ROW * 8).unwrap();
    rt.scope(|outer| {
        let (x, y) = (&x, &mut y);
        outer.spawn(move |rt| {
            let rows_in = x.rows(ROW)?;
            let mut rows_out = y.rows_mut(ROW)?;
            rt.scope(|inner| {
                for (row, out) in rows_in.iter().zip(rows_out.iter_mut()) {
                    inner
                        .spawn(move |rt| rt.fft(Device::Cpu, FftDirection::Forward, ROW, row, out));
                }
            })
        });
    })
    .unwrap();
    let got = y.to_vec().unwrap();
    let want = dft_rows(&signal(4 * ROW, 5), ROW, false);
    assert_close(&got, &want, PASSES, "rows of a nested scope");
}

#[test]
fn a_job_that_sends_work_to_its_own_queue_does_not_wait_for_itself() {
    let rt = cpu_and_two_sims();
    let x = HeteData::from_slice(&rt, &signal(ROW, 9)).unwrap();
    let mut y = HeteData::<Complex32>::alloc(&rt, ROW).unwrap();
    rt.scope(|outer| {
        let (x, y) = (&x, &mut y);
        outer.spawn_on(Device::Sim(0), move |rt| {
            rt.scope(|inner| {
                inner.spawn_on(Device::Sim(0), move |rt| {
                    rt.zip(Device::Sim(0), ZipOp::Add, x, x, y)
                });
            })
        });
    })
    .unwrap();
    let want: Vec<Complex32> = x.to_vec().unwrap().iter().map(|v| v + v).collect();
    assert_eq!(y.to_vec().unwrap(), want);
}

/// A loop of row calls in a program's own crate stays on the cheapest path: every row after
/// the first two joins its group told by its views alone (`Scope::joined_alike`). A group
/// told its rules apart by the address of a `const` slice, which each crate or codegen unit
/// may copy: once the scope's methods were inlined into the program, no row matched and
/// every one took the general path (the same result, four times the instructions).
#[test]
fn a_row_loop_in_the_programs_crate_joins_the_fast_way() {
    let rt = rimms::Runtime::new().unwrap();
    let x = signal(ROW * ROWS, 11);
    let filter = signal(ROW, 12);
    let input = HeteData::from_slice(&rt, &x).unwrap();
    let b = HeteData::from_slice(&rt, &filter).unwrap();
    let mut spectra = HeteData::<Complex32>::alloc(&rt, ROW * ROWS).unwrap();
    let mut product = HeteData::<Complex32>::alloc(&rt, ROW * ROWS).unwrap();
    let rows_in = input.rows(ROW).unwrap();
    let mut rows_spectra = spectra.rows_mut(ROW).unwrap();
    let joined = rt
        .scope(|s| {
            for (row, out) in rows_in.iter().zip(rows_spectra.iter_mut()) {
                s.fft(Device::Cpu, FftDirection::Forward, ROW, row, out)?;
            }
            Ok::<_, Error>(s.joined_alike())
        })
        .unwrap()
        .unwrap();
    assert_eq!(joined, ROWS - 2, "row FFTs that joined the fast way");
    drop(rows_spectra);
    let rows_spectra = spectra.rows(ROW).unwrap();
    let mut rows_product = product.rows_mut(ROW).unwrap();
    let joined = rt
        .scope(|s| {
            for (row, out) in rows_spectra.iter().zip(rows_product.iter_mut()) {
                s.zip(Device::Cpu, ZipOp::Mul, row, &b, out)?;
            }
            Ok::<_, Error>(s.joined_alike())
        })
        .unwrap()
        .unwrap();
    assert_eq!(joined, ROWS - 2, "row ZIPs that joined the fast way");
    drop((rows_spectra, rows_product));
    // The merged calls computed what one call per row would: each row's DFT times the filter.
    let want: Vec<(f64, f64)> = dft_rows(&x, ROW, false)
        .chunks(ROW)
        .flat_map(|row| {
            row.iter().zip(&filter).map(|(&(re, im), f)| {
                let (fr, fi) = (f64::from(f.re), f64::from(f.im));
                (re * fr - im * fi, re * fi + im * fr)
            })
        })
        .collect();
    assert_close(
        &product.to_vec().unwrap(),
        &want,
        PASSES + 1,
        "FFT then ZIP by rows",
    );
}

/// Row views handed to scope calls by value, made one by one as the loop walks them
/// (`iter_rows`, `iter_rows_mut`), join their groups as borrowed ones do and give each row's
/// DFT, on a sim card whose copies in and out they share.
#[test]
fn rows_handed_over_by_value_merge_and_match_a_direct_dft() {
    let rt = cpu_and_two_sims();
    let x = signal(ROW * ROWS, 13);
    let input = HeteData::from_slice(&rt, &x).unwrap();
    let mut output = HeteData::<Complex32>::alloc(&rt, ROW * ROWS).unwrap();
    output.fragment(ROW * 8).unwrap();
    let joined = rt
        .scope(|s| {
            let rows = input.iter_rows(ROW)?.zip(output.iter_rows_mut(ROW)?);
            assert_eq!(rows.len(), ROWS);
            for (row, out) in rows {
                s.fft(Device::Sim(0), FftDirection::Forward, ROW, row, out)?;
            }
            Ok::<_, Error>(s.joined_alike())
        })
        .unwrap()
        .unwrap();
    assert_eq!(joined, ROWS - 2, "row FFTs that joined the fast way");
    assert_close(
        &output.to_vec().unwrap(),
        &dft_rows(&x, ROW, false),
        PASSES,
        "rows by value",
    );
    let fft = rt
        .stats()
        .apis
        .into_iter()
        .find(|a| a.name == "fft")
        .unwrap();
    assert_eq!(
        (fft.merged, fft.merged_into, fft.calls),
        (ROWS as u64, 1, 1)
    );
    // A row length that does not divide the buffer is refused before a view is made.
    let err = output.iter_rows_mut(ROW + 1).map(drop).unwrap_err();
    assert!(matches!(err, Error::BadPieces { .. }), "{err}");
}

/// Every element-wise and per-row built-in a scope takes, called row by row with the rows
/// handed over by value, gives what a plain loop over the elements gives, on the CPU and on a
/// sim card: `zip_rows`, `window`, `fftshift`, `conj`, `magnitude` and `power` (the FFT and
/// the ZIP are above).
#[test]
fn every_scope_builtin_by_rows_matches_a_plain_loop() {
    const N: usize = 64;
    const R: usize = 6;
    let rt = cpu_and_two_sims();
    let x = signal(N * R, 21);
    let filter = signal(N, 22);
    let taper: Vec<f32> = (0..N).map(|j| j as f32 / N as f32 - 0.25).collect();
    let input = HeteData::from_slice(&rt, &x).unwrap();
    let row = HeteData::from_slice(&rt, &filter).unwrap();
    let window = HeteData::from_slice(&rt, &taper).unwrap();
    // Row-sized fragments, so that every row of an output is a view of its own.
    let complex = || {
        let mut d = HeteData::<Complex32>::alloc(&rt, N * R).unwrap();
        d.fragment(N * 8).unwrap();
        d
    };
    let real = || {
        let mut d = HeteData::<f32>::alloc(&rt, N * R).unwrap();
        d.fragment(N * 4).unwrap();
        d
    };
    // The plain loops, in f64.
    let wide = |z: Complex32| (f64::from(z.re), f64::from(z.im));
    let mul_conj = |(a, b): (f64, f64), (c, d): (f64, f64)| (a * c + b * d, b * c - a * d);
    let want_zip: Vec<_> = (0..N * R)
        .map(|i| mul_conj(wide(x[i]), wide(filter[i % N])))
        .collect();
    let want_window: Vec<_> = (0..N * R)
        .map(|i| {
            let (re, im) = wide(x[i]);
            let w = f64::from(taper[i % N]);
            (re * w, im * w)
        })
        .collect();
    let want_shift: Vec<_> = (0..N * R)
        .map(|i| wide(x[i / N * N + (i % N + N / 2) % N]))
        .collect();
    let want_conj: Vec<_> = x.iter().map(|&z| (wide(z).0, -wide(z).1)).collect();
    let want_power: Vec<f64> = x
        .iter()
        .map(|&z| wide(z).0.powi(2) + wide(z).1.powi(2))
        .collect();
    let want_magnitude: Vec<f64> = want_power.iter().map(|p| p.sqrt()).collect();
    let close_real = |got: &[f32], want: &[f64], what: &str| {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let err = (f64::from(g) - w).abs();
            assert!(
                err <= 4.0 * f64::from(f32::EPSILON) * w.abs().max(1.0),
                "{what}[{i}]: {g} against {w}"
            );
        }
    };
    for device in [Device::Cpu, Device::Sim(0)] {
        let (mut zipped, mut windowed, mut shifted, mut conj) =
            (complex(), complex(), complex(), complex());
        let (mut magnitude, mut power) = (real(), real());
        rt.scope(|s| {
            for (a, out) in input.iter_rows(N)?.zip(zipped.iter_rows_mut(N)?) {
                s.zip_rows(device, ZipOp::MulConj, a, &row, out)?;
            }
            for (a, out) in input.iter_rows(N)?.zip(windowed.iter_rows_mut(N)?) {
                s.window(device, a, &window, out)?;
            }
            for (a, out) in input.iter_rows(N)?.zip(shifted.iter_rows_mut(N)?) {
                s.fftshift(device, N, a, out)?;
            }
            for (a, out) in input.iter_rows(N)?.zip(conj.iter_rows_mut(N)?) {
                s.conj(device, a, out)?;
            }
            for (a, out) in input.iter_rows(N)?.zip(magnitude.iter_rows_mut(N)?) {
                s.magnitude(device, a, out)?;
            }
            for (a, out) in input.iter_rows(N)?.zip(power.iter_rows_mut(N)?) {
                s.power(device, a, out)?;
            }
            Ok::<(), Error>(())
        })
        .unwrap()
        .unwrap();
        assert_close(
            &zipped.to_vec().unwrap(),
            &want_zip,
            2,
            &format!("zip_rows on {device}"),
        );
        assert_close(
            &windowed.to_vec().unwrap(),
            &want_window,
            1,
            &format!("window on {device}"),
        );
        assert_close(
            &shifted.to_vec().unwrap(),
            &want_shift,
            1,
            &format!("fftshift on {device}"),
        );
        assert_close(
            &conj.to_vec().unwrap(),
            &want_conj,
            1,
            &format!("conj on {device}"),
        );
        close_real(
            &magnitude.to_vec().unwrap(),
            &want_magnitude,
            &format!("magnitude on {device}"),
        );
        close_real(
            &power.to_vec().unwrap(),
            &want_power,
            &format!("power on {device}"),
        );
    }
}

//! What a scope costs, beside rayon's own `scope` doing the same: opening and closing one with
//! no jobs, and with `n` jobs that do nothing, so what is timed is the scope's overhead
//! (submission, hand-off, completion, the wait). Goal: an empty scope under 1 µs, each job
//! under 1 µs of overhead. Per-job overhead is `(jobs(n) − empty) / n`.
//!
//! `cargo bench -p rimms-runtime --bench scope -- --sample-count 50 --min-time 0.05`

use divan::{black_box, Bencher};
use rimms_runtime::{Device, Runtime, SimConfig};

fn main() {
    divan::main();
}

const JOBS: [usize; 3] = [1, 16, 64];

#[divan::bench]
fn empty_rimms(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    bencher.bench_local(|| {
        rt.scope(|s| {
            black_box(s);
        })
        .expect("scope")
    });
}

#[divan::bench]
fn empty_rayon(bencher: Bencher) {
    bencher.bench_local(|| rayon::scope(|s| black_box(s).spawn(|_| {})));
}

/// rayon's scope with no spawn at all (the previous one spawns one no-op, as a scope with no
/// jobs still hands its body to a worker).
#[divan::bench]
fn empty_rayon_no_spawn(bencher: Bencher) {
    bencher.bench_local(|| {
        rayon::scope(|s| {
            black_box(s);
        })
    });
}

#[divan::bench(args = JOBS)]
fn jobs_rimms(bencher: Bencher, n: usize) {
    let rt = Runtime::new().expect("runtime");
    bencher.bench_local(|| {
        rt.scope(|s| {
            for i in 0..n {
                s.spawn(move |_| {
                    black_box(i);
                    Ok(())
                });
            }
        })
        .expect("scope")
    });
}

#[divan::bench(args = JOBS)]
fn jobs_rayon(bencher: Bencher, n: usize) {
    bencher.bench_local(|| {
        rayon::scope(|s| {
            for i in 0..n {
                s.spawn(move |_| {
                    black_box(i);
                });
            }
        })
    });
}

/// Jobs on an accelerator's queue (a sim device: one worker, jobs in order).
#[divan::bench(args = JOBS)]
fn jobs_rimms_on_sim(bencher: Bencher, n: usize) {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    bencher.bench_local(|| {
        rt.scope(|s| {
            for i in 0..n {
                s.spawn_on(Device::Sim(0), move |_| {
                    black_box(i);
                    Ok(())
                });
            }
        })
        .expect("scope")
    });
}

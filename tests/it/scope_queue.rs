//! The scope's own queue of CPU jobs (helpers on rayon's pool take jobs while the scope's
//! body runs, the scope's thread runs what is left): every job runs exactly once, jobs still
//! run at the same time as each other, and a job may submit more jobs to its scope.

use rimms::{Device, Runtime};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::time::Duration;

/// Long enough for any thread hand-off on a loaded machine; a hang shows as this error.
const PATIENCE: Duration = Duration::from_secs(20);

#[test]
fn every_cpu_job_runs_exactly_once() {
    let rt = Runtime::new().unwrap();
    for jobs in [1, 2, 3, 64, 1000] {
        let runs: Vec<AtomicUsize> = (0..jobs).map(|_| AtomicUsize::new(0)).collect();
        rt.scope(|s| {
            for run in &runs {
                s.spawn(move |_| {
                    run.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                });
            }
        })
        .unwrap();
        let counts: Vec<usize> = runs.iter().map(|r| r.load(Ordering::Relaxed)).collect();
        assert!(counts.iter().all(|&c| c == 1), "{jobs} jobs: {counts:?}");
    }
}

/// Two jobs that each wait for the other: they finish only if they run at the same time
/// (one on a pool helper, one on the scope's thread or another helper), not one after the
/// other on one thread.
#[test]
fn cpu_jobs_run_at_the_same_time() {
    let rt = Runtime::new().unwrap();
    for _ in 0..20 {
        let (to_b, from_a) = channel::<()>();
        let (to_a, from_b) = channel::<()>();
        rt.scope(|s| {
            s.spawn(move |_| {
                to_b.send(()).unwrap();
                from_b
                    .recv_timeout(PATIENCE)
                    .expect("job b never ran alongside a");
                Ok(())
            });
            s.spawn(move |_| {
                to_a.send(()).unwrap();
                from_a
                    .recv_timeout(PATIENCE)
                    .expect("job a never ran alongside b");
                Ok(())
            });
        })
        .unwrap();
    }
}

/// A job that holds the scope submits more work to it, on the CPU and on a device; the
/// scope returns only after all of it ran.
#[test]
fn a_job_submits_more_jobs_to_its_scope() {
    let rt = Runtime::builder()
        .sim(rimms::SimConfig::default())
        .build()
        .unwrap();
    let ran = AtomicUsize::new(0);
    rt.scope(|s| {
        let ran = &ran;
        s.spawn(move |_| {
            for k in 0..10 {
                let bump = move |_: &Runtime| {
                    // Late enough that the scope's thread is already waiting.
                    std::thread::sleep(Duration::from_millis(1));
                    ran.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                };
                if k % 2 == 0 {
                    s.spawn(bump);
                } else {
                    s.spawn_on(Device::Sim(0), bump);
                }
            }
            Ok(())
        });
    })
    .unwrap();
    assert_eq!(ran.into_inner(), 10);
}

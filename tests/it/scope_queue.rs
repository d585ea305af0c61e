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

/// As many jobs as the pool has threads start, then block until one more job, which one of
/// them submits once the scope's thread sleeps, has run: with every helper taken, only the
/// scope's thread can run that job, and it must not sleep through a job queued in its own
/// queue (it slept until a job finished, and none could).
#[test]
fn a_job_queued_while_every_helper_blocks_runs_on_the_scopes_thread() {
    use std::sync::{Condvar, Mutex};
    let rt = Runtime::new().unwrap();
    let blockers = rayon::current_num_threads();
    let (go, went) = (Mutex::new(false), Condvar::new());
    let (started, all_started) = channel::<()>();
    let timed_out = AtomicUsize::new(0);
    let wait_for_go = || {
        let (go, _) = went
            .wait_timeout_while(go.lock().unwrap(), PATIENCE, |go| !*go)
            .unwrap();
        if !*go {
            timed_out.fetch_add(1, Ordering::Relaxed);
        }
    };
    rt.scope(|s| {
        let (go, went, wait_for_go) = (&go, &went, &wait_for_go);
        for k in 0..blockers {
            let started = started.clone();
            s.spawn(move |_| {
                started.send(()).unwrap();
                if k == 0 {
                    // Long past the scope thread's spin: it sleeps by now.
                    std::thread::sleep(Duration::from_millis(100));
                    s.spawn(move |_| {
                        *go.lock().unwrap() = true;
                        went.notify_all();
                        Ok(())
                    });
                }
                wait_for_go();
                Ok(())
            });
        }
        // Every blocker runs on a pool helper, none on this thread.
        for _ in 0..blockers {
            all_started
                .recv_timeout(PATIENCE)
                .expect("every blocker starts");
        }
    })
    .unwrap();
    assert_eq!(
        timed_out.into_inner(),
        0,
        "the last job waited for the blockers"
    );
}

/// Thread A's scope sent a job to sim0 that has run, and waits for a slow one on sim1. Thread
/// B then queues a job on sim0 that waits for B's body, which goes on once A's scope has
/// returned (B's program says so).
/// A's thread, waiting, must not run B's job: it is behind all of A's own on sim0, and taking
/// it there made A's scope wait for itself (B's job waited out its patience, here 2 s).
#[test]
fn a_waiting_scope_does_not_run_a_job_queued_behind_its_own() {
    use std::sync::mpsc::TryRecvError;
    let rt = Runtime::builder()
        .sim(rimms::SimConfig::default())
        .sim(rimms::SimConfig::default())
        .build()
        .unwrap();
    let patience = Duration::from_secs(2);
    for round in 0..20 {
        let (queued, b_queued) = channel::<()>();
        let (a_done, a_returned) = channel::<()>();
        let waited_for_a = AtomicUsize::new(0);
        std::thread::scope(|t| {
            let (rt, waited_for_a) = (&rt, &waited_for_a);
            let (start_b, b_starts) = channel::<()>();
            t.spawn(move || {
                b_starts.recv().unwrap();
                let (release, released) = channel::<()>();
                rt.scope(|s| {
                    s.spawn_on(Device::Sim(0), move |_| {
                        if released.recv_timeout(patience).is_err() {
                            waited_for_a.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(())
                    });
                    queued.send(()).unwrap();
                    // B's body goes on only once A's scope has returned.
                    let _ = a_returned.recv_timeout(2 * patience);
                    let _ = release.send(());
                })
                .unwrap();
            });
            rt.scope(|s| {
                let (ran, a0_ran) = channel::<()>();
                s.spawn_on(Device::Sim(0), move |_| {
                    ran.send(()).unwrap();
                    Ok(())
                });
                s.spawn_on(Device::Sim(1), |_| {
                    std::thread::sleep(Duration::from_millis(50));
                    Ok(())
                });
                a0_ran.recv().unwrap();
                // Sim0's worker parks; then B queues its job, and this body returns as soon
                // as it has (a busy look, so that this thread is waiting at once).
                std::thread::sleep(Duration::from_millis(5));
                start_b.send(()).unwrap();
                loop {
                    match b_queued.try_recv() {
                        Ok(()) => break,
                        Err(TryRecvError::Empty) => std::hint::spin_loop(),
                        Err(TryRecvError::Disconnected) => panic!("B failed"),
                    }
                }
            })
            .unwrap();
            a_done.send(()).unwrap();
        });
        assert_eq!(
            waited_for_a.into_inner(),
            0,
            "round {round}: A's thread ran B's job, queued behind all of A's"
        );
    }
}

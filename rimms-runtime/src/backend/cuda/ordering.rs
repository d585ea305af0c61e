//! How a GPU's work is ordered across its two streams: every "which stream, which event,
//! which wait" decision of the backend, written once over [`Streams`] so that the real
//! streams run it and the tests' model ([`model`], a stream-ordering model that runs queued
//! work in adversarial orders) checks it.
//!
//! # Which stream
//!
//! Kernels, cuFFT executions and the 1/N scale after an inverse transform go on the compute
//! stream; copies in (staged), copies out, fills, copies within a pool and peer copies go on
//! the copy stream ([`Work::lane`]). Copies ahead of calls (`prefetch_async`, predicted
//! copies) come from other threads than the one running the device's kernels; on a stream of
//! their own they run while a kernel does instead of queueing behind it.
//!
//! # What orders work across the two streams
//!
//! Host waits, not events. The runtime's coherence publishes a copy's bytes only after the
//! copy returned, and every copy and fill here returns only once its work is done
//! ([`copy`], [`stage_in`]: an event recorded after it and waited for by the host); it lets a
//! copy read a kernel's output only after the kernel's completion was waited for
//! (`Backend::completion` → [`completion`]). So for every pair of dependent operations the
//! first is finished, host-waited, before the second is enqueued, whichever streams they are
//! on, and no event between the two streams of a device is needed for them.
//!
//! An event that ordered the copy stream after the compute stream (or a copy waiting for the
//! whole device) would be correct too, but it would make every copy wait for whatever kernel
//! is running, related or not — exactly the overlap the two streams are for. So there is
//! none; the cases where something is *not* host-waited, or state is shared between streams,
//! are handled one by one:
//!
//! - **Pinned staging buffers** are used by copies in only, so only by the copy stream. A
//!   buffer goes back to its pool with the event recorded after the copy that reads it
//!   ([`StagingPool::release_after`]) and is refilled by the host only after that event
//!   completed; the pool's FIFO of busy buffers completes in order because one stream (the
//!   copy stream) serves it.
//! - **cuFFT work areas** belong to a plan, which is bound to the compute stream; every
//!   execution of a plan and the scale after it go on that one stream, so two executions
//!   never share the work area at once and the scale runs after its transform (FIFO).
//! - **A copy that fails midway** (a chunk of a staged copy that could not be enqueued, an
//!   event that could not be recorded) has earlier chunks still in flight: the copy stream
//!   is drained ([`abandon`]) before the error is returned, so no byte of a failed copy lands
//!   after the runtime was told it failed (it may reuse or refill that memory). Likewise a
//!   launch that fails partway ([`launch`]: a transform queued, its scale not) drains the
//!   compute stream, since the runtime then skips the completion wait and lets the call's
//!   memory go.
//! - **Peer copies** go on the destination device's copy stream, ordered after the source
//!   device's copy stream by an event ([`peer_copy`]): the source's copies are host-waited
//!   already, so this costs nothing in the usual case and is there so that bytes still
//!   landing on the source are read after they landed. Not after the source's compute stream:
//!   its kernels' outputs are read only after their completion was waited for, and waiting
//!   for it would stall the copy behind an unrelated kernel of the source device.
//! - **Completion** ([`completion`]), what the runtime waits for right after a kernel: the
//!   compute stream drained (the kernel and any queued before it), then, without waiting for
//!   it, the copy stream's state (`cuStreamQuery`, which also returns the context's sticky
//!   error) and the errors cudarc stored, so that an asynchronous error of *either* stream is
//!   reported. It never waits for the copy stream: a kernel's caller would otherwise wait for
//!   another thread's prefetch.
//! - **Teardown** ([`quiesce`]): before the plans, the module, the staging buffers and the
//!   pool (`cuMemFree`) go, *both* streams are drained, each even if the other failed: a
//!   prefetch on the copy stream writes into the pool as surely as a kernel does.
//!
//! One thing one stream forgave and two do not: a copy into memory that a running kernel
//! still reads or writes (write after read). On one stream such a copy queued behind the
//! kernel; on the copy stream it would run beside it. The runtime never does this — a call
//! holds its arguments' blocks, so neither the pool nor eviction hands their memory to a
//! copy, until the call's completion was waited for — and this module relies on that rather
//! than making every copy wait for the compute stream.
//!
//! Left to the hardware and the driver, and so unchecked by the model: cudarc makes both
//! streams non-blocking, so nothing of ours serialises them through the legacy default
//! stream; what the driver itself synchronises (making a cuFFT plan allocates its work area,
//! `cuMemFree` at teardown) happens at first use or at the end, outside frame loops.

#[cfg(test)]
pub(crate) mod model;

use super::stream::{Lane, Streams, Work};
use super::Result;

/// Puts `work` on its lane: `enqueue` gets the lane's queue and must only enqueue. Returns
/// once enqueued; the caller waits for it with [`completion`]. Should enqueueing fail partway
/// (a transform queued, its scale not), the runtime gets the error without waiting for a
/// completion and lets the call's memory go: so the lane is drained first, and nothing the
/// call queued still runs when a copy may be writing that memory.
pub(crate) fn launch<S: Streams, E>(
    streams: &S,
    work: Work,
    enqueue: impl FnOnce(&S::Queue) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let lane = work.lane();
    let enqueued = enqueue(streams.queue(lane));
    if enqueued.is_err() {
        if let Err(also) = streams.drain(lane) {
            tracing::warn!(
                "waiting out a failed launch on {}: {also}",
                streams.device()
            );
        }
    }
    enqueued
}

/// A copy or fill: `enqueue` puts it on its lane; returns when it is done, or, should it
/// fail, when nothing of it can still run.
pub(crate) fn copy<S: Streams>(
    streams: &S,
    work: Work,
    enqueue: impl FnOnce(&S::Queue) -> Result<()>,
) -> Result<()> {
    let lane = work.lane();
    match enqueue(streams.queue(lane)) {
        Ok(()) => finish(streams, lane),
        Err(e) => Err(abandon(streams, lane, e)),
    }
}

/// Blocks until the work queued on `lane` so far is done: an event recorded now and waited
/// for, so that later work other threads queue there is not waited for. Should not even an
/// event be recorded, the whole lane is drained before the error is returned, so that nothing
/// the caller queued (a copy into its memory) is still running.
pub(crate) fn finish<S: Streams>(streams: &S, lane: Lane) -> Result<()> {
    match streams.record(lane) {
        Ok(event) => streams.host_wait(&event),
        Err(e) => Err(abandon(streams, lane, e)),
    }
}

/// After a failure with work of the caller perhaps still queued on `lane`: waits the lane
/// out, then hands back `error`.
pub(crate) fn abandon<S: Streams>(
    streams: &S,
    lane: Lane,
    error: crate::hal::BackendError,
) -> crate::hal::BackendError {
    if let Err(also) = streams.drain(lane) {
        tracing::warn!("waiting out failed work on {}: {also}", streams.device());
    }
    error
}

/// The pinned buffers a copy in stages through, returned after use with the event that says
/// when the copy reading them is done.
pub(crate) trait StagingPool<E> {
    type Buffer;
    /// A buffer that no queued copy reads any more.
    fn take(&self) -> Result<Self::Buffer>;
    /// Returns a buffer that nothing queued reads.
    fn release(&self, buffer: Self::Buffer);
    /// Returns a buffer that a queued copy reads until `event` completes.
    fn release_after(&self, buffer: Self::Buffer, event: E);
    /// Gives up a buffer whose copy's state is unknown: never reused, never freed.
    fn leak(&self, buffer: Self::Buffer);
}

/// A copy in of `pieces` chunks through `staging`: `enqueue(i, buffer, queue)` fills `buffer`
/// with chunk `i` and enqueues its copy to the device. Returns when every chunk is on the
/// device, or, should one fail, when none of them is still in flight.
pub(crate) fn stage_in<S: Streams, P: StagingPool<S::Event>>(
    streams: &S,
    staging: &P,
    pieces: usize,
    mut enqueue: impl FnMut(usize, &mut P::Buffer, &S::Queue) -> Result<()>,
) -> Result<()> {
    let lane = Work::CopyIn.lane();
    for i in 0..pieces {
        let mut buffer = match staging.take() {
            Ok(buffer) => buffer,
            Err(e) => return Err(abandon(streams, lane, e)),
        };
        if let Err(e) = enqueue(i, &mut buffer, streams.queue(lane)) {
            // Nothing was queued that reads the buffer; earlier chunks may be in flight.
            staging.release(buffer);
            return Err(abandon(streams, lane, e));
        }
        match streams.record(lane) {
            Ok(event) => staging.release_after(buffer, event),
            Err(e) => {
                // No event says when the copy is done: wait it out before the buffer is
                // reused, and never reuse it if even that fails.
                match streams.drain(lane) {
                    Ok(()) => staging.release(buffer),
                    Err(_) => staging.leak(buffer),
                }
                return Err(e);
            }
        }
    }
    finish(streams, lane)
}

/// A copy from `source`'s memory into `dest`'s, on `dest`'s copy lane after the copies
/// queued on `source`'s (see the module's docs for why not after its kernels); returns when
/// it is done.
pub(crate) fn peer_copy<S: Streams>(
    source: &S,
    dest: &S,
    enqueue: impl FnOnce(&S::Queue) -> Result<()>,
) -> Result<()> {
    let work = Work::PeerCopyIn;
    let source_copies = source.record(Work::CopyIn.lane())?;
    dest.order_after(work.lane(), &source_copies)?;
    copy(dest, work, enqueue)
}

/// What the runtime waits for after a kernel: the compute lane drained, and any asynchronous
/// error of either lane (the copy lane's without waiting for it).
pub(crate) fn completion<S: Streams>(streams: &S) -> Result<()> {
    streams.drain(Work::Kernel.lane())?;
    streams.poll(Work::CopyIn.lane())?;
    streams.sticky_error()
}

/// Before the device's resources go: both lanes drained, each even if the other failed; the
/// first error.
pub(crate) fn quiesce<S: Streams>(streams: &S) -> Result<()> {
    let compute = streams.drain(Lane::Compute);
    let copies = streams.drain(Lane::Copy);
    compute.and(copies)
}

#[cfg(test)]
mod tests {
    //! The ordering run on the model ([`model`]) over many seeds, each an adversarial
    //! interleaving: the operations below enqueue what the space and the kernels enqueue
    //! (one model word per chunk of bytes) through the same functions.

    use super::model::{Effect, Loc, ModelGpu, ModelStaging, World};
    use super::*;
    use crate::hal::BackendError;
    use crate::hal::Device;

    const SEEDS: u64 = 200;

    fn double(x: u64) -> u64 {
        x * 2
    }

    fn plus_one(x: u64) -> u64 {
        x + 1
    }

    /// `GpuSpace::copy_in`: `words` into gpu `dev`'s pool from `at` on, one chunk each.
    fn copy_in(gpu: &ModelGpu, staging: &ModelStaging, world: &World, at: u32, words: &[u64]) {
        let dev = device_index(gpu);
        stage_in(gpu, staging, words.len(), |i, buf, q| {
            world.host_write(Loc::Staging(*buf), words[i]);
            q.push(
                "copy in",
                Effect::Copy {
                    from: Loc::Staging(*buf),
                    to: Loc::Dev(dev, at + i as u32),
                },
            );
            Ok(())
        })
        .expect("the copy in succeeds");
    }

    /// `GpuSpace::copy_out` of one word to host word `host`.
    fn copy_out(gpu: &ModelGpu, at: u32, host: u32) -> Result<()> {
        let dev = device_index(gpu);
        copy(gpu, Work::CopyOut, |q| {
            q.push(
                "copy out",
                Effect::Copy {
                    from: Loc::Dev(dev, at),
                    to: Loc::Host(host),
                },
            );
            Ok(())
        })
    }

    /// A kernel `to = f(from)` launched as `GpuKernels` launches one; its id.
    fn kernel(gpu: &ModelGpu, from: u32, to: u32, f: fn(u64) -> u64, held: bool) -> u64 {
        let dev = device_index(gpu);
        let effect = Effect::Kernel {
            from: Loc::Dev(dev, from),
            to: Loc::Dev(dev, to),
            f,
        };
        let mut id = 0;
        launch(gpu, Work::Kernel, |q| {
            id = if held {
                q.push_held("kernel", effect)
            } else {
                q.push("kernel", effect)
            };
            Ok::<(), BackendError>(())
        })
        .expect("the launch succeeds");
        id
    }

    fn device_index(gpu: &ModelGpu) -> usize {
        match gpu.device() {
            Device::Gpu(n) => n as usize,
            other => unreachable!("a model GPU is a GPU, not {other}"),
        }
    }

    fn clean(world: &World, seed: u64) {
        let violations = world.violations();
        assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    }

    #[test]
    fn work_goes_on_its_lane() {
        for (work, lane) in [
            (Work::Kernel, Lane::Compute),
            (Work::Fft, Lane::Compute),
            (Work::CopyIn, Lane::Copy),
            (Work::CopyOut, Lane::Copy),
            (Work::Fill, Lane::Copy),
            (Work::CopyWithin, Lane::Copy),
            (Work::PeerCopyIn, Lane::Copy),
        ] {
            assert_eq!(work.lane(), lane, "{work:?}");
        }
    }

    /// The runtime's pattern: copy in, kernel, completion, copy out; the bytes arrive in
    /// order whatever the interleaving.
    #[test]
    fn a_call_sees_its_inputs_and_the_host_its_outputs() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let gpu = world.gpu(0);
            let staging = ModelStaging::new(&world, 2);
            copy_in(&gpu, &staging, &world, 0, &[3, 5, 7, 11, 13]);
            for i in 0..5 {
                kernel(&gpu, i, 10 + i, double, false);
            }
            completion(&gpu).expect("no fault");
            for i in 0..5 {
                copy_out(&gpu, 10 + i, i).expect("no fault");
            }
            let got: Vec<u64> = (0..5).map(|i| world.read(Loc::Host(i))).collect();
            assert_eq!(got, [6, 10, 14, 22, 26], "seed {seed}");
            assert_eq!(world.lanes_of("kernel"), [Lane::Compute; 5], "seed {seed}");
            assert_eq!(world.lanes_of("copy in"), [Lane::Copy; 5], "seed {seed}");
            clean(&world, seed);
        }
    }

    /// The point of two lanes: while a kernel runs (held), copies in, out, fills and peer
    /// copies of other data complete without waiting for it, and so does a kernel's
    /// completion check of the copy lane.
    #[test]
    fn copies_overlap_a_running_kernel() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let (gpu0, gpu1) = (world.gpu(0), world.gpu(1));
            let staging = ModelStaging::new(&world, 2);
            world.host_write(Loc::Dev(0, 50), 9);
            let running = kernel(&gpu0, 0, 1, double, true);
            let mut transform = 0;
            launch(&gpu0, Work::Fft, |q| {
                let at = Loc::Dev(0, 2);
                transform = q.push_held(
                    "cufftExecC2C",
                    Effect::Kernel {
                        from: at,
                        to: at,
                        f: double,
                    },
                );
                Ok::<(), BackendError>(())
            })
            .expect("the launch succeeds");
            let other = kernel(&gpu1, 0, 1, double, true);
            copy_in(&gpu0, &staging, &world, 20, &[1, 2, 3]);
            copy_out(&gpu0, 21, 0).expect("no fault");
            copy(&gpu0, Work::Fill, |q| {
                q.push(
                    "fill",
                    Effect::Set {
                        to: Loc::Dev(0, 30),
                        value: 0,
                    },
                );
                Ok(())
            })
            .expect("no fault");
            peer_copy(&gpu0, &gpu1, |q| {
                q.push(
                    "peer copy",
                    Effect::Copy {
                        from: Loc::Dev(0, 50),
                        to: Loc::Dev(1, 50),
                    },
                );
                Ok(())
            })
            .expect("no fault");
            // A prefetch in flight does not hold up the completion of a kernel.
            let prefetch = gpu1.queue(Work::CopyIn.lane()).push_held(
                "prefetch",
                Effect::Set {
                    to: Loc::Dev(1, 60),
                    value: 1,
                },
            );
            world.release(other);
            completion(&gpu1).expect("no fault");
            assert_eq!(world.read(Loc::Host(0)), 2, "seed {seed}");
            assert_eq!(world.read(Loc::Dev(1, 50)), 9, "seed {seed}");
            assert_eq!(
                world.pending("kernel"),
                1,
                "seed {seed}: gpu0's kernel still runs"
            );
            clean(&world, seed);
            world.release(running);
            world.release(transform);
            world.release(prefetch);
            completion(&gpu0).expect("no fault");
            quiesce(&gpu1).expect("no fault");
            clean(&world, seed);
        }
    }

    /// An inverse FFT is a transform and a scale on one lane: the scale sees the transform's
    /// output.
    #[test]
    fn the_inverse_fft_scale_follows_its_transform() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let gpu = world.gpu(0);
            world.host_write(Loc::Dev(0, 0), 4);
            for _ in 0..3 {
                launch(&gpu, Work::Fft, |q| {
                    let at = Loc::Dev(0, 0);
                    q.push(
                        "cufftExecC2C",
                        Effect::Kernel {
                            from: at,
                            to: at,
                            f: double,
                        },
                    );
                    q.push(
                        "scale",
                        Effect::Kernel {
                            from: at,
                            to: at,
                            f: plus_one,
                        },
                    );
                    Ok::<(), BackendError>(())
                })
                .expect("the launch succeeds");
            }
            completion(&gpu).expect("no fault");
            assert_eq!(world.read(Loc::Dev(0, 0)), ((4 * 2 + 1) * 2 + 1) * 2 + 1);
            clean(&world, seed);
        }
    }

    /// A staging buffer is refilled only after the copy reading it ran, whatever the number
    /// of chunks against the pool's slots.
    #[test]
    fn staging_buffers_are_reused_only_after_their_copy() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let gpu = world.gpu(0);
            let staging = ModelStaging::new(&world, 2);
            let words: Vec<u64> = (100..112).collect();
            copy_in(&gpu, &staging, &world, 0, &words);
            copy_in(&gpu, &staging, &world, 20, &words[..3]);
            let got: Vec<u64> = (0..12).map(|i| world.read(Loc::Dev(0, i))).collect();
            assert_eq!(got, words, "seed {seed}");
            clean(&world, seed);
        }
    }

    /// A copy in that fails midway returns only once none of its chunks is still in flight.
    #[test]
    fn a_copy_that_fails_midway_leaves_nothing_in_flight() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let gpu = world.gpu(0);
            let staging = ModelStaging::new(&world, 4);
            let failed = stage_in(&gpu, &staging, 4, |i, buf, q| {
                if i == 2 {
                    return Err(BackendError::Invalid("chunk 2 could not be queued".into()));
                }
                world.host_write(Loc::Staging(*buf), 7);
                q.push(
                    "copy in",
                    Effect::Copy {
                        from: Loc::Staging(*buf),
                        to: Loc::Dev(0, i as u32),
                    },
                );
                Ok(())
            });
            assert!(failed.is_err(), "seed {seed}");
            assert_eq!(world.pending("copy in"), 0, "seed {seed}");
            assert_eq!(staging.leaked(), 0, "seed {seed}");
            clean(&world, seed);
        }
    }

    /// A launch that fails partway (the transform queued, its scale not) returns only once
    /// what it queued ran: the runtime lets the call's memory go without a completion wait.
    #[test]
    fn a_launch_that_fails_partway_leaves_nothing_running() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let gpu = world.gpu(0);
            let failed = launch(&gpu, Work::Fft, |q| {
                let at = Loc::Dev(0, 0);
                q.push(
                    "cufftExecC2C",
                    Effect::Kernel {
                        from: at,
                        to: at,
                        f: double,
                    },
                );
                Err(BackendError::Invalid(
                    "the scale could not be launched".into(),
                ))
            });
            assert!(failed.is_err(), "seed {seed}");
            assert_eq!(world.pending("cufftExecC2C"), 0, "seed {seed}");
            clean(&world, seed);
        }
    }

    /// A peer copy reads the source's bytes after the copies queued there, without waiting
    /// for the source's running kernel.
    #[test]
    fn a_peer_copy_follows_the_source_copies() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let (gpu0, gpu1) = (world.gpu(0), world.gpu(1));
            let running = kernel(&gpu0, 0, 1, double, true);
            // Bytes still landing on the source (queued, not yet waited for).
            gpu0.queue(Work::CopyIn.lane()).push(
                "landing",
                Effect::Set {
                    to: Loc::Dev(0, 8),
                    value: 42,
                },
            );
            peer_copy(&gpu0, &gpu1, |q| {
                q.push(
                    "peer copy",
                    Effect::Copy {
                        from: Loc::Dev(0, 8),
                        to: Loc::Dev(1, 8),
                    },
                );
                Ok(())
            })
            .expect("no fault");
            assert_eq!(world.read(Loc::Dev(1, 8)), 42, "seed {seed}");
            clean(&world, seed);
            world.release(running);
            quiesce(&gpu0).expect("no fault");
        }
    }

    /// A kernel's completion reports an asynchronous fault of either lane.
    #[test]
    fn completion_reports_a_fault_of_either_lane() {
        for seed in 0..SEEDS {
            for faulty in [Lane::Compute, Lane::Copy] {
                let world = World::new(seed);
                let gpu = world.gpu(0);
                gpu.queue(faulty).push("faulting work", Effect::Fault);
                // The faulting work has run (a copy another thread waited for), and then
                // this thread's kernel is launched.
                if faulty == Lane::Copy {
                    let _ = gpu.drain(Lane::Copy);
                }
                kernel(&gpu, 0, 1, double, false);
                assert!(
                    completion(&gpu).is_err(),
                    "seed {seed}, fault on {faulty:?}"
                );
                clean(&world, seed);
            }
        }
    }

    /// Teardown waits for both lanes: no work touches the pool after it is freed.
    #[test]
    fn teardown_waits_for_both_lanes() {
        for seed in 0..SEEDS {
            let world = World::new(seed);
            let gpu = world.gpu(0);
            let staging = ModelStaging::new(&world, 2);
            copy_in(&gpu, &staging, &world, 0, &[1, 2]);
            kernel(&gpu, 0, 1, double, false);
            // A prefetch another thread has queued and not yet waited for.
            gpu.queue(Work::CopyIn.lane()).push(
                "prefetch",
                Effect::Set {
                    to: Loc::Dev(0, 5),
                    value: 1,
                },
            );
            quiesce(&gpu).expect("no fault");
            world.free_pool(0);
            world.run_all();
            clean(&world, seed);
        }
    }

    /// The model can fail: work that a host wait forces while held, and work run after the
    /// pool went, are reported (so the tests above are not vacuous).
    #[test]
    fn the_model_reports_what_it_checks() {
        let world = World::new(1);
        let gpu = world.gpu(0);
        let running = gpu.queue(Lane::Copy).push_held(
            "kernel on the copy lane",
            Effect::Set {
                to: Loc::Dev(0, 0),
                value: 1,
            },
        );
        copy_out(&gpu, 0, 0).expect("no fault");
        assert_eq!(world.violations().len(), 1, "{:?}", world.violations());
        world.release(running);
        gpu.queue(Lane::Compute).push(
            "late kernel",
            Effect::Set {
                to: Loc::Dev(0, 1),
                value: 1,
            },
        );
        world.free_pool(0);
        world.run_all();
        assert_eq!(world.violations().len(), 2, "{:?}", world.violations());
    }
}

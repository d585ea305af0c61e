//! The device's streams, and the one place where work is put on them.
//!
//! A device has one compute stream (every kernel and FFT, in call order) and one copy stream
//! per direction (host→device, device→host, device→device), so a copy-in of the next buffer
//! can run while a kernel works on the last one. Everything goes through [`Lanes::submit`],
//! which, under one lock: asks the [hazard tracker](super::hazard) which earlier work on
//! other streams touches the same bytes, makes the stream wait for exactly those events,
//! enqueues the work, records an event after it, and remembers it. The lock also makes
//! submissions from several threads appear in one order, so that order is the program order
//! the tracker reasons about.
//!
//! The ordering itself is written against [`Streams`], the four things it asks of a device
//! (wait for an event, record one, ask whether one is done, wait for a stream), so that it
//! runs in the tests against a model of streams that reorders work as freely as a GPU may
//! (`sim_streams`), on machines with no GPU. [`Cuda`] is the real thing.
//!
//! Three rules keep the record truthful, because a missing entry means later work may
//! overtake running work and read or overwrite its bytes:
//! - an entry is dropped only when its work is *known* to be done: its event says so, or it
//!   was recorded on a stream before that stream was synchronised; an event that cannot be
//!   queried is kept (later work then waits for it, and fails with its error);
//! - work whose enqueue failed part-way (an FFT queued, its 1/N scale launch refused) is
//!   recorded like any other, since what was queued runs; if not even an event can be
//!   recorded, the stream is waited out before the error is returned;
//! - the device's context is made current before anything of it is queried or queued.
//!
//! The event recorded after each operation is handed back as a [`GpuEvent`]: the `sync_async`
//! style, where host code keeps going and waits only when it needs the result.

use super::cuda_error;
use super::hazard::{Hazards, Span};
use crate::error::Result;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::sync::{Arc, Mutex, MutexGuard};

/// A stream of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Kernels and FFTs.
    Compute = 0,
    /// Copies host → device.
    HostToDevice = 1,
    /// Copies device → host.
    DeviceToHost = 2,
    /// Copies and fills inside the device, and peer copies into it.
    DeviceToDevice = 3,
}

/// Streams of a device.
const LANES: usize = 4;

/// What the ordering needs from a device and its streams. Each call reports failure as an
/// error that names the device.
pub(crate) trait Streams {
    /// A stream work is queued on.
    type Stream;
    /// The completion of the work queued on a stream before it was recorded.
    type Event: Clone;
    /// The device's name, for messages.
    fn device(&self) -> &str;
    /// Makes the device's context current on the calling thread.
    fn bind(&self) -> Result<()>;
    /// Makes later work on `stream` wait for `event`.
    fn wait(&self, stream: &Self::Stream, event: &Self::Event) -> Result<()>;
    /// An event after the work queued on `stream` so far.
    fn record(&self, stream: &Self::Stream) -> Result<Self::Event>;
    /// Whether `event`'s work is done, without blocking.
    fn is_done(&self, event: &Self::Event) -> Result<bool>;
    /// Blocks until everything queued on `stream` is done.
    fn synchronize(&self, stream: &Self::Stream) -> Result<()>;
}

/// The CUDA driver's streams and events, on one device's context.
pub(crate) struct Cuda {
    ctx: Arc<CudaContext>,
    device: Arc<str>,
}

impl Streams for Cuda {
    type Stream = Arc<CudaStream>;
    type Event = Arc<CudaEvent>;

    fn device(&self) -> &str {
        &self.device
    }

    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(format!("making {}'s context current", self.device), e))
    }

    fn wait(&self, stream: &Arc<CudaStream>, event: &Arc<CudaEvent>) -> Result<()> {
        // A stream may wait for an event of another device's context (peer copies).
        stream
            .wait(event)
            .map_err(|e| cuda_error(format!("ordering work on {}", self.device), e))
    }

    fn record(&self, stream: &Arc<CudaStream>) -> Result<Arc<CudaEvent>> {
        stream
            .record_event(None)
            .map(Arc::new)
            .map_err(|e| cuda_error(format!("recording an event on {}", self.device), e))
    }

    fn is_done(&self, event: &Arc<CudaEvent>) -> Result<bool> {
        event
            .try_is_complete()
            .map_err(|e| cuda_error(format!("querying work on {}", self.device), e))
    }

    fn synchronize(&self, stream: &Arc<CudaStream>) -> Result<()> {
        stream
            .synchronize()
            .map_err(|e| cuda_error(format!("synchronising {}", self.device), e))
    }
}

/// Completion of work put on a GPU stream: wait for it, or ask whether it is done, while the
/// host does something else.
#[derive(Clone, Debug)]
pub struct GpuEvent {
    event: Arc<CudaEvent>,
    device: Arc<str>,
}

impl GpuEvent {
    /// Blocks until the work is done; an error if it failed (an asynchronous CUDA error).
    pub fn wait(&self) -> Result<()> {
        self.event
            .synchronize()
            .map_err(|e| cuda_error(format!("waiting for work on {}", self.device), e))
    }

    /// Whether the work is done, without blocking.
    pub fn is_done(&self) -> Result<bool> {
        self.event
            .try_is_complete()
            .map_err(|e| cuda_error(format!("querying work on {}", self.device), e))
    }
}

/// Above this many pending entries, finished ones are dropped before each submission.
const RETIRE_ABOVE: usize = 8;

/// The streams of one device and what is pending on them.
pub(crate) struct Lanes<S: Streams = Cuda> {
    model: S,
    streams: [S::Stream; LANES],
    hazards: Mutex<Hazards<S::Event>>,
}

impl<S: Streams> std::fmt::Debug for Lanes<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("device", &self.model.device())
            .field("pending", &self.lock().len())
            .finish()
    }
}

impl<S: Streams> Lanes<S> {
    /// Lanes over `streams` (compute, host-to-device, device-to-host, device-to-device).
    pub(crate) fn with_streams(model: S, streams: [S::Stream; LANES]) -> Self {
        Lanes {
            model,
            streams,
            hazards: Mutex::new(Hazards::new()),
        }
    }

    #[cfg(test)]
    pub(crate) fn model(&self) -> &S {
        &self.model
    }

    pub(crate) fn device(&self) -> &str {
        self.model.device()
    }

    pub(crate) fn stream(&self, lane: Lane) -> &S::Stream {
        &self.streams[lane as usize]
    }

    /// Makes the calling thread's current context this device's, as raw driver calls need.
    pub(crate) fn bind(&self) -> Result<()> {
        self.model.bind()
    }

    fn lock(&self) -> MutexGuard<'_, Hazards<S::Event>> {
        // Every update of the tracker is a single push or retain, so a panic elsewhere while
        // the lock was held cannot leave it half-updated: a poisoned lock is safe to reuse.
        self.hazards.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops the entries whose events say they are done; called with the context bound. An
    /// event that cannot be queried is not known to be done, so its entry stays.
    fn retire_finished(&self, hazards: &mut Hazards<S::Event>) {
        if hazards.len() > RETIRE_ABOVE {
            hazards.retire(|e| matches!(self.model.is_done(e), Ok(true)));
        }
    }

    /// Records an event after the work just enqueued on `stream` (successfully or not). If
    /// that fails, the work is in flight with nothing to order later work after it, so wait
    /// for the stream before reporting the error: then nothing is left running unseen.
    fn record_after(&self, stream: &S::Stream) -> Result<S::Event> {
        self.model.record(stream).inspect_err(|_| {
            if let Err(e) = self.model.synchronize(stream) {
                tracing::warn!("waiting out unrecorded work on {}: {e}", self.device());
            }
        })
    }

    /// Closes a submission: records an event after what `enqueued` queued and hands it to
    /// `remember` — also when the enqueue failed part-way, since what it queued runs.
    fn close<R>(
        &self,
        stream: &S::Stream,
        enqueued: Result<R>,
        remember: impl FnOnce(S::Event),
    ) -> Result<(R, S::Event)> {
        let recorded = self.record_after(stream);
        match (enqueued, recorded) {
            (Ok(out), Ok(event)) => {
                remember(event.clone());
                Ok((out, event))
            }
            (Err(e), Ok(event)) => {
                remember(event);
                Err(e)
            }
            // The stream was waited out: nothing of this submission is still running.
            (Ok(_), Err(e)) | (Err(e), Err(_)) => Err(e),
        }
    }

    /// Puts work on `lane`'s stream after whatever it conflicts with on the other streams,
    /// and returns its completion event. `enqueue` gets the stream and must only enqueue
    /// (asynchronous calls).
    pub(crate) fn order<R>(
        &self,
        lane: Lane,
        reads: &[Span],
        writes: &[Span],
        enqueue: impl FnOnce(&S::Stream) -> Result<R>,
    ) -> Result<(R, S::Event)> {
        let stream = self.stream(lane);
        let mut hazards = self.lock();
        self.model.bind()?;
        self.retire_finished(&mut hazards);
        for dep in hazards.waits_for(lane as usize, reads, writes) {
            self.model.wait(stream, &dep)?;
        }
        let enqueued = enqueue(stream);
        self.close(stream, enqueued, |event| {
            hazards.record(lane as usize, reads, writes, event)
        })
    }

    /// A peer copy from `src` (reading `src_spans` there) to `dst` (writing `dst_spans`
    /// there), enqueued on `dst`'s device-to-device stream after the conflicting work of both
    /// devices. `src_index` and `dst_index` are the devices' ordinals; the two trackers are
    /// locked in ordinal order so opposite copies cannot deadlock.
    pub(crate) fn order_peer<R>(
        src: &Lanes<S>,
        src_index: usize,
        src_spans: &[Span],
        dst: &Lanes<S>,
        dst_index: usize,
        dst_spans: &[Span],
        enqueue: impl FnOnce(&S::Stream) -> Result<R>,
    ) -> Result<(R, S::Event)> {
        // Ordinal first; two spaces on one device (two backends of one GPU) by address.
        let key = |l: &Lanes<S>, i: usize| (i, l as *const Lanes<S> as usize);
        let (mut src_h, mut dst_h) = if key(src, src_index) < key(dst, dst_index) {
            let s = src.lock();
            (s, dst.lock())
        } else {
            let d = dst.lock();
            (src.lock(), d)
        };
        // Each device's events are queried with its own context current.
        src.model.bind()?;
        src.retire_finished(&mut src_h);
        dst.model.bind()?;
        dst.retire_finished(&mut dst_h);
        let lane = Lane::DeviceToDevice;
        let stream = dst.stream(lane);
        // In `src`'s tracker a peer copy is work on another device's stream: its lane id is
        // the address of that device's lanes, which no lane index (0..4) can equal.
        let peer_lane = dst as *const Lanes<S> as usize;
        let deps = src_h
            .waits_for(peer_lane, src_spans, &[])
            .into_iter()
            .chain(dst_h.waits_for(lane as usize, &[], dst_spans));
        for dep in deps {
            dst.model.wait(stream, &dep)?;
        }
        let enqueued = enqueue(stream);
        dst.close(stream, enqueued, |event| {
            dst_h.record(lane as usize, &[], dst_spans, event.clone());
            src_h.record(peer_lane, src_spans, &[], event);
        })
    }

    /// Waits until every stream of the device is idle; the first error any reported.
    ///
    /// Only what was recorded before the streams were waited for is forgotten: another thread
    /// may submit in the meantime, and its work is still running when this returns. After a
    /// failure nothing is forgotten (whether the work finished is unknown).
    pub(crate) fn synchronize_all(&self) -> Result<()> {
        let mark = self.lock().mark();
        let mut first = Ok(());
        for stream in &self.streams {
            if let Err(e) = self.model.synchronize(stream) {
                first = first.and(Err(e));
            }
        }
        if first.is_ok() {
            // Peer copies into other devices (lane ids ≥ LANES) ran on their streams, which
            // were not waited for here.
            self.lock().retire_synchronized(mark, |lane| lane < LANES);
        }
        first
    }

    /// Entries in the ordering record (for tests and `Debug`).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.lock().len()
    }
}

impl Lanes<Cuda> {
    /// Creates the four streams on `ctx`.
    pub(crate) fn new(ctx: Arc<CudaContext>, device: &str) -> Result<Lanes> {
        let make = |what: &str| {
            ctx.new_stream()
                .map_err(|e| cuda_error(format!("creating the {what} stream on {device}"), e))
        };
        let streams = [
            make("compute")?,
            make("host-to-device copy")?,
            make("device-to-host copy")?,
            make("device-to-device copy")?,
        ];
        Ok(Lanes::with_streams(
            Cuda {
                ctx,
                device: device.into(),
            },
            streams,
        ))
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.model.ctx
    }

    fn event(&self, event: Arc<CudaEvent>) -> GpuEvent {
        GpuEvent {
            event,
            device: self.model.device.clone(),
        }
    }

    /// [`order`](Self::order), returning the completion as a [`GpuEvent`].
    pub(crate) fn submit<R>(
        &self,
        lane: Lane,
        reads: &[Span],
        writes: &[Span],
        enqueue: impl FnOnce(&Arc<CudaStream>) -> Result<R>,
    ) -> Result<(R, GpuEvent)> {
        let (out, event) = self.order(lane, reads, writes, enqueue)?;
        Ok((out, self.event(event)))
    }

    /// [`order_peer`](Self::order_peer), returning the completion as a [`GpuEvent`].
    pub(crate) fn submit_peer<R>(
        src: &Lanes,
        src_index: usize,
        src_spans: &[Span],
        dst: &Lanes,
        dst_index: usize,
        dst_spans: &[Span],
        enqueue: impl FnOnce(&Arc<CudaStream>) -> Result<R>,
    ) -> Result<(R, GpuEvent)> {
        let (out, event) = Lanes::order_peer(
            src, src_index, src_spans, dst, dst_index, dst_spans, enqueue,
        )?;
        Ok((out, dst.event(event)))
    }

    /// Waits for the compute stream and reports how its work ended.
    pub(crate) fn compute_status(&self) -> Result<()> {
        self.stream(Lane::Compute)
            .synchronize()
            .map_err(|e| cuda_error(format!("a kernel on {}", self.device()), e))?;
        self.ctx()
            .check_err()
            .map_err(|e| cuda_error(format!("an earlier call on {}", self.device()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim_streams::Sim;
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::SeqCst;

    const COMPUTE: usize = Lane::Compute as usize;
    const H2D: usize = Lane::HostToDevice as usize;
    const D2H: usize = Lane::DeviceToHost as usize;
    const D2D: usize = Lane::DeviceToDevice as usize;

    fn lanes(sim: Sim) -> Arc<Lanes<Sim>> {
        Arc::new(Lanes::with_streams(sim, [0, 1, 2, 3]))
    }

    fn span(start: usize, len: usize) -> Span {
        Span::at(start, len)
    }

    /// Host → device: `len` bytes at `at` become `value`.
    fn copy_in(l: &Lanes<Sim>, at: usize, len: usize, value: u8) -> Result<usize> {
        let sim = l.model();
        let (_, e) = l.order(Lane::HostToDevice, &[], &[span(at, len)], |&s| {
            sim.push(s, move |m| m[at..at + len].fill(value));
            Ok(())
        })?;
        Ok(e)
    }

    /// A kernel: `to[i] = from[i] + 1`.
    fn add_one(l: &Lanes<Sim>, from: usize, to: usize, len: usize) -> Result<usize> {
        let sim = l.model();
        let (_, e) = l.order(Lane::Compute, &[span(from, len)], &[span(to, len)], |&s| {
            sim.push(s, move |m| {
                for i in 0..len {
                    m[to + i] = m[from + i].wrapping_add(1);
                }
            });
            Ok(())
        })?;
        Ok(e)
    }

    /// Device → device copy.
    fn copy_within(l: &Lanes<Sim>, from: usize, to: usize, len: usize) -> Result<usize> {
        let sim = l.model();
        let (_, e) = l.order(
            Lane::DeviceToDevice,
            &[span(from, len)],
            &[span(to, len)],
            |&s| {
                sim.push(s, move |m| m.copy_within(from..from + len, to));
                Ok(())
            },
        )?;
        Ok(e)
    }

    /// Device → host: the bytes land in the returned vector when the event is reached.
    fn copy_out(l: &Lanes<Sim>, at: usize, len: usize) -> (Arc<Mutex<Vec<u8>>>, usize) {
        let sim = l.model();
        let host = Arc::new(Mutex::new(Vec::new()));
        let dst = host.clone();
        let (_, e) = l
            .order(Lane::DeviceToHost, &[span(at, len)], &[], |&s| {
                sim.push(s, move |m| *dst.lock().unwrap() = m[at..at + len].to_vec());
                Ok(())
            })
            .unwrap();
        (host, e)
    }

    #[test]
    fn dependent_work_is_ordered_even_when_the_model_runs_the_consumer_first() {
        let l = lanes(Sim::new(64, 1));
        // Whenever it may, the model runs device→host, then compute, then copies in last.
        l.model().prefer([D2H, COMPUTE, D2D, H2D]);
        copy_in(&l, 0, 8, 41).unwrap();
        add_one(&l, 0, 8, 8).unwrap();
        let (host, e) = copy_out(&l, 8, 8);
        l.model().wait_event(e);
        assert_eq!(*host.lock().unwrap(), vec![42; 8]);
    }

    #[test]
    fn synchronize_all_keeps_work_submitted_while_it_waits() {
        let l = lanes(Sim::new(64, 2));
        l.model().prefer([COMPUTE, D2H, D2D, H2D]);
        // While the last stream is being waited for, "another thread" copies in on the
        // host-to-device stream, which has already been waited for: that copy is still
        // queued when synchronize_all returns.
        let weak = Arc::downgrade(&l);
        l.model().on_synchronize(D2D, move || {
            let l = weak.upgrade().expect("the lanes are alive");
            copy_in(&l, 0, 8, 7).unwrap();
        });
        l.synchronize_all().unwrap();
        assert_eq!(
            l.model().queued(H2D),
            2,
            "the copy and its event are still queued"
        );
        assert_eq!(l.pending(), 1, "and the record still holds it");
        // So a kernel reading those bytes waits for the copy, though the model would run it
        // first.
        add_one(&l, 0, 8, 8).unwrap();
        l.synchronize_all().unwrap();
        assert_eq!(&l.model().memory()[8..16], &[8; 8]);
        assert_eq!(
            l.pending(),
            0,
            "after a quiet synchronize_all everything is done"
        );
    }

    #[test]
    fn a_failed_query_does_not_count_as_finished() {
        let l = lanes(Sim::new(64, 3));
        l.model().prefer([COMPUTE, D2H, D2D, H2D]);
        let first = copy_in(&l, 0, 8, 9).unwrap();
        l.model().fail_queries_of(first);
        // Enough unrelated copies to make the next submission retire finished work.
        for i in 0..RETIRE_ABOVE {
            copy_in(&l, 16 + i, 1, 1).unwrap();
        }
        add_one(&l, 0, 8, 8).unwrap();
        let (host, e) = copy_out(&l, 8, 8);
        l.model().wait_event(e);
        assert_eq!(*host.lock().unwrap(), vec![10; 8]);
        let (queries, unbound) = l.model().queries();
        assert!(queries > 0, "retirement ran");
        assert_eq!(unbound, 0, "every query ran with the context current");
    }

    #[test]
    fn retirement_queries_with_the_context_bound_on_a_fresh_thread() {
        let l = lanes(Sim::new(64, 4));
        for i in 0..=RETIRE_ABOVE {
            copy_in(&l, i, 1, 1).unwrap();
        }
        l.synchronize_all().unwrap();
        for i in 0..=RETIRE_ABOVE {
            copy_in(&l, i, 1, 2).unwrap();
        }
        // A thread that has never bound the context submits: retirement queries events.
        let l2 = l.clone();
        std::thread::spawn(move || copy_in(&l2, 32, 1, 3).unwrap())
            .join()
            .unwrap();
        let (queries, unbound) = l.model().queries();
        assert!(queries > RETIRE_ABOVE, "retirement ran: {queries} queries");
        assert_eq!(unbound, 0);
    }

    #[test]
    fn a_partly_enqueued_operation_is_still_ordered_before_later_work() {
        let l = lanes(Sim::new(64, 5));
        l.model().prefer([D2H, COMPUTE, D2D, H2D]);
        let sim = l.model();
        // An FFT queued, then its scaling launch refused: the FFT runs anyway.
        let failed = l.order(Lane::Compute, &[], &[span(0, 8)], |&s| {
            sim.push(s, |m| m[0..8].fill(5));
            Err::<(), _>(sim_launch_error())
        });
        assert!(failed.is_err());
        // A copy-out of those bytes must wait for it.
        let (host, e) = copy_out(&l, 0, 8);
        l.model().wait_event(e);
        assert_eq!(*host.lock().unwrap(), vec![5; 8]);
    }

    #[test]
    fn work_whose_event_cannot_be_recorded_is_waited_out() {
        let l = lanes(Sim::new(64, 6));
        l.model().fail_next_record();
        assert!(add_one(&l, 0, 8, 8).is_err());
        // Nothing else synchronised, yet the kernel has run: the stream was waited out.
        assert_eq!(l.model().queued(COMPUTE), 0);
        assert_eq!(&l.model().memory()[8..16], &[1; 8]);
        assert_eq!(l.pending(), 0);
    }

    fn sim_launch_error() -> crate::Error {
        cuda_error("launching scale on sim0", "modelled launch failure")
    }

    /// Several threads put copies and kernels on all four streams at once, never waiting
    /// between calls, while the model runs whatever is unblocked in pseudo-random order and
    /// another thread keeps synchronising: every result must match the plain sequential
    /// computation.
    #[test]
    fn concurrent_submissions_on_all_streams_give_sequential_results() {
        const THREADS: usize = 4;
        const ROUNDS: usize = 60;
        const LEN: usize = 16;
        // Per thread three buffers: x (copied in), y = x + 1 (kernel), z = y (copy within).
        let region = |t: usize| t * 3 * LEN;
        for seed in 1..=4u64 {
            let l = lanes(Sim::new(THREADS * 3 * LEN, seed));
            let stop = Arc::new(AtomicBool::new(false));
            // The "GPU": runs whatever is unblocked while the threads submit.
            let runner = {
                let (l, stop) = (l.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(SeqCst) {
                        if !l.model().step_once() {
                            std::thread::yield_now();
                        }
                    }
                })
            };
            let syncer = {
                let (l, stop) = (l.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(SeqCst) {
                        l.synchronize_all().unwrap();
                        std::thread::yield_now();
                    }
                })
            };
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let l = l.clone();
                    std::thread::spawn(move || {
                        let (x, y, z) = (region(t), region(t) + LEN, region(t) + 2 * LEN);
                        let mut reads = Vec::new();
                        for round in 0..ROUNDS {
                            let value = (t * 31 + round * 7) as u8;
                            copy_in(&l, x, LEN, value).unwrap();
                            add_one(&l, x, y, LEN).unwrap();
                            copy_within(&l, y, z, LEN).unwrap();
                            reads.push((value.wrapping_add(1), copy_out(&l, z, LEN)));
                        }
                        for (want, (host, e)) in reads {
                            l.model().wait_event(e);
                            assert_eq!(*host.lock().unwrap(), vec![want; LEN], "thread {t}");
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
            stop.store(true, SeqCst);
            syncer.join().unwrap();
            runner.join().unwrap();
            l.synchronize_all().unwrap();
            assert_eq!(l.pending(), 0);
        }
    }
}

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
pub(crate) struct Lanes {
    ctx: Arc<CudaContext>,
    device: Arc<str>,
    streams: [Arc<CudaStream>; 4],
    hazards: Mutex<Hazards<Arc<CudaEvent>>>,
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("device", &self.device)
            .field("pending", &self.lock().len())
            .finish()
    }
}

impl Lanes {
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
        Ok(Lanes {
            ctx,
            device: device.into(),
            streams,
            hazards: Mutex::new(Hazards::new()),
        })
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub(crate) fn device(&self) -> &str {
        &self.device
    }

    pub(crate) fn stream(&self, lane: Lane) -> &Arc<CudaStream> {
        &self.streams[lane as usize]
    }

    /// Makes the calling thread's current context this device's, as raw driver calls need.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(format!("making {}'s context current", self.device), e))
    }

    fn lock(&self) -> MutexGuard<'_, Hazards<Arc<CudaEvent>>> {
        // Every update of the tracker is a single push or retain, so a panic elsewhere while
        // the lock was held cannot leave it half-updated: a poisoned lock is safe to reuse.
        self.hazards.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts work on `lane`'s stream after whatever it conflicts with on the other streams,
    /// and returns its completion event. `enqueue` gets the stream and must only enqueue
    /// (asynchronous calls); if it fails, nothing is recorded.
    pub(crate) fn submit<R>(
        &self,
        lane: Lane,
        reads: &[Span],
        writes: &[Span],
        enqueue: impl FnOnce(&Arc<CudaStream>) -> Result<R>,
    ) -> Result<(R, GpuEvent)> {
        let stream = self.stream(lane);
        let mut hazards = self.lock();
        retire_finished(&mut hazards);
        self.bind()?;
        for dep in hazards.waits_for(lane as usize, reads, writes) {
            stream
                .wait(&dep)
                .map_err(|e| cuda_error(format!("ordering work on {}", self.device), e))?;
        }
        let out = enqueue(stream)?;
        let event = self.record_after(stream)?;
        hazards.record(lane as usize, reads, writes, event.clone());
        Ok((
            out,
            GpuEvent {
                event,
                device: self.device.clone(),
            },
        ))
    }

    /// A peer copy from `src` (reading `src_spans` there) to `dst` (writing `dst_spans`
    /// there), enqueued on `dst`'s device-to-device stream after the conflicting work of both
    /// devices. `src_index` and `dst_index` are the devices' ordinals; the two trackers are
    /// locked in ordinal order so opposite copies cannot deadlock.
    pub(crate) fn submit_peer<R>(
        src: &Lanes,
        src_index: usize,
        src_spans: &[Span],
        dst: &Lanes,
        dst_index: usize,
        dst_spans: &[Span],
        enqueue: impl FnOnce(&Arc<CudaStream>) -> Result<R>,
    ) -> Result<(R, GpuEvent)> {
        // Ordinal first; two spaces on one device (two backends of one GPU) by address.
        let key = |l: &Lanes, i: usize| (i, l as *const Lanes as usize);
        let (mut src_h, mut dst_h) = if key(src, src_index) < key(dst, dst_index) {
            let s = src.lock();
            (s, dst.lock())
        } else {
            let d = dst.lock();
            (src.lock(), d)
        };
        retire_finished(&mut src_h);
        retire_finished(&mut dst_h);
        let lane = Lane::DeviceToDevice;
        let stream = dst.stream(lane);
        // In `src`'s tracker a peer copy is work on another device's stream: its lane id is
        // the address of that device's lanes, which no lane index (0..4) can equal.
        let peer_lane = dst as *const Lanes as usize;
        dst.bind()?;
        let deps = src_h
            .waits_for(peer_lane, src_spans, &[])
            .into_iter()
            .chain(dst_h.waits_for(lane as usize, &[], dst_spans));
        for dep in deps {
            // A stream may wait for an event of another device's context.
            stream
                .wait(&dep)
                .map_err(|e| cuda_error(format!("ordering a peer copy into {}", dst.device), e))?;
        }
        let out = enqueue(stream)?;
        let event = dst.record_after(stream)?;
        dst_h.record(lane as usize, &[], dst_spans, event.clone());
        src_h.record(peer_lane, src_spans, &[], event.clone());
        Ok((
            out,
            GpuEvent {
                event,
                device: dst.device.clone(),
            },
        ))
    }

    /// Records an event after the work just enqueued on `stream`. If that fails the work is
    /// in flight with nothing to order later work after it, so wait for the stream before
    /// reporting the error: then nothing is left running unseen.
    fn record_after(&self, stream: &CudaStream) -> Result<Arc<CudaEvent>> {
        match stream.record_event(None) {
            Ok(event) => Ok(Arc::new(event)),
            Err(e) => {
                let _ = stream.synchronize();
                Err(cuda_error(
                    format!("recording an event on {}", self.device),
                    e,
                ))
            }
        }
    }

    /// Waits until every stream of the device is idle; the first error any reported.
    pub(crate) fn synchronize_all(&self) -> Result<()> {
        let mut first = Ok(());
        for stream in &self.streams {
            if let Err(e) = stream.synchronize() {
                if first.is_ok() {
                    first = Err(cuda_error(format!("synchronising {}", self.device), e));
                }
            }
        }
        self.lock().retire(|_| true);
        first
    }

    /// Waits for the compute stream and reports how its work ended.
    pub(crate) fn compute_status(&self) -> Result<()> {
        self.stream(Lane::Compute)
            .synchronize()
            .map_err(|e| cuda_error(format!("a kernel on {}", self.device), e))?;
        self.ctx
            .check_err()
            .map_err(|e| cuda_error(format!("an earlier call on {}", self.device), e))
    }
}

fn retire_finished(hazards: &mut Hazards<Arc<CudaEvent>>) {
    if hazards.len() > RETIRE_ABOVE {
        // An event that cannot be queried belongs to a context in an error state; later work
        // fails with that error anyway, so it is not kept waiting for.
        hazards.retire(|e| e.try_is_complete().unwrap_or(true));
    }
}

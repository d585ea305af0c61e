//! A GPU's two streams — compute and copy — and the events that say when part of their work
//! is done.
//!
//! Kernels and cuFFT go on the compute stream, copies and fills on the copy stream
//! ([`Work::lane`]), so a copy a prefetching thread issues runs while another thread's kernel
//! does, instead of queueing behind it. What orders work across the two streams, and why
//! that is enough, is written down in [`super::ordering`], which makes every decision of the
//! kind "which stream, which event, which wait" over the [`Streams`] trait: implemented here
//! by the real cudarc streams, and in the tests by a model that runs queued work in
//! adversarial orders.

use super::{cuda_error, Result};
use crate::hal::Device;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream, DriverError};
use std::sync::Arc;

/// One of a device's two streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    /// Kernels, cuFFT plans and the 1/N scale after an inverse transform.
    Compute,
    /// Copies in (staged), copies out, fills, copies within the device and peer copies in.
    Copy,
}

/// What the backend puts on a device's streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// An NVRTC kernel.
    Kernel,
    /// A cuFFT execution and the scale kernel after an inverse one: one lane, so the scale
    /// runs after the transform and the plan's work area is never used by two at once.
    Fft,
    /// Host to device, through the pinned staging buffers.
    CopyIn,
    /// Device to host.
    CopyOut,
    /// A memset of zeros.
    Fill,
    /// Device to device inside one pool.
    CopyWithin,
    /// Another GPU's memory to this one's (on this, the destination device).
    PeerCopyIn,
}

impl Work {
    /// The stream the work goes on: kernels on compute, every copy and fill on copy, so the
    /// two overlap.
    pub(crate) const fn lane(self) -> Lane {
        match self {
            Work::Kernel | Work::Fft => Lane::Compute,
            Work::CopyIn | Work::CopyOut | Work::Fill | Work::CopyWithin | Work::PeerCopyIn => {
                Lane::Copy
            }
        }
    }
}

/// The stream operations the backend's ordering ([`super::ordering`]) is written against: the
/// real streams ([`GpuStreams`]) and the tests' model implement them.
pub(crate) trait Streams {
    /// What work is enqueued on (the real: a `CudaStream`).
    type Queue: ?Sized;
    /// The completion of the work queued on a lane before it was recorded.
    type Event;
    /// The device the streams are on.
    fn device(&self) -> Device;
    /// The lane's queue, to enqueue on; the caller binds the context first where needed.
    fn queue(&self, lane: Lane) -> &Self::Queue;
    /// An event after the work queued on `lane` so far.
    fn record(&self, lane: Lane) -> Result<Self::Event>;
    /// Makes later work on `lane` wait for `event` (of this device or another), without
    /// blocking the host.
    fn order_after(&self, lane: Lane, event: &Self::Event) -> Result<()>;
    /// Blocks until `event`'s work is done; an error if it failed.
    fn host_wait(&self, event: &Self::Event) -> Result<()>;
    /// Blocks until `lane` is idle; an error if its work failed.
    fn drain(&self, lane: Lane) -> Result<()>;
    /// Without blocking: an error if work on `lane` has failed, else `Ok` (idle or busy).
    /// (`cuStreamQuery` also returns the context's sticky error: once a kernel faults, every
    /// later call of the context fails.)
    fn poll(&self, lane: Lane) -> Result<()>;
    /// An error stored earlier where none could be returned (cudarc keeps those of its
    /// drops in the context).
    fn sticky_error(&self) -> Result<()>;
}

/// A device's context and its two streams.
pub(crate) struct GpuStreams {
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    device: Device,
}

impl std::fmt::Debug for GpuStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuStreams")
            .field("device", &self.device)
            .finish()
    }
}

impl GpuStreams {
    /// Creates the compute and copy streams of `device` on `ctx`. cudarc makes both
    /// non-blocking streams: neither serialises with the legacy default stream (on which no
    /// work of ours goes), so the two run side by side, ordered against each other only by
    /// host waits and the events [`super::ordering`] records.
    pub(crate) fn new(ctx: Arc<CudaContext>, device: Device) -> Result<GpuStreams> {
        let create = |which: &str| {
            ctx.new_stream()
                .map_err(|e| cuda_error(format!("creating the {which} stream of {device}"), e))
        };
        let compute = create("compute")?;
        let copy = create("copy")?;
        Ok(GpuStreams {
            ctx,
            compute,
            copy,
            device,
        })
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Makes the device's context current on the calling thread, as raw driver calls need.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(format!("making {}'s context current", self.device), e))
    }

    fn stream(&self, lane: Lane) -> &Arc<CudaStream> {
        match lane {
            Lane::Compute => &self.compute,
            Lane::Copy => &self.copy,
        }
    }

    fn lane_error(&self, lane: Lane, e: DriverError) -> crate::hal::BackendError {
        let what = match lane {
            Lane::Compute => "a kernel",
            Lane::Copy => "a copy",
        };
        cuda_error(format!("{what} on {}", self.device), e)
    }
}

impl Streams for GpuStreams {
    type Queue = CudaStream;
    type Event = GpuEvent;

    fn device(&self) -> Device {
        self.device
    }

    fn queue(&self, lane: Lane) -> &CudaStream {
        self.stream(lane)
    }

    fn record(&self, lane: Lane) -> Result<GpuEvent> {
        self.stream(lane)
            .record_event(None)
            .map(|event| GpuEvent {
                event,
                device: self.device,
            })
            .map_err(|e| cuda_error(format!("recording an event on {}", self.device), e))
    }

    fn order_after(&self, lane: Lane, event: &GpuEvent) -> Result<()> {
        self.stream(lane)
            .wait(&event.event)
            .map_err(|e| cuda_error(format!("ordering work on {}", self.device), e))
    }

    fn host_wait(&self, event: &GpuEvent) -> Result<()> {
        event.wait()
    }

    fn drain(&self, lane: Lane) -> Result<()> {
        self.stream(lane)
            .synchronize()
            .map_err(|e| self.lane_error(lane, e))
    }

    fn poll(&self, lane: Lane) -> Result<()> {
        self.bind()?;
        // SAFETY: the stream is live (owned by `self`) and its context is current.
        match unsafe { sys::cuStreamQuery(self.stream(lane).cu_stream()) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_NOT_READY => Ok(()),
            failed => Err(self.lane_error(lane, DriverError(failed))),
        }
    }

    fn sticky_error(&self) -> Result<()> {
        self.ctx
            .check_err()
            .map_err(|e| cuda_error(format!("an earlier call on {}", self.device), e))
    }
}

/// The completion of the work queued on a stream before it was recorded.
pub(crate) struct GpuEvent {
    event: CudaEvent,
    device: Device,
}

impl GpuEvent {
    /// Blocks until the work is done; an error if it failed (an asynchronous CUDA error).
    pub(crate) fn wait(&self) -> Result<()> {
        self.event
            .synchronize()
            .map_err(|e| cuda_error(format!("waiting for work on {}", self.device), e))
    }

    /// Whether the work is done, without blocking.
    pub(crate) fn is_done(&self) -> Result<bool> {
        self.event
            .try_is_complete()
            .map_err(|e| cuda_error(format!("querying work on {}", self.device), e))
    }
}

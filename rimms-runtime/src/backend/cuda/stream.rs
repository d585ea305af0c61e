//! The one stream a GPU's work goes on, and the events that say when part of it is done.
//!
//! The runtime waits for every copy and fill before it returns, and for every kernel right
//! after launching it (`Backend::completion`), so nothing it issues to a GPU overlaps anything
//! else it issued there. One stream per device therefore loses no concurrency the runtime
//! uses, and it orders work by construction: a kernel's inputs, copied in earlier, are on
//! the device before it starts, and work submitted from several threads runs in the order it
//! was submitted. (A stream per direction with a byte-range hazard tracker, as a stand-alone
//! asynchronous layer needs, would order the same work with much more code to get wrong.)

use super::{cuda_error, Result};
use crate::hal::Device;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::sync::Arc;

/// A device's context and its stream.
pub(crate) struct GpuStream {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    device: Device,
}

impl std::fmt::Debug for GpuStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuStream")
            .field("device", &self.device)
            .finish()
    }
}

impl GpuStream {
    /// Creates the stream of `device` on `ctx`.
    pub(crate) fn new(ctx: Arc<CudaContext>, device: Device) -> Result<GpuStream> {
        let stream = ctx
            .new_stream()
            .map_err(|e| cuda_error(format!("creating the stream of {device}"), e))?;
        Ok(GpuStream {
            ctx,
            stream,
            device,
        })
    }

    /// The device the stream is on.
    pub(crate) fn device(&self) -> Device {
        self.device
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Makes the device's context current on the calling thread, as raw driver calls need.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(format!("making {}'s context current", self.device), e))
    }

    /// An event after the work queued so far.
    pub(crate) fn record(&self) -> Result<GpuEvent> {
        self.stream
            .record_event(None)
            .map(|event| GpuEvent {
                event,
                device: self.device,
            })
            .map_err(|e| cuda_error(format!("recording an event on {}", self.device), e))
    }

    /// Makes later work on this stream wait for `event` (of this device or another: a peer
    /// copy waits for its source device's work).
    pub(crate) fn wait_for(&self, event: &GpuEvent) -> Result<()> {
        self.stream
            .wait(&event.event)
            .map_err(|e| cuda_error(format!("ordering work on {}", self.device), e))
    }

    /// Blocks until the work queued so far is done; an error if some of it failed. Should
    /// not even an event be recorded, the whole stream is waited out before the error is
    /// returned, so that nothing the caller queued (a copy into its memory) is still running.
    pub(crate) fn finish(&self) -> Result<()> {
        match self.record() {
            Ok(event) => event.wait(),
            Err(e) => {
                if let Err(also) = self.stream.synchronize() {
                    tracing::warn!("waiting out unrecorded work on {}: {also}", self.device);
                }
                Err(e)
            }
        }
    }

    /// Blocks until the stream is idle and reports how its work ended: `Ok`, or the
    /// asynchronous error a kernel raised (an illegal address, a launch failure).
    pub(crate) fn status(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| cuda_error(format!("a kernel on {}", self.device), e))?;
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

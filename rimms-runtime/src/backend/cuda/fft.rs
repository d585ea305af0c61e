//! cuFFT plans, made once per transform shape and kept.
//!
//! Making a cuFFT plan picks an algorithm and allocates its work area: milliseconds, and a
//! device allocation, which a frame loop must not pay per call. So plans are cached per
//! `(points, batch)` and reused; the cache hands out the same plan (same handle) every time.
//! A C2C plan serves both directions (the direction is an argument of the execution), so
//! the direction is not part of the key: a forward and an inverse transform of one shape
//! share one plan and one work area. Every plan runs on the device's compute stream, so two
//! executions of a plan never use its work area at once (FIFO) and a copy on the copy stream
//! never waits for one.
//!
//! cuFFT does not scale the inverse transform; the caller ([`super::kernels`]) scales by
//! 1/N with a kernel right after it, on the same (compute) stream.

use super::stream::{GpuStreams, Streams, Work};
use super::{cuda_error, Result};
use crate::hal::BackendError;
use cudarc::cufft::{result as fft, sys as fft_sys};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A cuFFT plan for complex-to-complex transforms of one shape, bound to its device's
/// compute stream.
#[derive(Debug)]
pub(crate) struct FftPlan {
    handle: fft_sys::cufftHandle,
    streams: Arc<GpuStreams>,
}

impl FftPlan {
    pub(crate) fn raw(&self) -> fft_sys::cufftHandle {
        self.handle
    }
}

impl Drop for FftPlan {
    fn drop(&mut self) {
        if self.streams.bind().is_ok() {
            // SAFETY: the handle came from `plan_1d` and is destroyed once, here; the plan is
            // dropped only when no execution can still reference it (the kernels that use it
            // hold an `Arc`, and the space waits for both streams before its parts are
            // dropped).
            if let Err(e) = unsafe { fft::destroy(self.handle) } {
                tracing::warn!("cufftDestroy on {}: {e}", self.streams.device());
            }
        }
    }
}

/// The plans of one device.
pub(crate) struct FftPlans {
    streams: Arc<GpuStreams>,
    plans: Mutex<HashMap<(usize, usize), Arc<FftPlan>>>,
}

impl FftPlans {
    pub(crate) fn new(streams: Arc<GpuStreams>) -> Self {
        FftPlans {
            streams,
            plans: Mutex::new(HashMap::new()),
        }
    }

    /// The plan for `(points, batch)`, made on first use.
    pub(crate) fn get(&self, points: usize, batch: usize) -> Result<Arc<FftPlan>> {
        // Inserting is the only update, so a poisoned lock holds a consistent map.
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(plan) = plans.get(&(points, batch)) {
            return Ok(plan.clone());
        }
        let too_big = || {
            BackendError::unsupported(
                "fft",
                format!(
                    "{points} points × {batch} transforms: cuFFT 1-D plans take sizes up to {}",
                    i32::MAX
                ),
            )
        };
        let n = i32::try_from(points).map_err(|_| too_big())?;
        let b = i32::try_from(batch).map_err(|_| too_big())?;
        if points
            .checked_mul(batch)
            .is_none_or(|t| t > i32::MAX as usize)
        {
            return Err(too_big());
        }
        self.streams.bind()?;
        let what = |call: &str| {
            format!(
                "{call} for {points} points × {batch} on {}",
                self.streams.device()
            )
        };
        let handle = fft::plan_1d(n, fft_sys::cufftType::CUFFT_C2C, b)
            .map_err(|e| cuda_error(what("cufftPlan1d"), format!("{e:?}")))?;
        // From here the handle is owned by a plan, so every exit destroys it.
        let plan = FftPlan {
            handle,
            streams: self.streams.clone(),
        };
        let stream = self.streams.queue(Work::Fft.lane()).cu_stream();
        // SAFETY: a live plan and a live stream of the same context; the stream lives as long
        // as the plan (which holds the `Arc` of the streams).
        unsafe { fft::set_stream(plan.handle, stream as fft_sys::cudaStream_t) }
            .map_err(|e| cuda_error(what("cufftSetStream"), format!("{e:?}")))?;
        let plan = Arc::new(plan);
        plans.insert((points, batch), plan.clone());
        Ok(plan)
    }
}

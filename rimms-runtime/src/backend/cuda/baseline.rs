//! The baseline RIMMS is measured against: CEDR's GPU path, which allocates device memory for
//! every argument, copies the inputs in, runs the kernel, copies the output out and frees,
//! at every call, whatever is already on the device.
//!
//! [`run_baseline`] reproduces that for any built-in API, from host slices to a host slice.
//! [`BaselineAlloc::Driver`] is the faithful version: one `cuMemAlloc` and one `cuMemFree`
//! per argument per call, as CEDR's `cudaMalloc` / `cudaFree`. [`BaselineAlloc::Pool`] takes
//! the memory from the space's pool instead, to tell the cost of the transfers apart from
//! the cost of the driver's allocator.

use super::cuda_error;
use super::kernels::{GpuOp, Operand};
use super::lanes::Lane;
use super::memory::GpuAlloc;
use super::CudaBackend;
use crate::error::Result;
use cudarc::driver::{result, sys};

/// Where the baseline's per-call device buffers come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BaselineAlloc {
    /// `cuMemAlloc` / `cuMemFree` per argument per call, as CEDR does.
    #[default]
    Driver,
    /// Blocks of the space's pool, allocated and freed per call.
    Pool,
}

/// Runs `op` as the baseline does: allocate, copy `inputs` in, run, copy the output into
/// `output`, free. Each input must hold at least the bytes `op` reads and `output` at least
/// the bytes it writes (see [`GpuOp::bytes`]); the leading bytes are used. Returns when the
/// output is on the host.
pub fn run_baseline(
    backend: &CudaBackend,
    op: &GpuOp,
    inputs: &[&[u8]],
    output: &mut [u8],
    alloc: BaselineAlloc,
) -> Result<()> {
    let lens: Vec<usize> = inputs.iter().map(|s| s.len()).collect();
    let (need_in, need_out) = backend.kernels().check(op, &lens, output.len())?;
    match alloc {
        BaselineAlloc::Driver => run_driver(backend, op, inputs, &need_in, output, need_out),
        BaselineAlloc::Pool => {
            let mut blocks = Vec::new();
            let outcome = run_pool(backend, op, inputs, &need_in, output, need_out, &mut blocks);
            let mut freed = Ok(());
            for block in blocks {
                if let Err(e) = backend.memory().free(block) {
                    freed = freed.and(Err(e));
                }
            }
            outcome.and(freed)
        }
    }
}

fn run_pool(
    backend: &CudaBackend,
    op: &GpuOp,
    inputs: &[&[u8]],
    need_in: &[usize],
    output: &mut [u8],
    need_out: usize,
    blocks: &mut Vec<GpuAlloc>,
) -> Result<()> {
    let memory = backend.memory();
    let mut ranges = Vec::with_capacity(inputs.len());
    for (data, &need) in inputs.iter().zip(need_in) {
        let block = memory.alloc(need)?;
        let range = block.range();
        blocks.push(block);
        memory.copy_to_device(range, data.get(..need).unwrap_or(data))?;
        ranges.push(range);
    }
    let out_block = memory.alloc(need_out)?;
    let out = out_block.range();
    blocks.push(out_block);
    backend.kernels().run(op, &ranges, out)?;
    // `check` made sure the output holds `need_out` bytes; `min` only keeps this total.
    let out_len = need_out.min(output.len());
    let dst = &mut output[..out_len];
    memory.copy_to_host(out, dst)
}

/// Device buffers of one baseline call, freed (after the device is idle) on drop.
struct DriverBuffers<'a> {
    backend: &'a CudaBackend,
    ptrs: Vec<sys::CUdeviceptr>,
}

impl DriverBuffers<'_> {
    fn alloc(&mut self, bytes: usize) -> Result<sys::CUdeviceptr> {
        // SAFETY: the context is current (bound by the caller); the memory is written by a
        // copy or a kernel before it is read.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| {
            cuda_error(
                format!("cuMemAlloc of {bytes} bytes on {}", self.backend.name()),
                e,
            )
        })?;
        self.ptrs.push(ptr);
        Ok(ptr)
    }
}

impl Drop for DriverBuffers<'_> {
    fn drop(&mut self) {
        let lanes = self.backend.lanes();
        if let Err(e) = lanes.synchronize_all() {
            tracing::warn!("baseline call on {}: {e}", self.backend.name());
        }
        if lanes.bind().is_err() {
            return;
        }
        for ptr in self.ptrs.drain(..) {
            // SAFETY: each pointer came from `malloc_sync` and is freed once, after the
            // device is idle.
            if let Err(e) = unsafe { result::free_sync(ptr) } {
                tracing::warn!("cuMemFree on {}: {e}", self.backend.name());
            }
        }
    }
}

fn run_driver(
    backend: &CudaBackend,
    op: &GpuOp,
    inputs: &[&[u8]],
    need_in: &[usize],
    output: &mut [u8],
    need_out: usize,
) -> Result<()> {
    let lanes = backend.lanes();
    lanes.bind()?;
    let mut buffers = DriverBuffers {
        backend,
        ptrs: Vec::with_capacity(inputs.len() + 1),
    };
    let mut operands = Vec::with_capacity(inputs.len());
    for (data, &need) in inputs.iter().zip(need_in) {
        let ptr = buffers.alloc(need)?;
        let src = data.get(..need).unwrap_or(data);
        // Private buffers: no other work touches them, so no byte ranges to order by; the
        // copies go on the compute stream ahead of the kernel, as CEDR's cudaMemcpy does.
        lanes.submit(Lane::Compute, &[], &[], |stream| {
            // SAFETY: `ptr` holds at least `need` bytes; `src` is pageable memory the driver
            // reads before returning and that outlives the call.
            unsafe { result::memcpy_htod_async(ptr, src, stream.cu_stream()) }
                .map_err(|e| cuda_error(format!("baseline copy-in on {}", backend.name()), e))
        })?;
        operands.push(Operand { ptr, span: None });
    }
    let out = Operand {
        ptr: buffers.alloc(need_out)?,
        span: None,
    };
    backend.kernels().run_operands(op, &operands, out)?;
    // `check` made sure the output holds `need_out` bytes; `min` only keeps this total.
    let out_len = need_out.min(output.len());
    let dst = &mut output[..out_len];
    let ((), done) = lanes.submit(Lane::Compute, &[], &[], |stream| {
        // SAFETY: `out.ptr` holds `need_out` bytes; `dst` is borrowed mutably for the whole
        // call and the copy is waited for before returning.
        unsafe { result::memcpy_dtoh_async(dst, out.ptr, stream.cu_stream()) }
            .map_err(|e| cuda_error(format!("baseline copy-out on {}", backend.name()), e))
    })?;
    done.wait()?;
    drop(buffers);
    Ok(())
}

//! `gpu(n)` as a runtime device: the card tests of `tests/it/cards` on GPU 0 where there is one,
//! and the clean "no GPU" path of the builder everywhere.
//!
//! The tests that need a GPU are `#[ignore = "needs a GPU"]`, so a run without one lists them
//! as ignored rather than passed; the GPU kit runs them with `--include-ignored`. Run that way
//! without a GPU, each prints `skipped: no GPU (<reason>)`; with `RIMMS_REQUIRE_GPU=1` (as
//! `scripts/gpu-check.sh` sets it) that is a failure instead.

use crate::cards::{self, GPU_CARD};
use rimms::{Device, Error, Runtime};

/// Whether GPU 0 can be used; if not, says why (or fails where a GPU is required).
fn have_gpu() -> bool {
    match Runtime::builder().gpu(0).gpu_pool(1 << 20).build() {
        Ok(_) => true,
        Err(Error::NoGpu { why }) => {
            let required =
                std::env::var("RIMMS_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0");
            assert!(
                !required,
                "RIMMS_REQUIRE_GPU is set but there is no GPU: {why}"
            );
            println!("skipped: no GPU ({why})");
            false
        }
        Err(e) => panic!("a GPU is present but the runtime cannot use it: {e}"),
    }
}

#[test]
fn the_builder_says_whether_there_is_a_gpu_and_never_panics() {
    let rt = Runtime::builder()
        .gpu_if_available()
        .build()
        .expect("gpu_if_available never fails for want of a GPU");
    let gpus = rt
        .devices()
        .into_iter()
        .filter(|d| matches!(d, Device::Gpu(_)))
        .count();
    match Runtime::builder().gpu(0).build() {
        Ok(with_gpu) => {
            assert!(gpus >= 1, "gpu(0) opens but gpu_if_available found none");
            assert_eq!(
                with_gpu.space_name(with_gpu.space_of(Device::Gpu(0)).expect("gpu0")),
                "gpu0"
            );
        }
        Err(Error::NoGpu { why }) => {
            assert_eq!(gpus, 0);
            assert!(!why.trim().is_empty(), "a no-GPU error says why");
            assert!(Error::NoGpu { why: why.clone() }.to_string().contains(&why));
            // A call on the missing device is an error naming what there is, not a panic.
            let x = rimms::HeteData::from_slice(&rt, &[rimms::Complex32::new(1.0, 0.0); 64])
                .expect("x");
            let mut y = rimms::HeteData::alloc(&rt, 64).expect("y");
            let err = rt.conj(Device::Gpu(0), &x, &mut y).expect_err("no gpu0");
            assert!(err.to_string().contains("gpu0"), "{err}");
        }
        Err(e) => panic!("gpu(0) failed for another reason than no GPU: {e}"),
    }
}

#[test]
#[ignore = "needs a GPU"]
fn every_builtin_matches_the_cpu() {
    if have_gpu() {
        cards::every_builtin_on_device_memory_matches_the_cpu(&GPU_CARD);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn fft_matches_a_direct_dft() {
    if have_gpu() {
        cards::fft_on_device_memory_matches_a_direct_dft(&GPU_CARD);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn host_gpu_and_sim_move_exactly_the_protocols_bytes() {
    if have_gpu() {
        cards::host_card_and_sim_move_exactly_the_protocols_bytes(&GPU_CARD);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn fresh_buffers_are_zero_filled_on_the_gpu_not_sent() {
    if have_gpu() {
        cards::fresh_buffers_are_zero_filled_on_the_card_not_sent(&GPU_CARD);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn an_exhausted_gpu_pool_is_an_error_that_loses_nothing() {
    if have_gpu() {
        cards::an_exhausted_card_pool_is_an_error_that_loses_nothing(&GPU_CARD);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn baseline_stages_every_argument_through_the_gpu_every_call() {
    if have_gpu() {
        cards::baseline_stages_every_argument_through_the_card_every_call(&GPU_CARD);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn rows_move_at_their_own_offsets() {
    if have_gpu() {
        cards::rows_on_the_card_and_the_sim_move_at_their_own_offsets(&GPU_CARD);
    }
}

//! Link calibration: what copies between the host and each device memory really cost.
//!
//! The copy planner and the data-aware scheduler rank by a [`LinkModel`] per device link.
//! Configured models are guesses — a GPU in a narrower PCIe slot, a u-dma-buf behind a busier
//! port — and a scheduler that trusts a wrong guess keeps data on the wrong side. Calibration
//! times copies of a small and a large block each way through the path real transfers take
//! (memcpy, or the backend's copy for device memory), keeps the fastest of a few tries of each
//! (noise only ever adds time), and fits latency and bandwidth to the two sizes. The slower
//! direction wins, as it does for a copy that crosses two links.
//!
//! It runs once, when the runtime is built, before any buffer exists; its copies are not
//! counted in the stats, though its one pool block per device is.

use crate::hal::SpaceId;
use crate::hal::{During, Error, Result};
use crate::space::{LinkModel, MemorySystem};
use std::time::{Duration, Instant};

/// Tries per size and direction; the fastest counts.
const TRIES: usize = 5;
/// The large block, or a quarter of the device's pool if that is smaller.
const LARGE_BYTES: usize = 1 << 20;

/// Measures the link of every space of `memory` that has one and records the fitted model.
pub(crate) fn calibrate_links<B>(memory: &MemorySystem<B>) -> Result<()> {
    for index in 1..memory.space_count() {
        let space = SpaceId(index as u8);
        let Some((configured, simulated)) = memory.configured_link(space) else {
            continue;
        };
        let pool = memory.pool(space);
        let large = (pool.capacity() / 4).min(LARGE_BYTES);
        let small = (large / 64).max(1);
        let block = pool.alloc(large)?;
        let mut host = vec![0u8; large];
        let host_ptr = host.as_mut_ptr();
        let timed = |bytes: usize| -> Result<Duration> {
            let into = fastest_copy(memory, SpaceId::HOST, space, host_ptr, block.ptr(), bytes)?;
            let out = fastest_copy(memory, space, SpaceId::HOST, block.ptr(), host_ptr, bytes)?;
            // A simulated link's copy takes at least its modelled time.
            let modelled = if simulated {
                configured.duration(bytes)
            } else {
                Duration::ZERO
            };
            Ok(into.max(out).max(modelled))
        };
        let measured = timed(small).and_then(|s| Ok(fit(small, s, large, timed(large)?)));
        pool.free(block);
        let measured = measured?;
        tracing::info!(
            space = %memory.space_name(space),
            latency_ns = measured.latency.as_nanos() as u64,
            gb_per_s = measured.bytes_per_second / 1e9,
            "calibrated link"
        );
        memory.set_measured_link(space, measured);
    }
    Ok(())
}

/// The fastest of [`TRIES`] copies of `bytes` from `src` in `from` to `dst` in `to`.
fn fastest_copy<B>(
    memory: &MemorySystem<B>,
    from: SpaceId,
    to: SpaceId,
    src: *mut u8,
    dst: *mut u8,
    bytes: usize,
) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..TRIES {
        let started = Instant::now();
        memory
            .move_bytes(from, to, src, dst, 0..bytes)
            .map_err(|source| {
                Error::from_backend(
                    During::Transfer {
                        from: memory.named(from),
                        to: memory.named(to),
                        bytes,
                    },
                    source,
                )
            })?;
        best = best.min(started.elapsed());
    }
    Ok(best)
}

/// The latency-plus-bandwidth model through two measured copies: `small` bytes taking
/// `t_small` and `large` bytes taking `t_large`. If the larger copy was not slower (a link
/// too fast to tell the sizes apart), the whole of its time counts as bandwidth. The model
/// is clamped into the bounds the builder holds configured links to ([`LinkModel`]): a copy
/// the clock could not see, or one stalled by a suspended machine, must not leave a link
/// that looks free or one that costs hours.
fn fit(small: usize, t_small: Duration, large: usize, t_large: Duration) -> LinkModel {
    let fitted = fit_line(small, t_small, large, t_large);
    let clamped = fitted.clamped();
    if clamped != fitted {
        tracing::debug!(
            ?fitted,
            ?clamped,
            "calibrated link model clamped into bounds"
        );
    }
    clamped
}

/// [`fit`] before clamping.
fn fit_line(small: usize, t_small: Duration, large: usize, t_large: Duration) -> LinkModel {
    let (ts, tl) = (t_small.as_secs_f64(), t_large.as_secs_f64());
    if tl > ts && large > small {
        let per_byte = (tl - ts) / (large - small) as f64;
        LinkModel {
            latency: Duration::from_secs_f64((ts - small as f64 * per_byte).max(0.0)),
            bytes_per_second: 1.0 / per_byte,
        }
    } else {
        LinkModel {
            latency: t_small,
            bytes_per_second: large as f64 / tl.max(1e-9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_latency_and_bandwidth_model() {
        // 10 µs + 1 GB/s: 4 KiB takes 14.096 µs, 1 MiB 1,058.576 µs.
        let model = fit(
            4096,
            Duration::from_nanos(14_096),
            1 << 20,
            Duration::from_nanos(1_058_576),
        );
        assert!((model.bytes_per_second - 1e9).abs() < 1e3, "{model:?}");
        assert!(
            model.latency.abs_diff(Duration::from_micros(10)) < Duration::from_nanos(2),
            "{model:?}"
        );
    }

    #[test]
    fn a_large_copy_no_slower_than_a_small_one_counts_as_bandwidth() {
        let t = Duration::from_micros(3);
        let model = fit(4096, t, 1 << 20, t);
        assert_eq!(model.latency, t);
        // The large copy's cost under the model is at least what it took.
        assert!(model.cost_ns(1 << 20) >= 3000);
    }

    #[test]
    fn a_fit_outside_the_bounds_of_a_link_model_is_clamped_into_them() {
        // 1 MiB in a nanosecond (a copy the clock could not see): 1e15 B/s, beyond any link.
        let t = Duration::from_nanos(1);
        let model = fit(4096, t, 1 << 20, t);
        assert_eq!(model.bytes_per_second, 1e13, "{model:?}");
        // Copies stalled for an hour (a suspended machine): below any bound the builder
        // accepts, and a latency of most of that hour.
        let model = fit(
            4096,
            Duration::from_secs(3600),
            1 << 20,
            Duration::from_secs(7200),
        );
        assert_eq!(model.bytes_per_second, 1e3, "{model:?}");
        assert_eq!(model.latency, Duration::from_secs(1), "{model:?}");
    }
}

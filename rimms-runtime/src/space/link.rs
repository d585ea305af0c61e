//! Link cost model: how long moving bytes between two spaces is expected to take.
//!
//! The coherence layer uses it to pick the cheapest valid source of a fragment; the sim backend
//! can also make a copy really take that long, so that a ZCU102- or PCIe-like platform can be
//! played on any machine.

use std::time::{Duration, Instant};

/// Latency plus bytes over bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkModel {
    /// Fixed cost of one copy.
    pub latency: Duration,
    /// Sustained bandwidth in bytes per second.
    pub bytes_per_second: f64,
}

impl LinkModel {
    /// A PCIe-4-like link: 5 µs per copy, 12 GB/s.
    pub const PCIE: LinkModel = LinkModel {
        latency: Duration::from_micros(5),
        bytes_per_second: 12e9,
    };

    /// A Zynq UltraScale+ HP-port-like link: 2 µs per copy, 1.2 GB/s.
    pub const ZYNQ_HP: LinkModel = LinkModel {
        latency: Duration::from_micros(2),
        bytes_per_second: 1.2e9,
    };

    /// Expected time of one copy of `bytes`, in nanoseconds (what source selection compares).
    pub fn cost_ns(&self, bytes: usize) -> u64 {
        let transfer = if self.bytes_per_second > 0.0 {
            bytes as f64 * 1e9 / self.bytes_per_second
        } else {
            0.0
        };
        (self.latency.as_nanos() as f64 + transfer) as u64
    }

    /// Expected time of one copy of `bytes`.
    pub fn duration(&self, bytes: usize) -> Duration {
        Duration::from_nanos(self.cost_ns(bytes))
    }

    /// Holds the caller until a copy of `bytes` that started at `started` would have finished
    /// on this link: how a simulated link makes a real copy take the modelled time. Sleeps for
    /// the bulk and spins for the last stretch, since sleeps are far too coarse for microsecond
    /// latencies.
    pub fn hold(&self, started: Instant, bytes: usize) {
        const SPIN: Duration = Duration::from_micros(200);
        let deadline = started + self.duration(bytes);
        loop {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            let left = deadline - now;
            if left > SPIN {
                std::thread::sleep(left - SPIN);
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

impl Default for LinkModel {
    fn default() -> Self {
        LinkModel::PCIE
    }
}

//! Link cost model: how long moving bytes between two spaces is expected to take.
//!
//! The coherence layer uses it to pick the cheapest valid source of a fragment; the sim backend
//! can also make a copy really take that long, so that a ZCU102- or PCIe-like platform can be
//! played on any machine.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latency plus bytes over bandwidth.
///
/// A runtime accepts a link's model only within [`LinkModel::MIN_BYTES_PER_SECOND`] ..=
/// [`LinkModel::MAX_BYTES_PER_SECOND`] and a latency of at most [`LinkModel::MAX_LATENCY`]:
/// a simulated link sleeps through its model on every copy, so a bandwidth of 1e-300 B/s or a
/// latency of `Duration::MAX` would make each copy take centuries, and a model that is not a
/// finite positive number ranks copy sources by nonsense even where it is not slept through.
/// (A [`crate::CostTable`]'s models only estimate kernel times and are not bounded so.)
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

    /// The slowest link a runtime accepts: 1 kB/s, a thousand times slower than the slowest
    /// link any configuration here models (a sim at 1 MB/s in the scheduling tests; the
    /// ZCU102's uncached A53 copy is 150 MB/s).
    pub const MIN_BYTES_PER_SECOND: f64 = 1e3;

    /// The fastest link a runtime accepts: 10 TB/s, above HBM3e and any host link (a PCIe 5
    /// GPU is modelled at 40 GB/s).
    pub const MAX_BYTES_PER_SECOND: f64 = 1e13;

    /// The longest fixed cost of one copy a runtime accepts: one second, where real links take
    /// microseconds and the slowest model here (a deliberately wrong one in the scheduling
    /// tests) takes exactly this.
    pub const MAX_LATENCY: Duration = Duration::from_secs(1);

    /// What is wrong with this model as a link's, naming the field, or `None` if it is within
    /// the bounds above.
    pub(crate) fn problem(&self) -> Option<String> {
        let bps = self.bytes_per_second;
        if !(Self::MIN_BYTES_PER_SECOND..=Self::MAX_BYTES_PER_SECOND).contains(&bps) {
            return Some(format!(
                "bytes_per_second is {bps:e}; a link's bandwidth must be a number from {:e} to {:e} bytes per second",
                Self::MIN_BYTES_PER_SECOND,
                Self::MAX_BYTES_PER_SECOND
            ));
        }
        if self.latency > Self::MAX_LATENCY {
            return Some(format!(
                "latency is {:?}; a link's latency may be at most {:?}",
                self.latency,
                Self::MAX_LATENCY
            ));
        }
        None
    }

    /// The model moved into the bounds a runtime accepts: for models fitted to measurements,
    /// where a copy too fast for the clock or a stalled machine is noise, not a mistake.
    pub(crate) fn clamped(self) -> LinkModel {
        let bps = if self.bytes_per_second.is_nan() {
            // Only a fit of nonsense gives NaN; the slowest link makes nothing look cheap.
            Self::MIN_BYTES_PER_SECOND
        } else {
            self.bytes_per_second
                .clamp(Self::MIN_BYTES_PER_SECOND, Self::MAX_BYTES_PER_SECOND)
        };
        LinkModel {
            latency: self.latency.min(Self::MAX_LATENCY),
            bytes_per_second: bps,
        }
    }

    /// Expected time of one copy of `bytes`, in nanoseconds (what source selection compares).
    pub fn cost_ns(&self, bytes: usize) -> u64 {
        let transfer = if self.bytes_per_second > 0.0 {
            bytes as f64 * 1e9 / self.bytes_per_second
        } else {
            0.0
        };
        // Through u64, not straight from u128: a u128's conversion to f64 is a software
        // routine of about 45 instructions, and this is asked per fragment a call plans.
        (self.latency_ns() as f64 + transfer) as u64
    }

    /// The latency in whole nanoseconds (saturating), the unit costs are counted in.
    pub(crate) fn latency_ns(&self) -> u64 {
        u64::try_from(self.latency.as_nanos()).unwrap_or(u64::MAX)
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
        wait_until(started + self.duration(bytes));
    }
}

/// Waits until `deadline`: sleeps for the bulk and spins for the last stretch, since sleeps are
/// far too coarse for microsecond latencies.
pub(crate) fn wait_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(200);
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

/// When a simulated link is next free. Copies over one link take turns, as on a real bus, so
/// concurrent calls get no bandwidth the link does not have.
#[derive(Debug, Default)]
pub(crate) struct Occupancy(Mutex<Option<Instant>>);

impl Occupancy {
    /// Books `duration` on every one of `links` (one copy crosses at most two: its source's
    /// and its destination's), starting at `now` or when the last of them is free, whichever
    /// is later; returns when the copy ends. An array rather than a vector: a copy over a
    /// sim card's link booked it on every copy, and the two vectors were two allocations.
    pub(crate) fn book(
        links: [Option<&Occupancy>; 2],
        now: Instant,
        duration: Duration,
    ) -> Instant {
        // One lock order for every pair, by address: a copy from card 0 to card 1 and one
        // from card 1 to card 0 name the same two links in opposite orders, and locked as
        // named they could each hold one and wait for the other. One link named twice is
        // locked once.
        let links = match links {
            [Some(x), Some(y)] if std::ptr::eq(x, y) => [Some(x), None],
            [Some(x), Some(y)] if std::ptr::from_ref(x) > std::ptr::from_ref(y) => {
                [Some(y), Some(x)]
            }
            links => links,
        };
        let mut guards = links.map(|l| l.map(|l| l.0.lock().unwrap_or_else(|e| e.into_inner())));
        let start = (guards.iter().flatten())
            .filter_map(|g| **g)
            .fold(now, |a, b| a.max(b));
        let end = start + duration;
        for g in guards.iter_mut().flatten() {
            **g = Some(end);
        }
        end
    }
}

/// A copy whose data has moved but whose modelled link time may not have passed yet: the caller
/// waits for it once it holds no lock, so a simulated transfer never blocks calls on other
/// fragments of the same buffer.
#[must_use = "a simulated copy is not over until it is waited for"]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pending(Option<Instant>);

impl Pending {
    pub(crate) const NONE: Pending = Pending(None);

    pub(crate) fn until(deadline: Instant) -> Pending {
        Pending(Some(deadline))
    }

    /// When the modelled copy ends, if it is simulated.
    pub(crate) fn deadline(self) -> Option<Instant> {
        self.0
    }

    /// The later of two.
    pub(crate) fn and(self, other: Pending) -> Pending {
        Pending(self.0.max(other.0))
    }

    /// Waits out the modelled time.
    pub(crate) fn wait(self) {
        if let Some(deadline) = self.0 {
            wait_until(deadline);
        }
    }
}

impl Default for LinkModel {
    fn default() -> Self {
        LinkModel::PCIE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_models_are_within_the_bounds_and_clamping_keeps_them() {
        for m in [LinkModel::PCIE, LinkModel::ZYNQ_HP] {
            assert_eq!(m.problem(), None, "{m:?}");
            assert_eq!(m.clamped(), m);
        }
    }

    #[test]
    fn clamping_moves_every_field_into_bounds() {
        for bps in [f64::NAN, -1.0, 0.0, 1e-300, f64::INFINITY, 1e300] {
            let m = LinkModel {
                latency: Duration::MAX,
                bytes_per_second: bps,
            };
            assert!(m.problem().is_some(), "{m:?}");
            assert_eq!(m.clamped().problem(), None, "{m:?}");
        }
    }

    /// Copies between two cards in both directions at once book the same two links in
    /// opposite orders: each must still finish (one lock order for every pair), and a copy
    /// whose two links are one (both ends on one card) books it once.
    #[test]
    fn bookings_in_opposite_directions_and_on_one_link_finish() {
        let step = Duration::from_nanos(1);
        let rounds: u32 = if cfg!(miri) { 50 } else { 200_000 };
        let (a, b, now, last) =
            crate::liveness::finishes("links booked in opposite orders", move || {
                let (a, b) = (Occupancy::default(), Occupancy::default());
                let now = Instant::now();
                let book = |links: [&Occupancy; 2]| {
                    for _ in 0..rounds {
                        Occupancy::book(links.map(Some), now, step);
                    }
                };
                std::thread::scope(|s| {
                    s.spawn(|| book([&a, &b]));
                    s.spawn(|| book([&b, &a]));
                });
                let last = Occupancy::book([Some(&a), Some(&a)], now, step);
                (a, b, now, last)
            });
        // Every booking starts when both links are free: 2 · rounds bookings of one step
        // each, then one more on `a` alone.
        assert_eq!(last, now + step * (2 * rounds + 1));
        assert_eq!(*a.0.lock().unwrap(), Some(last));
        assert_eq!(*b.0.lock().unwrap(), Some(now + step * 2 * rounds));
    }
}

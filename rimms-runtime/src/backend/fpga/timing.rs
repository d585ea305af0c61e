//! An optional timing model, so the emulator's FPGA rows can be held against a board's.
//!
//! Without one the emulator completes a transfer as soon as it sees it, and host copies into
//! the u-dma-buf run at this machine's memcpy speed: fine for correctness, meaningless for
//! ratios. With one, a DMA transfer completes after the time the model gives it, every
//! register access of the driver takes the modelled bus latency, and the runtime's copies
//! between host memory and the u-dma-buf run at the modelled A53 memcpy bandwidth (the
//! runtime's simulated links). The CPU's own kernels still run at this machine's speed, so a
//! modelled figure is "this machine's CPU, ZCU102's FPGA path": label it as modelled.
//!
//! [`TimingModel::zcu102`] gives each constant's source; where no datasheet gives a number,
//! the doc says it is an assumption to be replaced by a measurement on a board.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The modelled costs of the FPGA path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingModel {
    /// The name shown with modelled figures.
    pub name: String,
    /// Clock of the AXI DMA and the cores (Hz).
    pub pl_clock_hz: f64,
    /// Bytes per clock on the FFT's AXI-Stream (one complex f32 sample).
    pub fft_stream_bytes: f64,
    /// Bytes per clock on the ZIP's AXI-Stream (one f32).
    pub zip_stream_bytes: f64,
    /// Fixed cost of one DMA transfer: descriptor-free start-up and the memory's first access.
    pub dma_setup_ns: u64,
    /// FFT core latency, in clocks per point, on top of streaming the frame in and out.
    pub fft_latency_clocks_per_point: f64,
    /// A53 memcpy into a cached u-dma-buf (bytes per second).
    pub cpu_copy_cached_bps: f64,
    /// A53 memcpy into an uncached (O_SYNC) u-dma-buf (bytes per second).
    pub cpu_copy_uncached_bps: f64,
    /// Fixed cost of one host copy (call overhead, first-touch).
    pub cpu_copy_latency_ns: u64,
    /// One AXI-Lite register write from the A53 (posted).
    pub register_write_ns: u64,
    /// One AXI-Lite register read from the A53 (a full round trip to the PL).
    pub register_read_ns: u64,
    /// One cache-maintenance request on a cached u-dma-buf: the sysfs write (`sync_for_cpu` /
    /// `sync_for_device`) and its syscall, before any line is touched.
    #[serde(default = "default_sync_call_ns")]
    pub sync_call_ns: u64,
    /// Cache maintenance by line over the range (clean or invalidate by VA), bytes per second.
    #[serde(default = "default_sync_bps")]
    pub sync_bps: f64,
    /// The u-dma-buf is mapped uncached (opened `O_SYNC`, as CEDR's drivers open it): no cache
    /// maintenance, and every A53 copy into or out of it, and every pass over it inside a
    /// driver call, runs at `cpu_copy_uncached_bps`.
    #[serde(default)]
    pub uncached_udmabuf: bool,
}

fn default_sync_call_ns() -> u64 {
    5_000
}

fn default_sync_bps() -> f64 {
    2.0e9
}

impl TimingModel {
    /// A ZCU102 (Zynq UltraScale+ XCZU9EG) running CEDR's image.
    ///
    /// - `pl_clock_hz` 100 MHz: the default PL clock (`pl_clk0`) of a Zynq UltraScale+ block
    ///   design; CEDR's image does not publish its clock, so this is an assumption.
    /// - Stream widths: the FFT core's data path is one complex f32 (64 bits) per sample
    ///   (PG109, floating-point, natural order); CEDR's ZIP streams f32 (32 bits).
    /// - DMA: PG021 gives simple-mode throughput close to one stream beat per clock
    ///   (stream width × clock); `dma_setup_ns` 1 µs is an assumption for the first DDR
    ///   access through the HP port.
    /// - `fft_latency_clocks_per_point` 1: the pipelined streaming architecture of PG109 takes
    ///   one sample per clock and has a latency of about one frame before output starts.
    /// - A53 memcpy: 1.2 GB/s cached and 0.15 GB/s uncached are assumptions (typical of a
    ///   1.2 GHz Cortex-A53 on DDR4; reading an uncached mapping is an order of magnitude
    ///   slower than a cached one), to be measured on the board.
    /// - Register access: 30 ns per posted write and 200 ns per read are assumptions for
    ///   AXI-Lite through M_AXI_HPM0_FPD.
    /// - Cache maintenance: 5 µs per request (a write to a sysfs attribute: open, write and
    ///   the driver's range check on a 1.2 GHz A53) and 2 GB/s by line over the range (`dc
    ///   civac` per 64-byte line, bounded by the DDR write-back of dirty lines) are
    ///   assumptions, to be measured on the board.
    pub fn zcu102() -> Self {
        Self {
            name: "zcu102".to_owned(),
            pl_clock_hz: 100e6,
            fft_stream_bytes: 8.0,
            zip_stream_bytes: 4.0,
            dma_setup_ns: 1_000,
            fft_latency_clocks_per_point: 1.0,
            cpu_copy_cached_bps: 1.2e9,
            cpu_copy_uncached_bps: 0.15e9,
            cpu_copy_latency_ns: 2_000,
            register_write_ns: 30,
            register_read_ns: 200,
            sync_call_ns: default_sync_call_ns(),
            sync_bps: default_sync_bps(),
            uncached_udmabuf: false,
        }
    }

    /// [`TimingModel::zcu102`] with the u-dma-buf mapped uncached, as CEDR maps it (`O_SYNC`
    /// on `/dev/udmabufN`): the condition under which the paper's baseline copies ran.
    pub fn zcu102_uncached() -> Self {
        Self {
            name: "zcu102-uncached".to_owned(),
            uncached_udmabuf: true,
            ..Self::zcu102()
        }
    }

    /// The host-side costs the virtual clock charges under this model.
    pub fn costs(&self) -> crate::vclock::ModelCosts {
        crate::vclock::ModelCosts {
            copy_cached_bps: self.cpu_copy_cached_bps,
            copy_uncached_bps: self.cpu_copy_uncached_bps,
            copy_latency_ns: self.cpu_copy_latency_ns,
            sync_call_ns: self.sync_call_ns,
            sync_bps: self.sync_bps,
        }
    }

    /// The names [`TimingModel::by_name`] knows.
    pub const NAMES: &'static str = "zcu102, zcu102-uncached";

    /// A model by name (`zcu102`, `zcu102-uncached`), for command lines and environment
    /// variables.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "zcu102" => Some(Self::zcu102()),
            "zcu102-uncached" => Some(Self::zcu102_uncached()),
            _ => None,
        }
    }

    /// Refuses a model that cannot time a transfer or a copy: [`Self::fft_phases`] and
    /// [`Self::zip_phases`] divide by the clock and the stream widths, and
    /// `Duration::from_secs_f64` panics on an infinite, NaN, negative or too large result,
    /// so every rate must be finite and within a range that keeps the longest transfer
    /// (2^26 bytes) a representable time. The error names the field.
    pub fn check(&self) -> std::result::Result<(), String> {
        let fields = [
            ("pl_clock_hz", self.pl_clock_hz, 1e3, 1e12),
            ("fft_stream_bytes", self.fft_stream_bytes, 1.0, 4096.0),
            ("zip_stream_bytes", self.zip_stream_bytes, 1.0, 4096.0),
            (
                "fft_latency_clocks_per_point",
                self.fft_latency_clocks_per_point,
                0.0,
                1e6,
            ),
            ("cpu_copy_cached_bps", self.cpu_copy_cached_bps, 1e3, 1e13),
            (
                "cpu_copy_uncached_bps",
                self.cpu_copy_uncached_bps,
                1e3,
                1e13,
            ),
            ("sync_bps", self.sync_bps, 1e3, 1e13),
        ];
        for (name, v, lo, hi) in fields {
            // `contains` is false for NaN.
            if !(lo..=hi).contains(&v) {
                return Err(format!("timing.{name}: {v} is not in {lo}..={hi}"));
            }
        }
        Ok(())
    }

    fn clocks(&self, n: f64) -> Duration {
        Duration::from_secs_f64(n / self.pl_clock_hz)
    }

    /// One FFT packet of `bytes` through DMA and core, phase by phase: stream in, core latency,
    /// stream out.
    pub fn fft_phases(&self, bytes: usize) -> Phases {
        let points = bytes as f64 / self.fft_stream_bytes;
        Phases {
            setup: Duration::from_nanos(self.dma_setup_ns),
            mm2s: self.clocks(points),
            core: self.clocks(points * self.fft_latency_clocks_per_point),
            s2mm: self.clocks(points),
        }
    }

    /// One ZIP packet of `bytes` (both inputs) through DMA and core: stream in, one result per
    /// input pair as it streams (no latency of its own), stream out (half the input).
    pub fn zip_phases(&self, bytes: usize) -> Phases {
        let beats = bytes as f64 / self.zip_stream_bytes;
        Phases {
            setup: Duration::from_nanos(self.dma_setup_ns),
            mm2s: self.clocks(beats),
            core: Duration::ZERO,
            s2mm: self.clocks(beats / 2.0),
        }
    }

    /// One FFT packet's whole time ([`TimingModel::fft_phases`] end to end).
    pub fn fft_transfer(&self, bytes: usize) -> Duration {
        self.fft_phases(bytes).total()
    }

    /// One ZIP packet's whole time ([`TimingModel::zip_phases`] end to end).
    pub fn zip_transfer(&self, bytes: usize) -> Duration {
        self.zip_phases(bytes).total()
    }
}

/// One transfer's modelled time by part: the DMA's start-up, the MM2S channel streaming the
/// input, the core's latency, the S2MM channel streaming the output. They follow one another
/// (one packet at a time: the driver waits for each before the next).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    /// The DMA's start-up (`dma_setup_ns`).
    pub setup: Duration,
    /// The MM2S channel streaming the packet into the core.
    pub mm2s: Duration,
    /// The core's latency beyond streaming.
    pub core: Duration,
    /// The S2MM channel streaming the result out.
    pub s2mm: Duration,
}

impl Phases {
    /// The transfer end to end.
    pub fn total(&self) -> Duration {
        self.setup + self.mm2s + self.core + self.s2mm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_times_follow_the_stream_rates() {
        let m = TimingModel::zcu102();
        // 256 points: 256 clocks in, 256 of latency, 256 out at 10 ns, plus 1 µs.
        assert_eq!(m.fft_transfer(256 * 8), Duration::from_nanos(1_000 + 7_680));
        // 2 × 1024 floats in, 1024 out: 3072 clocks.
        assert_eq!(
            m.zip_transfer(2 * 1024 * 4),
            Duration::from_nanos(1_000 + 30_720)
        );
        assert!(TimingModel::by_name("zcu102").is_some());
        assert!(TimingModel::by_name("zcu102-uncached").is_some_and(|m| m.uncached_udmabuf));
        assert!(TimingModel::by_name("vcu128").is_none());
    }
}

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
        }
    }

    /// A model by name (`zcu102`), for command lines and environment variables.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "zcu102" => Some(Self::zcu102()),
            _ => None,
        }
    }

    fn clocks(&self, n: f64) -> Duration {
        Duration::from_secs_f64(n / self.pl_clock_hz)
    }

    /// One FFT frame of `bytes` through DMA and core: stream in, core latency, stream out.
    pub fn fft_transfer(&self, bytes: usize) -> Duration {
        let points = bytes as f64 / self.fft_stream_bytes;
        Duration::from_nanos(self.dma_setup_ns)
            + self.clocks(points * (2.0 + self.fft_latency_clocks_per_point))
    }

    /// One ZIP packet of `bytes` (both inputs) through DMA and core: stream in, one result per
    /// input pair, stream out (half the input).
    pub fn zip_transfer(&self, bytes: usize) -> Duration {
        let beats = bytes as f64 / self.zip_stream_bytes;
        Duration::from_nanos(self.dma_setup_ns) + self.clocks(beats * 1.5)
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
        assert!(TimingModel::by_name("vcu128").is_none());
    }
}

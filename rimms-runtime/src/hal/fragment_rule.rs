//! The fragment-size rule of the RIMMS material: `fragment_size = max(L2 line, DMA burst
//! length, warp size × dtype size)` over the devices present, rounded up to a power of two and
//! bounded by the pools' allocation granule. Each backend reports its [`DeviceGrain`]; the
//! runtime keeps the [`FragmentRule`] of its devices (`Runtime::fragment_rule`) and, where
//! `RuntimeBuilder::fragments_from_devices` says so, allocates with it instead of the fixed
//! 4 KiB.

use super::Device;

/// What one device's memory system moves at once: the quantities the rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceGrain {
    /// Bytes of a line of its last-level (L2) cache: what one miss brings in.
    pub l2_line: usize,
    /// Bytes of one DMA burst into its memory; 0 where it has no DMA engine of its own.
    pub dma_burst: usize,
    /// Threads that access memory together (a GPU warp); 1 where accesses are not grouped.
    pub warp: usize,
}

impl DeviceGrain {
    /// A device that reaches memory through a 64-byte cache line, with no DMA engine or warp
    /// of its own: what a backend that reports nothing else is taken to be.
    pub const CACHE_LINE_64: DeviceGrain = DeviceGrain {
        l2_line: 64,
        dma_burst: 0,
        warp: 1,
    };

    /// The bytes this device alone would have a fragment of `elem_size`-byte elements cover.
    pub fn bytes_for(&self, elem_size: usize) -> usize {
        self.l2_line
            .max(self.dma_burst)
            .max(self.warp.saturating_mul(elem_size))
    }
}

/// The fragment size the devices of a runtime call for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentRule {
    devices: Vec<(Device, DeviceGrain)>,
    granule: usize,
}

impl FragmentRule {
    /// The rule over `devices`, bounded by the pools' `granule` (a power of two).
    pub fn new(devices: Vec<(Device, DeviceGrain)>, granule: usize) -> FragmentRule {
        FragmentRule { devices, granule }
    }

    /// The devices and what each reported.
    pub fn devices(&self) -> &[(Device, DeviceGrain)] {
        &self.devices
    }

    /// The fragment size for elements of `elem_size` bytes (a power of two, as every element
    /// type of a buffer is): the largest of the devices' [`DeviceGrain::bytes_for`], rounded
    /// up to a power of two, at most the pool granule, and never less than one element.
    pub fn bytes_for(&self, elem_size: usize) -> usize {
        let elem = elem_size.max(1);
        let widest = self
            .devices
            .iter()
            .map(|(_, g)| g.bytes_for(elem))
            .max()
            .unwrap_or(0)
            .max(elem);
        widest
            .checked_next_power_of_two()
            .unwrap_or(self.granule)
            .min(self.granule)
            .max(elem.next_power_of_two())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: DeviceGrain = DeviceGrain::CACHE_LINE_64;
    const GPU: DeviceGrain = DeviceGrain {
        l2_line: 128,
        dma_burst: 0,
        warp: 32,
    };
    const FPGA: DeviceGrain = DeviceGrain {
        l2_line: 64,
        dma_burst: 256,
        warp: 1,
    };

    /// Hand-computed: max(64, 0, 1×4) = 64; with a GPU, max(128, 0, 32×8) = 256 for f64 and
    /// 32×4 = 128 for f32; an FPGA's 256-byte burst wins for small types; 3 × 100 rounds up
    /// to 512; the granule caps it; an element larger than the granule is one fragment.
    #[test]
    fn the_rule_takes_the_widest_device_rounded_to_a_power_of_two_within_the_granule() {
        let rule = |devs: &[DeviceGrain], granule| {
            FragmentRule::new(devs.iter().map(|&g| (Device::Cpu, g)).collect(), granule)
        };
        assert_eq!(rule(&[CPU], 4096).bytes_for(4), 64);
        assert_eq!(rule(&[CPU, GPU], 4096).bytes_for(8), 256);
        assert_eq!(rule(&[CPU, GPU], 4096).bytes_for(4), 128);
        assert_eq!(rule(&[CPU, FPGA], 4096).bytes_for(2), 256);
        assert_eq!(rule(&[CPU, GPU, FPGA], 4096).bytes_for(16), 512);
        let odd = DeviceGrain {
            l2_line: 100,
            dma_burst: 300,
            warp: 1,
        };
        assert_eq!(rule(&[odd], 4096).bytes_for(4), 512);
        assert_eq!(rule(&[CPU, GPU], 128).bytes_for(8), 128);
        assert_eq!(rule(&[CPU], 4096).bytes_for(8192), 8192);
        assert_eq!(rule(&[], 4096).bytes_for(4), 4);
    }
}

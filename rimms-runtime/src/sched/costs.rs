//! Per-API cost tables: how long a call is expected to run on each device.
//!
//! CEDR keeps one execution time per API and processing-element type, measured offline. Here an
//! entry is a throughput model — a fixed time per call plus bytes over a rate — because the same
//! API runs on rows of 64 points and on whole images; it has the shape of a link's model, so it
//! is the same type. Entries are looked up by API and device, then by device alone, then fall
//! back to one default, so a table need only say what differs.
//!
//! A table also says how many calls a device runs at once. An accelerator runs one at a time
//! from its queue; the CPU runs as many as its worker pool has threads, so a call placed while
//! one CPU call is running need not wait for it — an earliest-finish-time scheduler that forgot
//! this would send work over a link to a card while CPU workers sat idle.

use crate::hal::Device;
use crate::space::LinkModel;
use std::time::Duration;

/// Expected execution times of kernel calls, per API and device.
#[derive(Clone, Debug, PartialEq)]
pub struct CostTable {
    default: LinkModel,
    per_device: Vec<(Device, LinkModel)>,
    per_api: Vec<(String, Device, LinkModel)>,
    concurrency: Vec<(Device, usize)>,
}

impl Default for CostTable {
    /// Every device alike: 2 µs per call and 2 GB/s over the call's argument bytes.
    fn default() -> Self {
        CostTable {
            default: LinkModel {
                latency: Duration::from_micros(2),
                bytes_per_second: 2e9,
            },
            per_device: Vec::new(),
            per_api: Vec::new(),
            concurrency: Vec::new(),
        }
    }
}

impl CostTable {
    /// A table where every call of every API costs `model` on every device.
    pub fn uniform(model: LinkModel) -> CostTable {
        CostTable {
            default: model,
            ..CostTable::default()
        }
    }

    /// Calls on `device` cost `model`, unless an entry for the API says otherwise.
    pub fn device(mut self, device: Device, model: LinkModel) -> CostTable {
        self.per_device.retain(|(d, _)| *d != device);
        self.per_device.push((device, model));
        self
    }

    /// Calls of the API named `api` on `device` cost `model`.
    pub fn api(mut self, api: &str, device: Device, model: LinkModel) -> CostTable {
        self.per_api.retain(|(a, d, _)| !(a == api && *d == device));
        self.per_api.push((api.to_string(), device, model));
        self
    }

    /// `device` runs up to `calls` calls at once (at least one). By default the CPU runs as
    /// many as rayon's pool, where scoped CPU jobs run, has threads, and every other device one.
    pub fn concurrency(mut self, device: Device, calls: usize) -> CostTable {
        self.concurrency.retain(|(d, _)| *d != device);
        self.concurrency.push((device, calls.max(1)));
        self
    }

    /// How many calls `device` runs at once (see [`CostTable::concurrency`]).
    pub fn concurrent_calls(&self, device: Device) -> usize {
        self.concurrency
            .iter()
            .find(|(d, _)| *d == device)
            .map_or_else(
                || match device {
                    Device::Cpu => rayon::current_num_threads(),
                    _ => 1,
                },
                |&(_, calls)| calls,
            )
    }

    /// Expected nanoseconds of a call of `api` on `device` over `bytes` of arguments.
    pub fn estimate(&self, api: &str, device: Device, bytes: usize) -> u64 {
        let model = self
            .per_api
            .iter()
            .find(|(a, d, _)| a == api && *d == device)
            .map(|(_, _, m)| m)
            .or_else(|| {
                self.per_device
                    .iter()
                    .find(|(d, _)| *d == device)
                    .map(|(_, m)| m)
            })
            .unwrap_or(&self.default);
        model.cost_ns(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(bytes_per_second: f64) -> LinkModel {
        LinkModel {
            latency: Duration::from_nanos(100),
            bytes_per_second,
        }
    }

    #[test]
    fn lookup_prefers_api_then_device_then_default() {
        let table = CostTable::uniform(rate(1e9))
            .device(Device::Sim(0), rate(2e9))
            .api("fft", Device::Sim(0), rate(4e9));
        // 1,000 bytes: 100 ns + 1,000 / rate.
        assert_eq!(table.estimate("fft", Device::Sim(0), 1000), 350);
        assert_eq!(table.estimate("zip", Device::Sim(0), 1000), 600);
        assert_eq!(table.estimate("fft", Device::Cpu, 1000), 1100);
    }

    #[test]
    fn a_later_entry_replaces_an_earlier_one() {
        let table = CostTable::default().api("fft", Device::Cpu, rate(1e9)).api(
            "fft",
            Device::Cpu,
            rate(2e9),
        );
        assert_eq!(table.estimate("fft", Device::Cpu, 1000), 600);
    }

    #[test]
    fn concurrency_defaults_to_the_cpu_pool_and_one_call_elsewhere() {
        let table = CostTable::default();
        assert_eq!(
            table.concurrent_calls(Device::Cpu),
            rayon::current_num_threads()
        );
        assert_eq!(table.concurrent_calls(Device::Sim(1)), 1);
        let table = table
            .concurrency(Device::Cpu, 3)
            .concurrency(Device::Sim(1), 0);
        assert_eq!(table.concurrent_calls(Device::Cpu), 3);
        assert_eq!(table.concurrent_calls(Device::Sim(1)), 1, "at least one");
    }
}

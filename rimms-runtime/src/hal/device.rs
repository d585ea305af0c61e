//! The vocabulary every layer shares about devices: which device ([`Device`]), which kind of
//! device ([`DeviceKind`]), which way a device's kernels take their arguments ([`ArgForm`]),
//! and where a call was asked to run ([`Target`]).
//!
//! This module is a leaf: it imports nothing of the crate, so backends, the kernel registry,
//! the scheduler and errors can all name devices without importing each other. Every list of
//! device kinds in the crate is derived from [`DeviceKind::ALL`].

use std::fmt;

/// A device that runs kernels.
#[derive(Clone, Copy, Debug)]
pub enum Device {
    /// The host CPU (always present).
    Cpu,
    /// Simulated discrete device `n`, in the order the builder added them.
    Sim(u8),
    /// FPGA accelerator instance `n`.
    Fpga(u8),
    /// GPU `n`.
    Gpu(u8),
}

impl Device {
    /// The kind of this device.
    pub const fn kind(self) -> DeviceKind {
        match self {
            Device::Cpu => DeviceKind::Cpu,
            Device::Sim(_) => DeviceKind::Sim,
            Device::Fpga(_) => DeviceKind::Fpga,
            Device::Gpu(_) => DeviceKind::Gpu,
        }
    }

    /// Its number among the devices of its kind (0 for the CPU).
    pub const fn instance(self) -> u8 {
        match self {
            Device::Cpu => 0,
            Device::Sim(n) | Device::Fpga(n) | Device::Gpu(n) => n,
        }
    }
}

/// Kind, then number: the derived comparison matched on the kind to reach the number, a jump
/// table in every row call that looks up its device's group, where these are two comparisons
/// without a branch between them (a number is read as 0 for the CPU, which has none).
impl PartialEq for Device {
    #[inline]
    fn eq(&self, other: &Device) -> bool {
        self.kind() == other.kind() && self.instance() == other.instance()
    }
}

impl Eq for Device {}

impl std::hash::Hash for Device {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.kind(), self.instance()).hash(state);
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            other => write!(f, "{}{}", other.kind().name(), other.instance()),
        }
    }
}

/// The kinds of device an implementation can be written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu,
    /// A simulated discrete device (runs host code on its own memory).
    Sim,
    /// An FPGA accelerator instance.
    Fpga,
    /// A GPU.
    Gpu,
}

impl DeviceKind {
    /// Every kind, in the order devices are listed (and stored) by a runtime.
    pub const ALL: [DeviceKind; 4] = [
        DeviceKind::Cpu,
        DeviceKind::Sim,
        DeviceKind::Fpga,
        DeviceKind::Gpu,
    ];

    /// How many kinds there are: the length of per-kind tables.
    pub const COUNT: usize = DeviceKind::ALL.len();

    /// The kind of `device`.
    pub const fn of(device: Device) -> DeviceKind {
        device.kind()
    }

    /// Its position in [`DeviceKind::ALL`], for per-kind tables.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The name the kernel attribute and device names use (`cpu`, `sim`, `fpga`, `gpu`).
    pub const fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Sim => "sim",
            DeviceKind::Fpga => "fpga",
            DeviceKind::Gpu => "gpu",
        }
    }
}

/// Which way a device's kernels take their managed arguments; an implementation registered
/// in one form runs only on devices whose memory is reached that way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgForm {
    /// `&[T]` and `&mut [T]`: host code over memory the CPU addresses (the cpu, and sim
    /// devices on their own host memory).
    Host,
    /// `DevSlice<T>` and `DevSliceMut<T>`: device addresses the CPU never dereferences, which
    /// the implementation hands to its driver (a GPU, a sim playing one).
    Device,
}

impl ArgForm {
    /// Every form, for per-form tables.
    pub const ALL: [ArgForm; 2] = [ArgForm::Host, ArgForm::Device];

    /// How many forms there are.
    pub const COUNT: usize = ArgForm::ALL.len();

    /// Its position in [`ArgForm::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The forms a device's implementations may take, in the order dispatch looks for one.
///
/// A device whose memory the CPU maps but whose engines write it behind the CPU's back (an
/// FPGA's u-dma-buf, which its DMA engines fill) looks for device slices first: its built-in
/// kernels hand offsets to a DMA engine, and a `&mut [T]` over bytes an engine writes during
/// the call would be aliased. Its memory is still the CPU's, so a user's host code runs there
/// too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Forms {
    /// Implementations of this one form only.
    Only(ArgForm),
    /// Device slices where the API has such an implementation, host slices otherwise.
    // Only the FPGA backend takes both.
    #[cfg_attr(not(feature = "fpga"), allow(dead_code))]
    DeviceThenHost,
}

impl Forms {
    /// Whether host code may run over the device's memory (`launch_host`).
    pub(crate) fn runs_host_code(self) -> bool {
        self != Forms::Only(ArgForm::Device)
    }
}

/// Where a call runs: on a named device, or wherever the runtime's scheduler puts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// On this device.
    On(Device),
    /// On the device the runtime's scheduling policy picks among those that implement the API.
    Auto,
}

impl From<Device> for Target {
    fn from(device: Device) -> Target {
        Target::On(device)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::On(device) => device.fmt(f),
            Target::Auto => f.write_str("auto"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_each_kind_once_at_its_index() {
        for (i, kind) in DeviceKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
        for (i, form) in ArgForm::ALL.into_iter().enumerate() {
            assert_eq!(form.index(), i);
        }
    }

    #[test]
    fn devices_display_as_kind_and_number() {
        let shown: Vec<String> = [
            Device::Cpu,
            Device::Sim(3),
            Device::Fpga(0),
            Device::Gpu(12),
        ]
        .iter()
        .map(Device::to_string)
        .collect();
        assert_eq!(shown, ["cpu", "sim3", "fpga0", "gpu12"]);
    }

    /// `==` and hashing agree with the plain definition: the same variant with the same
    /// number (the CPU has none).
    #[test]
    fn devices_are_equal_exactly_when_variant_and_number_are() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |d: Device| {
            let mut h = DefaultHasher::new();
            d.hash(&mut h);
            h.finish()
        };
        let mut all = vec![Device::Cpu];
        for n in [0, 1, 2, 255] {
            all.extend([Device::Sim(n), Device::Fpga(n), Device::Gpu(n)]);
        }
        for &a in &all {
            for &b in &all {
                let same = match (a, b) {
                    (Device::Cpu, Device::Cpu) => true,
                    (Device::Sim(x), Device::Sim(y))
                    | (Device::Fpga(x), Device::Fpga(y))
                    | (Device::Gpu(x), Device::Gpu(y)) => x == y,
                    _ => false,
                };
                assert_eq!(a == b, same, "{a} == {b}");
                assert_eq!(hash(a) == hash(b), same, "hashes of {a} and {b}");
            }
        }
    }
}

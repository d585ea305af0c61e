//! The `native` mode: each app hand-written with plain vectors and the CPU kernels, the way a
//! programmer who knows the data flow would write it with no runtime at all — inputs copied to
//! the device once, intermediates left there, results copied back once. It is the floor that
//! the `rimms` mode is measured against, so it does the least it can: no tracking, no
//! dispatch, whole-matrix kernel calls, and on the CPU no copies at all.
//!
//! A simulated card's memory is a second set of host vectors, and every copy to or from it is
//! a real `memcpy`, counted per link and, when the sim config models its link, held for the
//! modelled time, exactly as the runtime's sim backend does, so the figures of the three modes
//! can be compared line by line. Mappings that split an app over several devices are not
//! modelled here yet: native code for them is per-mapping code, to be written with their
//! backends.

use super::mapping::{Mapping, Step};
use super::report::Link;
use rimms::backend::cpu::kernels::{self, FftPlans};
use rimms::{Complex32, Device, FftDirection, LinkModel, SimConfig, Target};
use std::cell::Cell;
use std::time::Instant;

/// The device native code runs on: the CPU, or a card with memory of its own.
pub(crate) struct Native {
    /// The card's name in link figures ("sim0"), or `None` when everything runs on the CPU.
    device: Option<String>,
    /// The link model to hold each copy for, if the sim config asks for modelled copies.
    link: Option<LinkModel>,
    plans: FftPlans,
    /// (copies, bytes) host → device and device → host.
    to_device: Cell<(u64, u64)>,
    from_device: Cell<(u64, u64)>,
    allocations: Cell<u64>,
}

/// A buffer the host fills or reads, with its copy in device memory when the device has its
/// own (on the CPU the two are one vector).
pub(crate) struct Mirror<T> {
    host: Vec<T>,
    device: Option<Vec<T>>,
}

impl<T> Mirror<T> {
    /// The host copy.
    pub fn host(&self) -> &[T] {
        &self.host
    }

    /// The host copy, to fill before an upload.
    pub fn host_mut(&mut self) -> &mut [T] {
        &mut self.host
    }

    /// The copy the kernels use.
    pub fn dev(&self) -> &[T] {
        self.device.as_deref().unwrap_or(&self.host)
    }

    /// The copy the kernels write, to download afterwards.
    pub fn dev_mut(&mut self) -> &mut [T] {
        match &mut self.device {
            Some(d) => d,
            None => &mut self.host,
        }
    }
}

impl Native {
    pub fn new(mapping: Mapping, sim: &SimConfig) -> Native {
        // Native code for a mapping runs on the one device its FFTs run on; every mapping
        // built so far places all steps on one device.
        let device = match mapping.device(Step::Fft) {
            Target::On(Device::Cpu) => None,
            other => Some(other.to_string()),
        };
        Native {
            link: (device.is_some() && sim.simulate_link).then_some(sim.link),
            device,
            plans: FftPlans::new(),
            to_device: Cell::new((0, 0)),
            from_device: Cell::new((0, 0)),
            allocations: Cell::new(0),
        }
    }

    /// A buffer that lives only where the kernels run.
    pub fn buffer<T: Copy + Default>(&self, len: usize) -> Vec<T> {
        self.allocations.set(self.allocations.get() + 1);
        vec![T::default(); len]
    }

    /// A buffer the host and the kernels both use.
    pub fn mirror<T: Copy + Default>(&self, len: usize) -> Mirror<T> {
        Mirror {
            host: self.buffer(len),
            device: self.device.as_ref().map(|_| self.buffer(len)),
        }
    }

    /// Copies the host copy to the device (nothing on the CPU).
    pub fn upload<T: Copy>(&self, m: &mut Mirror<T>) {
        if let Some(device) = &mut m.device {
            self.copy(&m.host, device, &self.to_device);
        }
    }

    /// Copies the device copy to the host (nothing on the CPU).
    pub fn download<T: Copy>(&self, m: &mut Mirror<T>) {
        if let Some(device) = &m.device {
            self.copy(device, &mut m.host, &self.from_device);
        }
    }

    fn copy<T: Copy>(&self, from: &[T], to: &mut [T], counter: &Cell<(u64, u64)>) {
        let started = Instant::now();
        to.copy_from_slice(from);
        let bytes = std::mem::size_of_val(from);
        if let Some(link) = self.link {
            link.hold(started, bytes);
        }
        let (copies, total) = counter.get();
        counter.set((copies + 1, total + bytes as u64));
    }

    /// Batched FFT of every row of `points` (inverse scaled by 1/N), with this device's plans.
    pub fn fft(
        &self,
        dir: FftDirection,
        points: usize,
        input: &[Complex32],
        out: &mut [Complex32],
    ) {
        kernels::fft_rows(&self.plans, dir, points, input, out);
    }

    /// The links that carried something, as the runtime names them.
    pub fn links(&self) -> Vec<Link> {
        let Some(device) = &self.device else {
            return Vec::new();
        };
        [
            ("host", device.as_str(), self.to_device.get()),
            (device.as_str(), "host", self.from_device.get()),
        ]
        .into_iter()
        .filter(|(_, _, (copies, _))| *copies > 0)
        .map(|(from, to, (copies, bytes))| Link {
            from: from.to_string(),
            to: to.to_string(),
            copies,
            bytes,
        })
        .collect()
    }

    /// Buffers allocated so far (a mirror on a card counts two).
    pub fn allocations(&self) -> u64 {
        self.allocations.get()
    }
}

//! What dispatch, scheduling, scopes and the handle's methods need of a runtime, below all of
//! them: the device table ([`DeviceEntry`]), [`Shared`] (the table, the memory system, the
//! scheduler, the device queues, the call counters), the execution mode, and the
//! [`Runtime`] handle's type itself.
//!
//! The handle is defined here and its methods live on top, in `runtime/`: every module that
//! runs calls can name a runtime without importing the module that builds one, so the layers
//! above the memory system form no cycle. `Shared`'s fields are private behind small
//! accessors; the builder makes one with [`Shared::new`].

pub(crate) mod queues;

#[cfg(feature = "fpga")]
use crate::backend::fpga::FpgaParts;
use crate::backend::Backend;
use crate::data::BufferMemorySystem;
use crate::hal::registry::{registry, Registry};
use crate::hal::DeviceParts;
use crate::hal::{Device, DeviceKind, DeviceMemory, DeviceMemoryRef, Forms, SpaceId, SpaceSet};
use crate::hal::{Error, Result};
use crate::sched::Scheduler;
use crate::stats::page::Publisher;
use crate::stats::ApiCounters;
use queues::DeviceQueues;
use std::sync::Arc;

/// How kernel calls treat their arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExecMode {
    /// RIMMS: data moves only when a kernel in another space needs it.
    #[default]
    Tracked,
    /// CEDR's behaviour, the measured baseline: data lives on the host; every call on a device
    /// with its own memory allocates device memory, copies every input in and every output
    /// out, and frees it again.
    Baseline,
}

/// A RIMMS runtime. Cloning it is cheap and shares everything.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl Runtime {
    /// The handle over `shared`.
    pub(crate) fn from_shared(shared: Arc<Shared>) -> Runtime {
        Runtime { shared }
    }

    /// What the runtime's handles share.
    #[inline(always)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

/// A device as dispatch sees it: what the hot path needs is copied out of the backend once,
/// so a call makes no virtual call before its kernel.
pub(crate) struct DeviceEntry {
    device: Device,
    /// Where data moves when this device needs it.
    space: SpaceId,
    /// Other spaces its kernels can use in place when the data is already valid there: for
    /// the CPU, every host-mapped space.
    reaches: SpaceSet,
    forms: Forms,
    /// Its space's memory where the CPU cannot address it, for its kernels' context.
    memory: Option<DeviceMemoryRef>,
    /// Its backend's [`Backend::reports_completion`], asked once: a call on a device that
    /// reports nothing skips the call to `completion`.
    reports_completion: bool,
    /// The least bytes a direct call here must move to be cut into parts whose copies hide
    /// behind its work (`kernel::ahead`); `None` where no call is (its copies take no
    /// modelled time, or never enough).
    cuts_from: Option<usize>,
    backend: Box<dyn Backend>,
}

impl DeviceEntry {
    pub(crate) fn new(
        backend: Box<dyn Backend>,
        space: SpaceId,
        memory: Option<DeviceMemoryRef>,
        cuts_from: Option<usize>,
    ) -> Self {
        DeviceEntry {
            device: backend.device(),
            space,
            reaches: SpaceSet::EMPTY,
            forms: backend.arg_forms(),
            memory,
            reports_completion: backend.reports_completion(),
            cuts_from,
            backend,
        }
    }

    #[inline(always)]
    pub(crate) fn device(&self) -> Device {
        self.device
    }

    /// The space data moves to when this device needs it.
    #[inline(always)]
    pub(crate) fn space(&self) -> SpaceId {
        self.space
    }

    /// The other spaces its kernels use in place when the data is valid there.
    #[inline(always)]
    pub(crate) fn reaches(&self) -> SpaceSet {
        self.reaches
    }

    /// How its kernels take their arguments.
    #[inline(always)]
    pub(crate) fn forms(&self) -> Forms {
        self.forms
    }

    /// Whether its backend's `completion` can report anything but success.
    #[inline(always)]
    pub(crate) fn reports_completion(&self) -> bool {
        self.reports_completion
    }

    /// The least bytes a direct call here must move to be cut, if any can be.
    #[inline(always)]
    pub(crate) fn cuts_from(&self) -> Option<usize> {
        self.cuts_from
    }

    #[inline(always)]
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }
}

/// A kernel's context asks the entry for its backend's handle and its memory only when the
/// kernel asks.
impl DeviceParts for DeviceEntry {
    fn handle(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.backend.handle()
    }

    fn memory(&self) -> Option<&dyn DeviceMemory> {
        self.memory.as_deref()
    }
}

/// The devices, stored kind by kind in `Device` order, so that finding one is an index.
pub(crate) struct DeviceTable {
    entries: Vec<DeviceEntry>,
    /// Position in `entries` of the first device of each kind (cpu, sim, fpga, gpu).
    first_of_kind: [usize; DeviceKind::COUNT],
}

impl DeviceTable {
    /// The table of `entries`; devices whose own space is the host also reach `host_mapped`.
    pub(crate) fn new(mut entries: Vec<DeviceEntry>, host_mapped: SpaceSet) -> Self {
        for d in entries.iter_mut().filter(|d| d.space == SpaceId::HOST) {
            d.reaches = host_mapped;
        }
        let mut first_of_kind = [entries.len(); DeviceKind::COUNT];
        for (position, d) in entries.iter().enumerate().rev() {
            first_of_kind[d.device.kind().index()] = position;
        }
        DeviceTable {
            entries,
            first_of_kind,
        }
    }

    pub(crate) fn devices(&self) -> impl Iterator<Item = Device> + '_ {
        self.entries.iter().map(|d| d.device)
    }

    /// Where `device` sits in the table.
    #[inline]
    fn position(&self, device: Device) -> Result<usize> {
        // Devices are stored kind by kind in `Device` order, so an instance is its kind's
        // first position plus its number.
        let (kind, instance) = (device.kind(), device.instance());
        let position = self.first_of_kind[kind.index()] + usize::from(instance);
        match self.entries.get(position) {
            // Kind and number compared rather than the `Device`s: the derived `==` branched on
            // the variant a second time, a jump table on every call's path.
            Some(entry) if entry.device.kind() == kind && entry.device.instance() == instance => {
                Ok(position)
            }
            _ => Err(Error::NoDevice {
                device,
                available: self.devices().collect(),
            }),
        }
    }
}

/// What a runtime's handles share: the device table, the memory system, and what places and
/// runs calls (scheduler, device queues, call counters).
pub(crate) struct Shared {
    mode: ExecMode,
    /// Whether scopes merge the calls submitted to them (`RuntimeBuilder::merge_calls`).
    merge_calls: bool,
    devices: DeviceTable,
    /// Spaces, pools, links, copies and their counters; every buffer holds it too.
    memory: Arc<BufferMemorySystem>,
    /// Calls, hits and merges per API.
    calls: ApiCounters,
    /// Places `Target::Auto` calls.
    scheduler: Scheduler,
    /// The workers of scoped calls.
    queues: DeviceQueues,
    /// The registry of APIs and implementations (`hal::registry::registry`), kept here so
    /// that a call finds it with a load rather than a call into its `OnceLock`.
    registry: &'static Registry,
    /// The `rimms memstat` page, if published; dropping it stops its thread.
    stats_page: Option<Publisher>,
    /// The FPGA board (and emulator) behind `fpga(n)` devices, dropped with the runtime; the
    /// u-dma-buf its space's pool carves is kept mapped by the pool's region.
    #[cfg(feature = "fpga")]
    _fpga: Option<FpgaParts>,
}

/// What the builder puts together into a [`Shared`].
pub(crate) struct SharedParts {
    pub(crate) mode: ExecMode,
    pub(crate) merge_calls: bool,
    pub(crate) devices: DeviceTable,
    pub(crate) memory: Arc<BufferMemorySystem>,
    pub(crate) calls: ApiCounters,
    pub(crate) scheduler: Scheduler,
    pub(crate) stats_page: Option<Publisher>,
    #[cfg(feature = "fpga")]
    pub(crate) fpga: Option<FpgaParts>,
}

impl Shared {
    /// The shared state of a new runtime, with a queue per device.
    pub(crate) fn new(parts: SharedParts) -> Shared {
        Shared {
            queues: DeviceQueues::new(parts.devices.entries.len()),
            registry: registry(),
            mode: parts.mode,
            merge_calls: parts.merge_calls,
            devices: parts.devices,
            memory: parts.memory,
            calls: parts.calls,
            scheduler: parts.scheduler,
            stats_page: parts.stats_page,
            #[cfg(feature = "fpga")]
            _fpga: parts.fpga,
        }
    }

    /// The `rimms memstat` page, if published.
    pub(crate) fn stats_page(&self) -> Option<&Publisher> {
        self.stats_page.as_ref()
    }

    /// The devices, in the order `Runtime::devices` lists them.
    pub(crate) fn devices(&self) -> impl Iterator<Item = Device> + '_ {
        self.devices.devices()
    }

    /// The registry of APIs and implementations.
    #[inline(always)]
    pub(crate) fn registry(&self) -> &'static Registry {
        self.registry
    }

    /// Tracked or baseline.
    #[inline(always)]
    pub(crate) fn mode(&self) -> ExecMode {
        self.mode
    }

    /// Whether scopes merge the calls submitted to them.
    pub(crate) fn merges_calls(&self) -> bool {
        self.merge_calls
    }

    /// Whether copies start ahead of the calls that need them.
    pub(crate) fn prefetches(&self) -> bool {
        self.memory.prefetches()
    }

    /// The memory system: spaces, pools, links, the copy engine.
    #[inline(always)]
    pub(crate) fn memory(&self) -> &Arc<BufferMemorySystem> {
        &self.memory
    }

    /// The per-API call counters.
    #[inline(always)]
    pub(crate) fn calls(&self) -> &ApiCounters {
        &self.calls
    }

    pub(crate) fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    pub(crate) fn queues(&self) -> &DeviceQueues {
        &self.queues
    }

    #[inline]
    pub(crate) fn device(&self, device: Device) -> Result<&DeviceEntry> {
        self.position(device).map(|i| &self.devices.entries[i])
    }

    /// Every device, in the order `Runtime::devices` lists them.
    pub(crate) fn device_entries(&self) -> &[DeviceEntry] {
        &self.devices.entries
    }

    /// Where `device` sits in the device table.
    #[inline]
    pub(crate) fn position(&self, device: Device) -> Result<usize> {
        self.devices.position(device)
    }

    pub(crate) fn device_space(&self, device: Device) -> Result<SpaceId> {
        Ok(self.device(device)?.space)
    }
}

//! The runtime: its device table, the handle programs hold, and the builder that opens the
//! devices and puts them together with the memory system.
//!
//! What the runtime's handles share ([`Shared`]) is the device table (what dispatch needs of
//! each device, copied out of its backend once), the memory system (`space::MemorySystem`:
//! spaces, pools, links, the copy engine and its counters) and what places and runs calls.
//! `Runtime` is a cheap handle (an `Arc`); buffers hold the memory system, so pools outlive
//! every block carved from them whatever order things are dropped in.
//!
//! `impl Runtime` is spread by topic: here, building and the handle's own questions (devices,
//! spaces, stats, fault injection); `kernel::dispatch` runs a call, `kernel::builtin` the
//! typed built-in APIs, `kernel::custom` hand-written and generated calls,
//! `kernel::capabilities` what each device can do, `sched` where `Target::Auto` calls go, and
//! `scope` scoped jobs.

use crate::backend::cpu::CpuBackend;
#[cfg(feature = "fpga")]
use crate::backend::fpga::{FpgaParts, FpgaSource};
use crate::backend::sim::{SimBackend, SimConfig};
use crate::backend::{Backend, SpaceMemory, SpaceSpec};
use crate::data::{Memory, RawBuffer};
use crate::hal::{ArgForm, Device, DeviceKind};
use crate::hal::{Error, Result};
use crate::hal::{SharedDeviceMemory, SpaceId, SpaceName, SpaceSet, MAX_SPACES};
use crate::kernel::registry::registry;
use crate::sched::calibrate;
use crate::sched::{CostTable, Policy, Scheduler};
use crate::scope::queues::DeviceQueues;
use crate::space::{LinkModel, MemorySystem, Pool, Region, SpaceEntry};
use crate::stats::page::Publisher;
use crate::stats::{ApiCounters, ApiStats, Stats, Timeline, TRACE_FILE_ENV};
use std::fmt;
use std::path::PathBuf;
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

/// Builds a [`Runtime`]: the CPU always, plus sim devices, an FPGA board and GPUs as asked.
#[derive(Clone, Debug)]
pub struct RuntimeBuilder {
    host_pool_bytes: usize,
    granule: usize,
    sims: Vec<SimConfig>,
    #[cfg(feature = "fpga")]
    fpga: Option<FpgaSource>,
    mode: ExecMode,
    trace: Option<bool>,
    trace_file: Option<PathBuf>,
    policy: Policy,
    costs: CostTable,
    zero_copy: bool,
    stats_page: Option<PathBuf>,
    gpus: GpuRequest,
    gpu_pool_bytes: usize,
    calibrate_links: bool,
    /// Pool sizes set by space name (`pool`), applied when the spaces are made.
    pool_limits: Vec<(String, usize)>,
    merge_calls: bool,
}

/// Which GPUs a builder adds.
#[derive(Clone, Debug, PartialEq, Eq)]
enum GpuRequest {
    /// Every GPU the driver reports, if any.
    IfAvailable,
    /// These ordinals, each required.
    These(Vec<usize>),
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            host_pool_bytes: 1 << 30,
            granule: 4096,
            sims: Vec::new(),
            #[cfg(feature = "fpga")]
            fpga: None,
            mode: ExecMode::Tracked,
            trace: None,
            trace_file: None,
            policy: Policy::default(),
            costs: CostTable::default(),
            zero_copy: false,
            stats_page: None,
            gpus: GpuRequest::These(Vec::new()),
            gpu_pool_bytes: 1 << 30,
            calibrate_links: false,
            pool_limits: Vec::new(),
            merge_calls: true,
        }
    }
}

impl RuntimeBuilder {
    /// Size of the host pool (default 1 GiB of address space, committed as it is touched).
    pub fn host_pool(mut self, bytes: usize) -> Self {
        self.host_pool_bytes = bytes;
        self
    }

    /// Allocation granule of every pool, a power of two (default 4 KiB).
    pub fn granule(mut self, bytes: usize) -> Self {
        self.granule = bytes;
        self
    }

    /// Adds a simulated device; the first is `Device::Sim(0)`.
    pub fn sim(mut self, config: SimConfig) -> Self {
        self.sims.push(config);
        self
    }

    /// Adds the accelerators of an FPGA board (or of the emulator) as devices `fpga(0)`,
    /// `fpga(1)`, … in configuration order, sharing their u-dma-buf as one memory space.
    /// `FpgaSource::from_env()` picks a configured board, else the emulator. (Feature `fpga`.)
    #[cfg(feature = "fpga")]
    pub fn fpga(mut self, source: FpgaSource) -> Self {
        self.fpga = Some(source);
        self
    }

    /// Tracked (the default) or CEDR-like baseline.
    pub fn mode(mut self, mode: ExecMode) -> Self {
        self.mode = mode;
        self
    }

    /// Emit one `tracing` event per transfer. Default: whether `RIMMS_TRACE` is on (`1`,
    /// `true`, `yes`, `on`); another value that is not a switch fails the build.
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = Some(on);
        self
    }

    /// Write a Chrome / Perfetto timeline of kernels and transfers to `path`, event by event,
    /// so that it is a valid trace even if the program is interrupted; the build fails if the
    /// file cannot be created. Default: the file `RIMMS_TRACE_FILE` names, if set.
    pub fn trace_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.trace_file = Some(path.into());
        self
    }

    /// How calls with `Target::Auto` are placed (default: data-aware earliest finish time).
    pub fn scheduler(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The expected execution times the scheduler works from (default: every device alike).
    pub fn costs(mut self, costs: CostTable) -> Self {
        self.costs = costs;
        self
    }

    /// Publish the live counters at `path` for `rimms memstat` (see [`crate::stats::page`]).
    /// Default: `<temp dir>/rimms-stats-<pid>` if `RIMMS_STATS_PAGE=1`, else no page.
    pub fn stats_page(mut self, path: impl Into<PathBuf>) -> Self {
        self.stats_page = Some(path.into());
        self
    }

    /// Buffers with no placement that host code or a CPU kernel writes first live in the
    /// first host-mapped device memory (an FPGA's u-dma-buf) instead of host memory, so the
    /// accelerators sharing it read them in place: the paper's zero-copy pipeline on a Zynq.
    /// Off by default; ignored in baseline mode, where data lives on the host as in CEDR.
    pub fn zero_copy(mut self, on: bool) -> Self {
        self.zero_copy = on;
        self
    }

    /// Adds every GPU the driver reports as `gpu(0)`, `gpu(1)`, …, each with a pool of
    /// [`RuntimeBuilder::gpu_pool`] bytes. Where there is none — no driver, no device, no
    /// CUDA libraries, a build without the `cuda` feature, or `RIMMS_NO_GPU` set — the runtime
    /// has none, the reason goes to the log, and [`Runtime::devices`] says what there is.
    /// Never panics.
    pub fn gpu_if_available(mut self) -> Self {
        self.gpus = GpuRequest::IfAvailable;
        self
    }

    /// Adds GPU `ordinal` as the device `gpu(ordinal)` (space `gpu<ordinal>`); building fails
    /// with [`Error::NoGpu`], saying why, where it cannot be used.
    pub fn gpu(mut self, ordinal: usize) -> Self {
        match &mut self.gpus {
            GpuRequest::These(list) => list.push(ordinal),
            GpuRequest::IfAvailable => self.gpus = GpuRequest::These(vec![ordinal]),
        }
        self
    }

    /// Bytes of each GPU's pool, reserved on the device when the runtime starts (default
    /// 1 GiB).
    pub fn gpu_pool(mut self, bytes: usize) -> Self {
        self.gpu_pool_bytes = bytes;
        self
    }

    /// Whether a scope merges the calls submitted to it ([`crate::Scope::fft`],
    /// [`crate::Scope::zip`], …) that continue one another into one device call (default: on;
    /// see [`crate::kernel::MergeRule`] for when calls merge). Off, the same calls still travel
    /// in the same jobs but each is its own device call, so the two settings differ by the
    /// merging alone. Baseline mode never merges (CEDR does not).
    pub fn merge_calls(mut self, on: bool) -> Self {
        self.merge_calls = on;
        self
    }

    /// Measure every device link when the runtime starts — a few timed copies of a small and
    /// a large block each way — and rank copies and scheduler candidates by what was measured
    /// instead of the configured [`LinkModel`]s (see [`Runtime::link_model`]). Off by default:
    /// it takes a few milliseconds per device and one block of each device's pool while it
    /// runs. A simulated link's copies still take their configured time.
    pub fn calibrate_links(mut self, on: bool) -> Self {
        self.calibrate_links = on;
        self
    }

    /// Sets the pool of the space named `space` ("host", "sim0", "udmabuf0", "gpu0"), or of
    /// the space of the device so named ("fpga0": the first FPGA instance of a space), to `bytes`
    /// (whole granules): a simulated device's pool is reserved at that size, and a space whose
    /// memory is given (a u-dma-buf, a GPU's reservation) uses only its first `bytes`. A full
    /// device pool evicts its least recently used blocks, so any program can be run under
    /// memory pressure this way. The build fails if no space has that name, or if `bytes`
    /// is less than one granule.
    pub fn pool(mut self, space: impl Into<String>, bytes: usize) -> Self {
        self.pool_limits.push((space.into(), bytes));
        self
    }

    /// Reserves the pools and starts the devices. The steps, in order: check the settings,
    /// open every device, give each its memory space, make the memory system over those
    /// spaces, index the devices, and start what runs beside the runtime (link calibration,
    /// the stats page).
    pub fn build(mut self) -> Result<Runtime> {
        self.check_settings()?;
        #[cfg(feature = "fpga")]
        let fpga = self.fpga.take().map(FpgaParts::open).transpose()?;
        let mut backends = self.host_and_sim_backends();
        #[cfg(feature = "fpga")]
        backends.extend(
            fpga.iter()
                .flat_map(FpgaParts::backends)
                .map(|device| Box::new(device) as Box<dyn Backend>),
        );
        backends.extend(self.gpu_backends()?);
        let (spaces, devices) = self.space_table(backends)?;
        self.check_pool_names(&spaces, &devices)?;
        let memory = Arc::new(self.memory_system(spaces, &devices)?);
        let stats_page = Publisher::create(self.stats_page.take(), memory.space_names())?;
        let devices = DeviceTable::new(devices, memory.host_mapped());
        let shared = Arc::new(Shared {
            scheduler: Scheduler::new(self.policy, self.costs, devices.devices()),
            queues: DeviceQueues::new(devices.entries.len()),
            mode: self.mode,
            merge_calls: self.merge_calls && self.mode == ExecMode::Tracked,
            devices,
            memory,
            calls: ApiCounters::new(registry().api_count()),
            stats_page,
            #[cfg(feature = "fpga")]
            _fpga: fpga,
        });
        Runtime::start(shared, self.calibrate_links)
    }

    /// Refuses settings no runtime can be built from, before anything is opened.
    fn check_settings(&self) -> Result<()> {
        if !self.granule.is_power_of_two() || self.granule < 64 {
            return Err(Error::Config(format!(
                "the pool granule must be a power of two of at least 64 bytes, got {}",
                self.granule
            )));
        }
        if self.sims.len() + 1 > MAX_SPACES {
            return Err(Error::Config(format!(
                "at most {} sim devices fit in one runtime, asked for {}",
                MAX_SPACES - 1,
                self.sims.len()
            )));
        }
        // Before any device is opened; `device_space` holds every backend's link to the same
        // bounds (an FPGA timing model's, a GPU's).
        for (index, sim) in self.sims.iter().enumerate() {
            if let Some(why) = sim.link.problem() {
                return Err(Error::Config(format!("sim{index}'s link: {why}")));
            }
        }
        if let Some(index) = self
            .sims
            .iter()
            .position(|s| s.host_mapped && s.device_memory)
        {
            return Err(Error::Config(format!(
                "sim{index} cannot be both host_mapped and device_memory: the CPU either addresses its memory or does not"
            )));
        }
        Ok(())
    }

    /// The CPU, then the sim devices in the order they were added.
    fn host_and_sim_backends(&mut self) -> Vec<Box<dyn Backend>> {
        let mut backends: Vec<Box<dyn Backend>> = vec![Box::new(CpuBackend::new())];
        for (index, config) in std::mem::take(&mut self.sims).into_iter().enumerate() {
            // At most MAX_SPACES - 1 sims (checked first), so the index fits in a u8.
            backends.push(Box::new(SimBackend::new(index as u8, config)));
        }
        backends
    }

    /// The GPUs asked for, as backends, each bringing its memory as a space.
    fn gpu_backends(&self) -> Result<Vec<Box<dyn Backend>>> {
        open_gpus(&self.gpus, self.gpu_pool_bytes, self.granule)
    }

    /// The pool size `pool(name, …)` set last for `name`, if any.
    fn pool_limit(&self, name: &str) -> Option<usize> {
        self.pool_limits
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|&(_, bytes)| bytes)
    }

    /// The host space, then each device's space (one per space name: devices that name the
    /// same space share it), and the device table's entries, each pointing at its space.
    fn space_table(
        &self,
        backends: Vec<Box<dyn Backend>>,
    ) -> Result<(Vec<SpaceEntry<RawBuffer>>, Vec<DeviceEntry>)> {
        let host_pool = self.pool_limit("host").unwrap_or(self.host_pool_bytes);
        let host = SpaceName::new(SpaceId::HOST, "host");
        let mut spaces = vec![SpaceEntry::host(Pool::new(&host, host_pool, self.granule)?)];
        let mut devices = Vec::with_capacity(backends.len());
        for backend in backends {
            let space = match backend.own_space() {
                None => SpaceId::HOST,
                Some(spec) => match spaces.iter().position(|s| s.name() == spec.name) {
                    // Several devices may share one space (FPGA instances on one u-dma-buf).
                    Some(index) => SpaceId(index as u8),
                    None => {
                        if spaces.len() == MAX_SPACES {
                            return Err(Error::Config(format!(
                                "at most {MAX_SPACES} memory spaces fit in one runtime"
                            )));
                        }
                        let id = SpaceId(spaces.len() as u8);
                        spaces.push(self.device_space(backend.device(), id, spec)?);
                        SpaceId((spaces.len() - 1) as u8)
                    }
                },
            };
            let memory = spaces[space.index()].memory().cloned();
            devices.push(DeviceEntry::new(backend, space, memory));
        }
        Ok((spaces, devices))
    }

    /// The space `device` brings, its pool sized by `pool(…)` where set.
    fn device_space(
        &self,
        device: Device,
        id: SpaceId,
        spec: SpaceSpec,
    ) -> Result<SpaceEntry<RawBuffer>> {
        // Every link, whichever backend modelled it (a sim's was checked with the settings):
        // a simulated link sleeps through its model on every copy.
        if let Some(why) = spec.link.problem() {
            return Err(Error::Config(format!(
                "{device}'s link (space {}): {why}",
                spec.name
            )));
        }
        // A space is also named by the device that makes it: `pool("fpga0", …)` sizes the
        // u-dma-buf the FPGA instances share, whatever the space is called.
        let limit = self
            .pool_limit(&spec.name)
            .or_else(|| self.pool_limit(&device.to_string()));
        let name = SpaceName::new(id, &spec.name);
        let device_memory = match &spec.memory {
            SpaceMemory::Device(memory) => Some(memory.clone()),
            _ => None,
        };
        let pool = match spec.memory {
            SpaceMemory::Reserve => {
                Pool::new(&name, limit.unwrap_or(spec.pool_bytes), self.granule)?
            }
            SpaceMemory::Mapped(memory) => {
                Pool::over_backend(&name, Region::Mapped(memory), self.granule)?
            }
            SpaceMemory::Device(memory) => {
                Pool::over_backend(&name, Region::Device(memory), self.granule)?
            }
        };
        let pool = match limit {
            Some(bytes) => pool.limited(bytes)?,
            None => pool,
        };
        Ok(SpaceEntry::linked(pool, spec.link)
            .simulated(spec.simulate)
            .failing_copies(spec.fail_copies)
            .host_mapped(spec.host_mapped)
            .device_memory(device_memory))
    }

    /// Refuses a `pool(name, …)` that names neither a space nor a device.
    fn check_pool_names(
        &self,
        spaces: &[SpaceEntry<RawBuffer>],
        devices: &[DeviceEntry],
    ) -> Result<()> {
        let Some((name, _)) = self.pool_limits.iter().find(|(n, _)| {
            !spaces.iter().any(|s| s.name() == n)
                && !devices.iter().any(|d| &d.device.to_string() == n)
        }) else {
            return Ok(());
        };
        Err(Error::Config(format!(
            "no memory space named {name} to size the pool of; this runtime has {}",
            spaces
                .iter()
                .map(SpaceEntry::name)
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// The memory system over `spaces`, serving `devices`: evicting and zero-copy as the mode allows, traced as
    /// asked (the trace file is created now, so that a path that cannot be written fails the
    /// build, not the end).
    fn memory_system(
        &mut self,
        spaces: Vec<SpaceEntry<RawBuffer>>,
        devices: &[DeviceEntry],
    ) -> Result<Memory> {
        let trace = match self.trace {
            Some(on) => on,
            None => {
                crate::stats::trace_enabled_from_env().map_err(|e| Error::Config(e.to_string()))?
            }
        };
        let timeline = self
            .trace_file
            .take()
            .or_else(|| std::env::var_os(TRACE_FILE_ENV).map(PathBuf::from))
            .map(|path| {
                Timeline::create(path.clone()).map_err(|e| {
                    Error::Config(format!(
                        "cannot create the trace file {} ({TRACE_FILE_ENV} or trace_file): {e}",
                        path.display()
                    ))
                })
            })
            .transpose()?;
        let tracked = self.mode == ExecMode::Tracked;
        // Baseline mode keeps data on the host and stages through temporary blocks: there is
        // nothing of a buffer's to evict, and no placement to choose.
        Ok(MemorySystem::new(spaces, self.granule)
            .serving(devices.iter().map(|d| (d.device, d.space)))
            .evicting(tracked)
            .zero_copy(self.zero_copy && tracked)
            .traced(trace, timeline))
    }
}

/// The GPUs `request` names, as backends.
#[cfg(feature = "cuda")]
fn open_gpus(request: &GpuRequest, pool: usize, granule: usize) -> Result<Vec<Box<dyn Backend>>> {
    use crate::backend::cuda::device;
    let wanted = match request {
        GpuRequest::IfAvailable => None,
        GpuRequest::These(list) if list.is_empty() => return Ok(Vec::new()),
        GpuRequest::These(list) => Some(list.as_slice()),
    };
    Ok(device::open(wanted, pool, granule)?
        .into_iter()
        .map(|gpu| Box::new(gpu) as Box<dyn Backend>)
        .collect())
}

/// Without the `cuda` feature there are no GPUs: none to add if available, an error if
/// required.
#[cfg(not(feature = "cuda"))]
fn open_gpus(request: &GpuRequest, _pool: usize, _granule: usize) -> Result<Vec<Box<dyn Backend>>> {
    match request {
        GpuRequest::These(list) if !list.is_empty() => Err(Error::NoGpu {
            why: "this build of rimms has no `cuda` feature".to_string(),
        }),
        _ => Ok(Vec::new()),
    }
}

/// A RIMMS runtime. Cloning it is cheap and shares everything.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
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
    form: ArgForm,
    /// Its space's memory where the CPU cannot address it, for its kernels' context.
    memory: Option<SharedDeviceMemory>,
    backend: Box<dyn Backend>,
}

impl DeviceEntry {
    fn new(backend: Box<dyn Backend>, space: SpaceId, memory: Option<SharedDeviceMemory>) -> Self {
        DeviceEntry {
            device: backend.device(),
            space,
            reaches: SpaceSet::EMPTY,
            form: backend.arg_form(),
            memory,
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
    pub(crate) fn form(&self) -> ArgForm {
        self.form
    }

    /// Its space's memory where the CPU cannot address it.
    pub(crate) fn memory(&self) -> Option<&SharedDeviceMemory> {
        self.memory.as_ref()
    }

    #[inline(always)]
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }
}

/// The devices, stored kind by kind in `Device` order, so that finding one is an index.
struct DeviceTable {
    entries: Vec<DeviceEntry>,
    /// Position in `entries` of the first device of each kind (cpu, sim, fpga, gpu).
    first_of_kind: [usize; DeviceKind::COUNT],
}

impl DeviceTable {
    /// The table of `entries`; devices whose own space is the host also reach `host_mapped`.
    fn new(mut entries: Vec<DeviceEntry>, host_mapped: SpaceSet) -> Self {
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

    fn devices(&self) -> impl Iterator<Item = Device> + '_ {
        self.entries.iter().map(|d| d.device)
    }

    /// Where `device` sits in the table.
    #[inline]
    fn position(&self, device: Device) -> Result<usize> {
        // Devices are stored kind by kind in `Device` order, so an instance is its kind's
        // first position plus its number.
        let position = self.first_of_kind[device.kind().index()] + usize::from(device.instance());
        match self.entries.get(position) {
            Some(entry) if entry.device == device => Ok(position),
            _ => Err(Error::NoDevice {
                device,
                available: self.devices().collect(),
            }),
        }
    }
}

/// What a runtime's handles share: the device table, the memory system, and what places and
/// runs calls (scheduler, scope queues, FFT plans, call counters).
pub(crate) struct Shared {
    mode: ExecMode,
    /// Whether scopes merge the calls submitted to them (`RuntimeBuilder::merge_calls`).
    merge_calls: bool,
    devices: DeviceTable,
    /// Spaces, pools, links, copies and their counters; every buffer holds it too.
    memory: Arc<Memory>,
    /// Calls, hits and merges per API.
    calls: ApiCounters,
    /// Places `Target::Auto` calls.
    scheduler: Scheduler,
    /// The workers of scoped calls.
    queues: DeviceQueues,
    /// The `rimms memstat` page, if published; dropping it stops its thread.
    stats_page: Option<Publisher>,
    /// The FPGA board (and emulator) behind `fpga(n)` devices, dropped with the runtime; the
    /// u-dma-buf its space's pool carves is kept mapped by the pool's region.
    #[cfg(feature = "fpga")]
    _fpga: Option<FpgaParts>,
}

impl Shared {
    /// Tracked or baseline.
    #[inline(always)]
    pub(crate) fn mode(&self) -> ExecMode {
        self.mode
    }

    /// Whether scopes merge the calls submitted to them.
    pub(crate) fn merges_calls(&self) -> bool {
        self.merge_calls
    }

    /// The memory system: spaces, pools, links, the copy engine.
    #[inline(always)]
    pub(crate) fn memory(&self) -> &Arc<Memory> {
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

impl Runtime {
    /// A builder; `Runtime::builder().sim(SimConfig::default()).build()`.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// A runtime with the CPU only.
    pub fn new() -> Result<Runtime> {
        RuntimeBuilder::default().build()
    }

    /// The last step of building: measures the links if asked, and starts the stats page's
    /// publisher, which holds the runtime only weakly.
    fn start(shared: Arc<Shared>, calibrate_links: bool) -> Result<Runtime> {
        if calibrate_links {
            calibrate::calibrate_links(&shared.memory)?;
        }
        if let Some(page) = &shared.stats_page {
            // A weak handle: the page must not keep the runtime alive.
            let weak = Arc::downgrade(&shared);
            page.start(move || weak.upgrade().map(|shared| Runtime { shared }.stats()))?;
        }
        Ok(Runtime { shared })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The devices, CPU first.
    pub fn devices(&self) -> Vec<Device> {
        self.shared.devices.devices().collect()
    }

    /// Tracked or baseline.
    pub fn mode(&self) -> ExecMode {
        self.shared.mode
    }

    /// The memory space `device`'s kernels use.
    pub fn space_of(&self, device: Device) -> Result<SpaceId> {
        self.shared.device_space(device)
    }

    /// The name of `space` ("host", "sim0", …), as stats report it.
    pub fn space_name(&self, space: SpaceId) -> &str {
        self.shared.memory.space_name(space)
    }

    /// The model copies between `space` and the host are ranked by (by the copy planner and
    /// the data-aware scheduler): the measured one if the runtime calibrated its links (see
    /// [`RuntimeBuilder::calibrate_links`]), else the configured one; `None` for the host
    /// and for an unknown space.
    pub fn link_model(&self, space: SpaceId) -> Option<LinkModel> {
        self.shared.memory.link_model(space)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let s = &*self.shared;
        let apis = registry()
            .apis()
            .iter()
            .enumerate()
            .filter_map(|(index, api)| {
                let (calls, hits) = s.calls.api(index);
                let (merged, merged_into) = s.calls.merges(index);
                (calls > 0 || merged > 0).then_some(ApiStats {
                    name: api.name(),
                    calls,
                    hits,
                    misses: calls - hits,
                    merged,
                    merged_into,
                })
            })
            .collect();
        Stats {
            links: s.memory.link_stats(),
            spaces: s.memory.space_stats(),
            apis,
        }
    }

    /// Makes every copy to and from `space` fail (`on`), or succeed again: fault injection,
    /// as `SimConfig::fail_copies` sets from the start, for testing what a program does when
    /// a transfer fails part-way (a kernel's input, a write-back on eviction).
    pub fn inject_copy_faults(&self, space: SpaceId, on: bool) -> Result<()> {
        self.shared.memory.inject_copy_faults(space, on)
    }

    /// Zeroes the link, fill and API counters and sets each high-water mark to the current
    /// use, so that one phase of a program can be measured alone.
    pub fn reset_stats(&self) {
        self.shared.memory.reset_stats();
        self.shared.calls.clear();
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("devices", &self.devices())
            .field("mode", &self.shared.mode)
            .finish()
    }
}

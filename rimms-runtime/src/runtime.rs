//! The runtime: its devices, their memory spaces and pools, the link table, the counters.
//!
//! `Runtime` is a cheap handle (an `Arc`); buffers keep the shared part alive, so pools outlive
//! every block carved from them whatever order things are dropped in.

use crate::backend::cpu::CpuBackend;
#[cfg(feature = "fpga")]
use crate::backend::fpga::{FpgaParts, FpgaSource};
use crate::backend::host_kernels::FftPlans;
use crate::backend::sim::{SimBackend, SimConfig};
use crate::backend::{Backend, BackendError, SpaceMemory};
use crate::data::Residents;
use crate::device::{ArgForm, Device, DeviceKind};
use crate::error::{Error, Result};
use crate::kernel::registry::registry;
use crate::sched::{CostTable, Policy, Scheduler};
use crate::scope::queues::DeviceQueues;
use crate::space::{
    LinkModel, Occupancy, Pending, Pool, Region, SharedDeviceMemory, SpaceId, SpaceSet, MAX_SPACES,
};
use crate::stats::page::Publisher;
use crate::stats::{
    trace_transfer, ApiStats, Counters, LinkStats, Reason, SpaceStats, Stats, Timeline,
    TRACE_FILE_ENV,
};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

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

    /// Reserves the pools and starts the devices.
    pub fn build(self) -> Result<Runtime> {
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
        let mut backends: Vec<Box<dyn Backend>> = vec![Box::new(CpuBackend)];
        if let Some(index) = self
            .sims
            .iter()
            .position(|s| s.host_mapped && s.device_memory)
        {
            return Err(Error::Config(format!(
                "sim{index} cannot be both host_mapped and device_memory: the CPU either addresses its memory or does not"
            )));
        }
        for (index, config) in self.sims.into_iter().enumerate() {
            // At most MAX_SPACES - 1 sims (checked above), so the index fits in a u8.
            backends.push(Box::new(SimBackend {
                index: index as u8,
                config,
            }));
        }
        #[cfg(feature = "fpga")]
        let fpga = self.fpga.map(FpgaParts::open).transpose()?;
        #[cfg(feature = "fpga")]
        if let Some(parts) = &fpga {
            for device in parts.backends() {
                backends.push(Box::new(device));
            }
        }
        backends.extend(open_gpus(&self.gpus, self.gpu_pool_bytes, self.granule)?);
        let limit = |name: &str| {
            self.pool_limits
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|&(_, bytes)| bytes)
        };
        let host_pool = limit("host").unwrap_or(self.host_pool_bytes);
        let mut spaces = vec![SpaceEntry {
            name: "host".to_string(),
            pool: Pool::new("host", host_pool, self.granule)?,
            residents: Residents::default(),
            link: None,
            measured: OnceLock::new(),
            simulate: false,
            fail_copies: AtomicBool::new(false),
            host_mapped: true,
            device_memory: None,
            busy: Occupancy::default(),
        }];
        let mut devices = Vec::with_capacity(backends.len());
        for backend in backends {
            // A space is also named by the device that makes it: `pool("fpga0", …)` sizes the
            // u-dma-buf the FPGA instances share, whatever the space is called.
            let device_name = backend.device().to_string();
            let space_limit = |space: &str| limit(space).or_else(|| limit(&device_name));
            let space = match backend.own_space() {
                None => SpaceId::HOST,
                // Several devices may share one space (FPGA instances on one u-dma-buf).
                Some(spec) if spaces.iter().any(|s| s.name == spec.name) => {
                    let index = spaces.iter().position(|s| s.name == spec.name);
                    SpaceId(index.unwrap_or(0) as u8)
                }
                Some(spec) => {
                    if spaces.len() == MAX_SPACES {
                        return Err(Error::Config(format!(
                            "at most {MAX_SPACES} memory spaces fit in one runtime"
                        )));
                    }
                    let device_memory = match &spec.memory {
                        SpaceMemory::Device(memory) => Some(memory.clone()),
                        _ => None,
                    };
                    let pool = match spec.memory {
                        SpaceMemory::Reserve => Pool::new(
                            &spec.name,
                            space_limit(&spec.name).unwrap_or(spec.pool_bytes),
                            self.granule,
                        )?,
                        SpaceMemory::Mapped(memory) => {
                            Pool::over_backend(&spec.name, Region::Mapped(memory), self.granule)?
                        }
                        SpaceMemory::Device(memory) => {
                            Pool::over_backend(&spec.name, Region::Device(memory), self.granule)?
                        }
                    };
                    let pool = match space_limit(&spec.name) {
                        Some(bytes) => pool.limited(bytes)?,
                        None => pool,
                    };
                    spaces.push(SpaceEntry {
                        pool,
                        residents: Residents::default(),
                        device_memory,
                        name: spec.name,
                        link: Some(spec.link),
                        measured: OnceLock::new(),
                        simulate: spec.simulate,
                        fail_copies: AtomicBool::new(spec.fail_copies),
                        host_mapped: spec.host_mapped,
                        busy: Occupancy::default(),
                    });
                    SpaceId((spaces.len() - 1) as u8)
                }
            };
            devices.push(DeviceEntry {
                device: backend.device(),
                space,
                reaches: SpaceSet::EMPTY,
                form: backend.arg_form(),
                memory: spaces[space.index()].device_memory.clone(),
                backend,
            });
        }
        if let Some((name, _)) = self.pool_limits.iter().find(|(n, _)| {
            !spaces.iter().any(|s| &s.name == n)
                && !devices.iter().any(|d| &d.device.to_string() == n)
        }) {
            return Err(Error::Config(format!(
                "no memory space named {name} to size the pool of; this runtime has {}",
                spaces
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let trace = match self.trace {
            Some(on) => on,
            None => {
                crate::stats::trace_enabled_from_env().map_err(|e| Error::Config(e.to_string()))?
            }
        };
        // Created now, so that a path that cannot be written fails the build, not the end.
        let timeline = self
            .trace_file
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
        let host_mapped = spaces
            .iter()
            .enumerate()
            .filter(|(i, s)| s.host_mapped && *i != SpaceId::HOST.index())
            .fold(SpaceSet::EMPTY, |set, (i, _)| set.with(SpaceId(i as u8)));
        for d in devices.iter_mut().filter(|d| d.space == SpaceId::HOST) {
            d.reaches = host_mapped;
        }
        let mut first_of_kind = [devices.len(); DeviceKind::COUNT];
        for (position, d) in devices.iter().enumerate().rev() {
            first_of_kind[d.device.kind().index()] = position;
        }
        let stats_page = Publisher::create(self.stats_page, spaces.iter().map(|s| &*s.name))?;
        let runtime = Runtime {
            shared: Arc::new(Shared {
                scheduler: Scheduler::new(
                    self.policy,
                    self.costs,
                    devices.iter().map(|d| d.device),
                ),
                queues: DeviceQueues::new(devices.len()),
                first_of_kind,
                host_mapped,
                default_home: host_mapped
                    .iter()
                    .next()
                    .filter(|_| self.zero_copy && self.mode == ExecMode::Tracked),
                mode: self.mode,
                // Baseline mode keeps data on the host and stages through temporary blocks:
                // there is nothing of a buffer's to evict.
                evictable: match self.mode {
                    ExecMode::Tracked => {
                        (1..spaces.len()).fold(SpaceSet::EMPTY, |set, i| set.with(SpaceId(i as u8)))
                    }
                    ExecMode::Baseline => SpaceSet::EMPTY,
                },
                clock: AtomicU64::new(0),
                next_buffer: AtomicU64::new(0),
                merge_calls: self.merge_calls && self.mode == ExecMode::Tracked,
                granule: self.granule,
                spaces,
                devices,
                counters: Counters::new(registry().api_count()),
                fft: FftPlans::new(),
                trace,
                timeline,
                stats_page,
                #[cfg(feature = "fpga")]
                _fpga: fpga,
            }),
        };
        if self.calibrate_links {
            runtime.shared.calibrate_links()?;
        }
        if let Some(page) = &runtime.shared.stats_page {
            // A weak handle: the page must not keep the runtime alive.
            let weak = Arc::downgrade(&runtime.shared);
            page.start(move || weak.upgrade().map(|shared| Runtime { shared }.stats()))?;
        }
        Ok(runtime)
    }
}

/// The GPUs `request` names, as backends.
#[cfg(feature = "cuda")]
fn open_gpus(request: &GpuRequest, pool: usize, granule: usize) -> Result<Vec<Box<dyn Backend>>> {
    use crate::backend::cuda::{device, MemoryConfig};
    let wanted = match request {
        GpuRequest::IfAvailable => None,
        GpuRequest::These(list) if list.is_empty() => return Ok(Vec::new()),
        GpuRequest::These(list) => Some(list.as_slice()),
    };
    let config = MemoryConfig {
        unit_bytes: granule.max(256),
        ..MemoryConfig::new(pool)
    };
    Ok(device::open(wanted, config, granule)?
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

pub(crate) struct SpaceEntry {
    pub name: String,
    pub pool: Pool,
    /// Link to and from the host; `None` for the host itself. A simulated link's copies take
    /// this long.
    pub link: Option<LinkModel>,
    /// What copies over the link were measured to take, if the runtime calibrated it; the
    /// copy planner and the scheduler rank by this when it is set.
    pub measured: OnceLock<LinkModel>,
    pub simulate: bool,
    /// Copies to and from this space fail (fault injection): set by `SimConfig::fail_copies`,
    /// switched by `Runtime::inject_copy_faults`.
    pub fail_copies: AtomicBool,
    /// The buffers holding a block here, for eviction.
    pub residents: Residents,
    /// The CPU reaches this space in place (always true of the host itself).
    pub host_mapped: bool,
    /// For memory the CPU cannot address, the backend's way in; `None` for host-addressable
    /// spaces.
    device_memory: Option<SharedDeviceMemory>,
    /// When its simulated link is next free.
    busy: Occupancy,
}

impl SpaceEntry {
    /// The link model copies to and from this space are ranked by.
    pub(crate) fn cost_model(&self) -> Option<LinkModel> {
        self.measured.get().copied().or(self.link)
    }
}

/// A device as dispatch sees it: what the hot path needs is copied out of the backend once,
/// so a call makes no virtual call before its kernel.
pub(crate) struct DeviceEntry {
    pub device: Device,
    /// Where data moves when this device needs it.
    pub space: SpaceId,
    /// Other spaces its kernels can use in place when the data is already valid there: for
    /// the CPU, every host-mapped space.
    pub reaches: SpaceSet,
    pub form: ArgForm,
    /// Its space's memory where the CPU cannot address it, for its kernels' context.
    pub memory: Option<SharedDeviceMemory>,
    pub backend: Box<dyn Backend>,
}

pub(crate) struct Shared {
    pub mode: ExecMode,
    /// Whether scopes merge the calls submitted to them (`RuntimeBuilder::merge_calls`).
    pub merge_calls: bool,
    /// Position in `devices` of the first device of each kind (cpu, sim, fpga, gpu).
    first_of_kind: [usize; DeviceKind::COUNT],
    /// Spaces besides the host that host code reaches in place.
    pub host_mapped: SpaceSet,
    /// Where a buffer without a placement lives when a device that reaches it writes it first
    /// (`RuntimeBuilder::zero_copy`); `None`: in the writer's own space.
    pub default_home: Option<SpaceId>,
    /// Spaces whose blocks are evicted when their pool is full: every space but the host.
    pub evictable: SpaceSet,
    /// The logical clock of least-recent use: advanced by every slow-path acquire, read (not
    /// advanced) by the fast path, which stamps buffers with it.
    pub clock: AtomicU64,
    /// Ids of buffers, in creation order (eviction's tie-break).
    pub next_buffer: AtomicU64,
    granule: usize,
    pub spaces: Vec<SpaceEntry>,
    devices: Vec<DeviceEntry>,
    pub counters: Counters,
    pub fft: FftPlans,
    trace: bool,
    /// Kernels and transfers for `RIMMS_TRACE_FILE`, written to the file as they happen.
    pub timeline: Option<Timeline>,
    /// Places `Target::Auto` calls.
    pub scheduler: Scheduler,
    /// The workers of scoped calls.
    pub queues: DeviceQueues,
    /// The `rimms memstat` page, if published; dropping it stops its thread.
    stats_page: Option<Publisher>,
    /// The FPGA board (and emulator) behind `fpga(n)` devices; after `spaces`, so it is dropped
    /// after the pools that use its memory.
    #[cfg(feature = "fpga")]
    _fpga: Option<FpgaParts>,
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

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The devices, CPU first.
    pub fn devices(&self) -> Vec<Device> {
        self.shared.devices.iter().map(|d| d.device).collect()
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
        self.shared.space_name(space)
    }

    /// The model copies between `space` and the host are ranked by (by the copy planner and
    /// the data-aware scheduler): the measured one if the runtime calibrated its links (see
    /// [`RuntimeBuilder::calibrate_links`]), else the configured one; `None` for the host
    /// and for an unknown space.
    pub fn link_model(&self, space: SpaceId) -> Option<LinkModel> {
        self.shared
            .spaces
            .get(space.index())
            .and_then(SpaceEntry::cost_model)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let s = &*self.shared;
        let mut links = Vec::new();
        for (from, a) in s.spaces.iter().enumerate() {
            for (to, b) in s.spaces.iter().enumerate() {
                let (copies, bytes, time) = s.counters.link(from, to);
                if copies > 0 {
                    links.push(LinkStats {
                        from: a.name.clone(),
                        to: b.name.clone(),
                        copies,
                        bytes,
                        time,
                    });
                }
            }
        }
        let spaces = s
            .spaces
            .iter()
            .enumerate()
            .map(|(i, sp)| {
                let usage = sp.pool.usage();
                let evicted = s.counters.evictions(i);
                SpaceStats {
                    name: sp.name.clone(),
                    capacity: sp.pool.capacity(),
                    in_use: usage.in_use,
                    high_water: usage.high_water,
                    allocations: usage.allocations,
                    frees: usage.frees,
                    zero_fills: s.counters.fills(i),
                    evictions: evicted.0,
                    dropped_bytes: evicted.1,
                    written_back_bytes: evicted.2,
                }
            })
            .collect();
        let apis = registry()
            .apis()
            .iter()
            .enumerate()
            .filter_map(|(index, api)| {
                let (calls, hits) = s.counters.api(index);
                let (merged, merged_into) = s.counters.merges(index);
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
            links,
            spaces,
            apis,
        }
    }

    /// Makes every copy to and from `space` fail (`on`), or succeed again: fault injection,
    /// as `SimConfig::fail_copies` sets from the start, for testing what a program does when
    /// a transfer fails part-way (a kernel's input, a write-back on eviction).
    pub fn inject_copy_faults(&self, space: SpaceId, on: bool) -> Result<()> {
        let entry = self.shared.spaces.get(space.index()).ok_or_else(|| {
            Error::Config(format!(
                "no memory space with id {} in this runtime",
                space.0
            ))
        })?;
        entry.fail_copies.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Zeroes the link, fill and API counters and sets each high-water mark to the current
    /// use, so that one phase of a program can be measured alone.
    pub fn reset_stats(&self) {
        self.shared.counters.clear();
        for sp in &self.shared.spaces {
            sp.pool.reset_high_water();
        }
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

impl Shared {
    pub(crate) fn granule(&self) -> usize {
        self.granule
    }

    /// Whether transfer (and eviction) events go to `tracing`.
    pub(crate) fn tracing(&self) -> bool {
        self.trace
    }

    pub(crate) fn pool(&self, space: SpaceId) -> &Pool {
        &self.spaces[space.index()].pool
    }

    pub(crate) fn space_name(&self, space: SpaceId) -> &str {
        self.spaces
            .get(space.index())
            .map_or("?", |s| s.name.as_str())
    }

    #[inline]
    pub(crate) fn device(&self, device: Device) -> Result<&DeviceEntry> {
        self.position(device).map(|i| &self.devices[i])
    }

    /// Every device, in the order `Runtime::devices` lists them.
    pub(crate) fn device_entries(&self) -> &[DeviceEntry] {
        &self.devices
    }

    /// Where `device` sits in the device table.
    #[inline]
    pub(crate) fn position(&self, device: Device) -> Result<usize> {
        // Devices are stored kind by kind in `Device` order, so an instance is its kind's
        // first position plus its number.
        let position = self.first_of_kind[device.kind().index()] + usize::from(device.instance());
        match self.devices.get(position) {
            Some(entry) if entry.device == device => Ok(position),
            _ => Err(Error::NoDevice {
                device: device.to_string(),
                available: self
                    .devices
                    .iter()
                    .map(|d| d.device.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    pub(crate) fn device_space(&self, device: Device) -> Result<SpaceId> {
        Ok(self.device(device)?.space)
    }

    /// The link between two different spaces: a device's own link to and from the host, and
    /// between two devices the slower of their host links (a peer copy through the same
    /// switch).
    fn link(&self, a: SpaceId, b: SpaceId) -> Option<(LinkModel, bool)> {
        let simulate = self.spaces[a.index()].simulate || self.spaces[b.index()].simulate;
        self.slower_link(a, b, |s| s.link)
            .map(|link| (link, simulate))
    }

    /// The slower of the links of `a` and `b` to the host, as `model` gives each: a copy
    /// between two devices crosses both.
    fn slower_link(
        &self,
        a: SpaceId,
        b: SpaceId,
        model: impl Fn(&SpaceEntry) -> Option<LinkModel>,
    ) -> Option<LinkModel> {
        match (
            model(&self.spaces[a.index()]),
            model(&self.spaces[b.index()]),
        ) {
            (None, None) => None,
            (Some(l), None) | (None, Some(l)) => Some(l),
            (Some(x), Some(y)) => Some(if x.cost_ns(1 << 20) >= y.cost_ns(1 << 20) {
                x
            } else {
                y
            }),
        }
    }

    /// What a copy between `src` and `dst` is expected to cost, for picking the cheapest
    /// source and for the scheduler: measured where the runtime calibrated, else configured.
    pub(crate) fn link_cost(&self, src: SpaceId, dst: SpaceId, bytes: usize) -> u64 {
        self.slower_link(src, dst, SpaceEntry::cost_model)
            .map_or(0, |l| l.cost_ns(bytes))
    }

    /// One copy of `len` bytes between two blocks in different spaces, counted and traced. On
    /// a simulated link the bytes have moved when this returns, but the modelled time is left
    /// to the caller to wait out (see [`Pending`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy(
        &self,
        from: SpaceId,
        to: SpaceId,
        src: *mut u8,
        dst: *mut u8,
        bytes: Range<usize>,
        frags: &Range<usize>,
        reason: &Reason,
    ) -> Result<Pending> {
        let failed = |source: BackendError| Error::Transfer {
            from: self.space_name(from).to_string(),
            to: self.space_name(to).to_string(),
            bytes: bytes.len(),
            source,
        };
        let faulty = |s: SpaceId| self.spaces[s.index()].fail_copies.load(Ordering::Relaxed);
        if faulty(from) || faulty(to) {
            return Err(failed(BackendError::InjectedFault("copy")));
        }
        let started = Instant::now();
        self.move_bytes(from, to, src, dst, bytes.clone())
            .map_err(failed)?;
        let pending = match self.link(from, to) {
            Some((link, true)) => {
                let (a, b) = (&self.spaces[from.index()], &self.spaces[to.index()]);
                let links = [a, b].map(|s| s.link.is_some().then_some(&s.busy));
                let links: Vec<&Occupancy> = links.into_iter().flatten().collect();
                Pending::until(Occupancy::book(&links, started, link.duration(bytes.len())))
            }
            _ => Pending::NONE,
        };
        let took = pending
            .deadline()
            .map_or_else(|| started.elapsed(), |d| d - started);
        self.counters
            .record_copy(from.index(), to.index(), bytes.len(), took);
        if let Some(timeline) = &self.timeline {
            timeline.transfer(
                self.space_name(from),
                self.space_name(to),
                bytes.len(),
                started,
                took,
            );
        }
        if self.trace {
            trace_transfer(
                self.space_name(from),
                self.space_name(to),
                bytes.len(),
                frags,
                reason,
            );
        }
        Ok(pending)
    }

    /// Copies `bytes` of one block into the same bytes of another, each in its space: a
    /// memcpy between host-addressable spaces, the backend's copy where one is device memory,
    /// and between two device memories a peer copy where they can, else a bounce through the
    /// host.
    pub(crate) fn move_bytes(
        &self,
        from: SpaceId,
        to: SpaceId,
        src: *mut u8,
        dst: *mut u8,
        bytes: Range<usize>,
    ) -> std::result::Result<(), BackendError> {
        // A device address is a number the backend understands, not a pointer to offset. A
        // base may be a window's (`data::window`): the address byte 0 of the buffer would
        // have, possibly before the block, so it is offset with wrapping arithmetic and only
        // the result, inside the block, is used.
        let at = |base: *mut u8| base.addr().wrapping_add(bytes.start);
        match (self.device_memory(from), self.device_memory(to)) {
            // SAFETY: both blocks hold the whole range (they were sized for the buffer or
            // argument the range lies in) and belong to different allocations, so they do
            // not overlap.
            (None, None) => unsafe {
                std::ptr::copy_nonoverlapping(
                    src.wrapping_add(bytes.start),
                    dst.wrapping_add(bytes.start),
                    bytes.len(),
                );
                Ok(())
            },
            (None, Some(device)) => {
                // SAFETY: the source is a host-addressable block holding the range, and no
                // writer of those fragments runs while the buffer's lock is held.
                let host = unsafe {
                    std::slice::from_raw_parts(src.wrapping_add(bytes.start), bytes.len())
                };
                device.copy_in(at(dst), host)
            }
            (Some(device), None) => {
                // SAFETY: as above for the destination, which this copy alone writes.
                let host = unsafe {
                    std::slice::from_raw_parts_mut(dst.wrapping_add(bytes.start), bytes.len())
                };
                device.copy_out(at(src), host)
            }
            (Some(source), Some(target)) => {
                let peer = source.copy_to_peer(at(src), &**target, at(dst), bytes.len());
                if let Some(done) = peer {
                    return done;
                }
                let mut bounce = vec![0u8; bytes.len()];
                source.copy_out(at(src), &mut bounce)?;
                target.copy_in(at(dst), &bounce)
            }
        }
    }

    /// The backend's way into `space`, if the CPU cannot address it.
    pub(crate) fn device_memory(&self, space: SpaceId) -> Option<&SharedDeviceMemory> {
        self.spaces[space.index()].device_memory.as_ref()
    }

    /// Fills `bytes` of a block in `space` with zeros: how zero-marked fragments materialise.
    pub(crate) fn fill_zero(
        &self,
        space: SpaceId,
        base: *mut u8,
        bytes: Range<usize>,
    ) -> Result<()> {
        match self.device_memory(space) {
            // SAFETY: the block holds the range (`base` is its buffer's byte 0, see
            // `move_bytes`), so the bytes written lie inside it.
            None => unsafe {
                std::ptr::write_bytes(base.wrapping_add(bytes.start), 0, bytes.len())
            },
            Some(device) => device
                .fill_zero(base.addr().wrapping_add(bytes.start), bytes.len())
                .map_err(|source| Error::Fill {
                    space: self.space_name(space).to_string(),
                    bytes: bytes.len(),
                    source,
                })?,
        }
        self.counters.record_fill(space.index());
        Ok(())
    }
}

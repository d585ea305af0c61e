//! The builder: its settings, and `build`, which opens the devices and puts them together
//! with the memory system into a runtime's [`Shared`] state.

use crate::backend::cpu::CpuBackend;
#[cfg(feature = "fpga")]
use crate::backend::fpga::{FpgaParts, FpgaSource};
use crate::backend::sim::{SimBackend, SimConfig};
use crate::backend::{Backend, SpaceBacking, SpaceSpec};
use crate::data::{BufferMemorySystem, RawBuffer};
use crate::hal::registry::registry;
use crate::hal::{Device, Error, FragmentRule, Result, SpaceId, SpaceName, SpaceSet, MAX_SPACES};
use crate::machine::{DeviceEntry, DeviceTable, ExecMode, Runtime, Shared, SharedParts};
use crate::sched::{CostTable, Policy, Scheduler};
use crate::space::{MemorySystem, Pool, Region, SpaceEntry};
use crate::stats::page::Publisher;
use crate::stats::{ApiCounters, Timeline, TRACE_FILE_ENV};
use std::path::PathBuf;
use std::sync::Arc;

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
    prefetch: bool,
    /// `None`: as `RIMMS_CHECK` says.
    checksums: Option<bool>,
    /// Spaces marked trusted or not by name (`trust`), applied in order over the default.
    trust: Vec<(String, bool)>,
    /// Allocate with the devices' fragment size instead of 4 KiB; `None`: as
    /// `RIMMS_FRAGMENTS` says.
    fragments_from_devices: Option<bool>,
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
            prefetch: true,
            checksums: None,
            trust: Vec::new(),
            fragments_from_devices: None,
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

    /// Record a checksum (xxh3) of every fragment a call or host view writes and check it
    /// when the fragment is next read, in any space, and at `validate()`: a write behind the
    /// runtime's back (a device past its output, another process on a shared mapping) is then
    /// `Error::GhostWrite` instead of bytes used silently. Costs a hash of every byte written
    /// and read and takes every call off the lock-free fast path (`docs/design.md`, "Fragment
    /// checksums"). Default: on if `RIMMS_CHECK` lists `checksums`, else off.
    pub fn checksums(mut self, on: bool) -> Self {
        self.checksums = Some(on);
        self
    }

    /// Marks the memory space `space` (its name, or the name of a device that uses it, as
    /// for [`Self::pool`]) trusted or not. Secure buffers ([`crate::HeteData::alloc_secure`])
    /// are plaintext only in trusted spaces: in an untrusted one they are held as AES-256-GCM
    /// ciphertext, and no kernel or host view may use them there. By default the host and
    /// device-private memory (a GPU's, a sim device's) are trusted, and a space the CPU and
    /// its device share by mapping (an FPGA's u-dma-buf, which another process or device can
    /// map too) is not. The host cannot be untrusted: keys and plaintext live there. The
    /// build fails for a name that is no space or device.
    pub fn trust(mut self, space: impl Into<String>, trusted: bool) -> Self {
        self.trust.push((space.into(), trusted));
        self
    }

    /// Allocate buffers (`HeteData::alloc` and the constructors over it) with the fragment
    /// size the devices present call for (`Runtime::fragment_rule`: RIMMS's `max(L2 line, DMA
    /// burst, warp × element size)`, a power of two, at most the pool granule) instead of the
    /// fixed [`crate::DEFAULT_FRAGMENT_BYTES`]. `HeteData::fragment` still overrides it per
    /// buffer. Default off: the rule gives smaller fragments than 4 KiB on every device this
    /// runtime knows (64 bytes on a CPU alone), which costs bookkeeping per byte, and it has
    /// not been measured against 4 KiB on the apps yet. Default: on if `RIMMS_FRAGMENTS` is
    /// `devices`, off if it is unset or `fixed`; another value fails the build.
    pub fn fragments_from_devices(mut self, on: bool) -> Self {
        self.fragments_from_devices = Some(on);
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

    /// Whether copies start ahead of the calls that need them (default: on): a scope call's
    /// inputs start moving when its group is handed to the device's queue, and a merged group
    /// on a device whose copies take time runs in pieces, each starting once its own rows
    /// have landed (`kernel::merge`, "Pieces"). Off, every copy starts when the call that
    /// needs it runs and the call waits for all of it, so the two settings differ by the
    /// overlap alone. Values, and the bytes moved, are the same either way.
    pub fn prefetch(mut self, on: bool) -> Self {
        self.prefetch = on;
        self
    }

    /// Measure every device link when the runtime starts — a few timed copies of a small and
    /// a large block each way — and rank copies and scheduler candidates by what was measured
    /// instead of the configured [`LinkModel`](crate::space::LinkModel)s (see [`Runtime::link_model`]). Off by default:
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
        let grains = backends.iter().map(|b| (b.device(), b.grain())).collect();
        let rule = FragmentRule::new(grains, self.granule);
        let from_devices = match self.fragments_from_devices {
            Some(on) => on,
            None => fragments_from_env()?,
        };
        let (spaces, devices) = self.space_table(backends)?;
        self.check_pool_names(&spaces, &devices)?;
        let memory = Arc::new(
            self.memory_system(spaces, &devices)?
                .with_fragment_rule(rule, from_devices),
        );
        let stats_page = Publisher::create(self.stats_page.take(), memory.space_names())?;
        let devices = DeviceTable::new(devices, memory.host_mapped());
        let shared = Arc::new(Shared::new(SharedParts {
            scheduler: Scheduler::new(self.policy, self.costs, devices.devices()),
            mode: self.mode,
            merge_calls: self.merge_calls && self.mode == ExecMode::Tracked,
            devices,
            memory,
            calls: ApiCounters::new(registry().api_count()),
            stats_page,
            #[cfg(feature = "fpga")]
            fpga,
        }));
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
            let cuts_from = spaces[space.index()]
                .timed_link()
                .and_then(|link| crate::kernel::least_bytes_to_cut(&link));
            devices.push(DeviceEntry::new(backend, space, memory, cuts_from));
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
            SpaceBacking::Device(memory) => Some(memory.clone()),
            _ => None,
        };
        let pool = match spec.memory {
            SpaceBacking::Reserve => {
                Pool::new(&name, limit.unwrap_or(spec.pool_bytes), self.granule)?
            }
            SpaceBacking::Mapped(memory) => {
                Pool::over_backend(&name, Region::Mapped(memory), self.granule)?
            }
            SpaceBacking::Device(memory) => {
                Pool::over_backend(&name, Region::Device(memory), self.granule)?
            }
        };
        let pool = match limit {
            Some(bytes) => pool.limited(bytes)?,
            None => pool,
        };
        Ok(SpaceEntry::linked(pool, spec.link)
            .simulated(spec.simulate)
            .virtual_clock(spec.virtual_clock)
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
                && !devices.iter().any(|d| &d.device().to_string() == n)
        }) else {
            return Ok(());
        };
        Err(Error::NoSuchSpace {
            name: name.clone(),
            known: spaces
                .iter()
                .map(SpaceEntry::name)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// The memory system over `spaces`, serving `devices`: evicting and zero-copy as the mode allows, traced as
    /// asked (the trace file is created now, so that a path that cannot be written fails the
    /// build, not the end).
    fn memory_system(
        &mut self,
        spaces: Vec<SpaceEntry<RawBuffer>>,
        devices: &[DeviceEntry],
    ) -> Result<BufferMemorySystem> {
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
        let checksums = match self.checksums {
            Some(on) => on,
            None => checksums_from_env()?,
        };
        let tracked = self.mode == ExecMode::Tracked;
        let names: Vec<String> = spaces.iter().map(|s| s.name().to_string()).collect();
        let memory = MemorySystem::new(spaces, self.granule);
        let untrusted = self.untrusted(&names, devices, memory.host_mapped())?;
        // Baseline mode keeps data on the host and stages through temporary blocks: there is
        // nothing of a buffer's to evict, and no placement to choose.
        Ok(memory
            .with_untrusted(untrusted)
            .serving(devices.iter().map(|d| (d.device(), d.space())))
            .evicting(tracked)
            .zero_copy(self.zero_copy && tracked)
            .traced(trace, timeline)
            .checksummed(checksums)
            .prefetching(self.prefetch && tracked))
    }
}

impl RuntimeBuilder {
    /// The spaces secure buffers are ciphertext in: the host-mapped device spaces, then each
    /// `trust` setting in order.
    fn untrusted(
        &self,
        names: &[String],
        devices: &[DeviceEntry],
        host_mapped: SpaceSet,
    ) -> Result<SpaceSet> {
        let mut untrusted = host_mapped;
        for (name, trusted) in &self.trust {
            let space = match names.iter().position(|n| n == name) {
                Some(index) => SpaceId(index as u8),
                None => match devices.iter().find(|d| &d.device().to_string() == name) {
                    Some(device) => device.space(),
                    None => {
                        return Err(Error::NoSuchSpace {
                            name: name.clone(),
                            known: names.join(", "),
                        })
                    }
                },
            };
            if space == SpaceId::HOST && !trusted {
                return Err(Error::Config(
                    "trust(\"host\", false): the host cannot be untrusted, since secure buffers' keys and plaintext live there".to_string(),
                ));
            }
            untrusted = if *trusted {
                SpaceSet(untrusted.0 & !space.bit())
            } else {
                untrusted.with(space)
            };
        }
        Ok(untrusted)
    }
}

/// The variable that turns run-time checks on: a comma-separated list, of which `checksums`
/// is the one there is (`RuntimeBuilder::checksums`).
pub(crate) const CHECK_ENV: &str = "RIMMS_CHECK";

/// The variable that chooses where buffers' default fragment size comes from
/// (`RuntimeBuilder::fragments_from_devices`): `devices` or `fixed`.
pub(crate) const FRAGMENTS_ENV: &str = "RIMMS_FRAGMENTS";

/// Whether `RIMMS_FRAGMENTS` asks for the devices' fragment size; an unknown value fails the
/// build.
fn fragments_from_env() -> Result<bool> {
    match std::env::var_os(FRAGMENTS_ENV) {
        Some(value) => parse_fragments(&value.to_string_lossy()),
        None => Ok(false),
    }
}

/// Whether `value` (`RIMMS_FRAGMENTS`'s syntax) asks for the devices' fragment size.
fn parse_fragments(value: &str) -> Result<bool> {
    match value.trim() {
        "devices" => Ok(true),
        "fixed" | "" => Ok(false),
        other => Err(Error::Config(format!(
            "{FRAGMENTS_ENV}={other}: unknown fragment source (known: devices, fixed)"
        ))),
    }
}

/// Whether `RIMMS_CHECK` asks for checksums; a word it does not know fails the build, so a
/// misspelt check is not silently off.
fn checksums_from_env() -> Result<bool> {
    match std::env::var_os(CHECK_ENV) {
        Some(value) => parse_checks(&value.to_string_lossy()),
        None => Ok(false),
    }
}

/// Whether the checks `value` lists (`RIMMS_CHECK`'s syntax) include checksums.
fn parse_checks(value: &str) -> Result<bool> {
    let mut on = false;
    for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match word {
            "checksums" => on = true,
            "none" | "off" => {}
            other => {
                return Err(Error::Config(format!(
                    "{CHECK_ENV}={value}: unknown check `{other}` (known: checksums, none)"
                )))
            }
        }
    }
    Ok(on)
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

#[cfg(test)]
mod check_env_tests {
    use super::{parse_checks, parse_fragments};

    #[test]
    fn rimms_fragments_chooses_the_devices_or_the_fixed_size_and_names_an_unknown_one() {
        assert!(parse_fragments("devices").unwrap());
        assert!(!parse_fragments(" fixed ").unwrap());
        assert!(!parse_fragments("").unwrap());
        let err = parse_fragments("device").unwrap_err().to_string();
        assert!(
            err.contains("RIMMS_FRAGMENTS") && err.contains("device"),
            "{err}"
        );
    }

    #[test]
    fn rimms_check_turns_checksums_on_and_names_an_unknown_check() {
        assert!(parse_checks("checksums").unwrap());
        assert!(parse_checks(" none , checksums ").unwrap());
        assert!(!parse_checks("").unwrap());
        assert!(!parse_checks("none").unwrap());
        let err = parse_checks("checksum").unwrap_err().to_string();
        assert!(
            err.contains("RIMMS_CHECK") && err.contains("`checksum`"),
            "{err}"
        );
    }
}

//! The runtime's top: the handle's public methods (here), its builder (`builder.rs`) and the
//! buffer constructors that take a runtime (`buffers.rs`).
//!
//! The handle's type and what its clones share ([`Shared`]: the device table, the memory
//! system, the scheduler, the device queues, the call counters) are defined below, in
//! `machine`, so that dispatch, scheduling and scopes reach them without importing this
//! module. `Runtime` is a cheap handle (an `Arc`); buffers hold the memory system, so pools
//! outlive every block carved from them whatever order things are dropped in.
//!
//! Every public method of the handle is in this folder, so one place answers what a runtime
//! offers: here its questions (devices, spaces, stats, fault injection, policy) and the calls
//! that forward to the module doing the work (`launch_host` to `kernel::custom`,
//! `capabilities` to `kernel::capabilities`, `scope` to `scope`); `builtins.rs` the typed
//! built-in APIs.

mod buffers;
mod builder;
mod builtins;

pub use crate::machine::{ExecMode, Runtime};
pub use builder::RuntimeBuilder;

use crate::hal::registry::registry;
use crate::hal::{Device, Result, SpaceId};
use crate::kernel::{ApiDecl, Capabilities, HostArg, KernelArg};
use crate::machine::Shared;
use crate::sched::{calibrate, Policy};
use crate::scope::Scope;
use crate::space::LinkModel;
use crate::stats::{ApiStats, Stats};
use std::fmt;
use std::sync::Arc;

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
            calibrate::calibrate_links(shared.memory())?;
        }
        if let Some(page) = shared.stats_page() {
            // A weak handle: the page must not keep the runtime alive.
            let weak = Arc::downgrade(&shared);
            page.start(move || {
                weak.upgrade()
                    .map(|shared| Runtime::from_shared(shared).stats())
            })?;
        }
        Ok(Runtime::from_shared(shared))
    }

    /// The devices, CPU first.
    pub fn devices(&self) -> Vec<Device> {
        self.shared().devices().collect()
    }

    /// Tracked or baseline.
    pub fn mode(&self) -> ExecMode {
        self.shared().mode()
    }

    /// The memory space `device`'s kernels use.
    pub fn space_of(&self, device: Device) -> Result<SpaceId> {
        self.shared().device_space(device)
    }

    /// The fragment size the devices of this runtime call for, and what each reported: RIMMS's
    /// `max(L2 line, DMA burst, warp × element size)` over them, rounded up to a power of
    /// two and at most the pool granule (`rule.bytes_for(size_of::<T>())`). Buffers are
    /// allocated with it where the builder said `fragments_from_devices(true)`.
    pub fn fragment_rule(&self) -> &crate::hal::FragmentRule {
        self.shared().memory().fragment_rule()
    }

    /// The name of `space` ("host", "sim0", …), as stats report it.
    pub fn space_name(&self, space: SpaceId) -> &str {
        self.shared().memory().space_name(space)
    }

    /// The model copies between `space` and the host are ranked by (by the copy planner and
    /// the data-aware scheduler): the measured one if the runtime calibrated its links (see
    /// [`RuntimeBuilder::calibrate_links`]), else the configured one; `None` for the host
    /// and for an unknown space.
    pub fn link_model(&self, space: SpaceId) -> Option<LinkModel> {
        self.shared().memory().link_model(space)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let s = &**self.shared();
        let apis = registry()
            .apis()
            .iter()
            .enumerate()
            .filter_map(|(index, api)| {
                let (calls, hits) = s.calls().api(index);
                let (merged, merged_into) = s.calls().merges(index);
                (calls > 0 || merged > 0).then_some(ApiStats {
                    name: api.name(),
                    calls,
                    hits,
                    misses: calls - hits,
                    merged,
                    merged_into,
                    merge_retries: s.calls().merge_retries(index),
                })
            })
            .collect();
        Stats {
            links: s.memory().link_stats(),
            spaces: s.memory().space_stats(),
            apis,
        }
    }

    /// Makes every copy to and from `space` fail (`on`), or succeed again: fault injection,
    /// as `SimConfig::fail_copies` sets from the start, for testing what a program does when
    /// a transfer fails part-way (a kernel's input, a write-back on eviction).
    pub fn inject_copy_faults(&self, space: SpaceId, on: bool) -> Result<()> {
        self.shared().memory().inject_copy_faults(space, on)
    }

    /// How this runtime places `Target::Auto` calls.
    pub fn policy(&self) -> &Policy {
        self.shared().scheduler().policy()
    }

    /// Zeroes the link, fill and API counters and sets each high-water mark to the current
    /// use, so that one phase of a program can be measured alone.
    pub fn reset_stats(&self) {
        self.shared().memory().reset_stats();
        self.shared().calls().clear();
    }
}

/// Calls: hand-written host bodies, the device report, scopes. Each forwards to the module
/// that does the work, so the handle's public methods are all read here.
impl Runtime {
    /// Runs `body` on `device` as a kernel of `api`, with `args` acquired in the device's
    /// memory first and written arguments marked after, exactly as registered APIs do. The
    /// body gets the arguments in order, borrowed for the call ([`HostArg::into_slice`],
    /// [`HostArg::into_slice_mut`]). A device whose memory the CPU cannot address (a GPU)
    /// cannot run a host body: that is refused before anything moves.
    ///
    /// ```
    /// use rimms_runtime::{ApiDecl, Device, HeteData, KernelArg, Runtime};
    ///
    /// static DOUBLE: ApiDecl = ApiDecl::new("double");
    /// # fn main() -> rimms_runtime::Result<()> {
    /// let rt = Runtime::new()?;
    /// let mut x = HeteData::from_slice(&rt, &[1u32, 2, 3])?;
    /// rt.launch_host(Device::Cpu, &DOUBLE, [KernelArg::read_write("x", &mut x)], |[x]| {
    ///     for v in x.into_slice_mut::<u32>()? {
    ///         *v *= 2;
    ///     }
    ///     Ok(())
    /// })?;
    /// assert_eq!(x.host()?, &[2, 4, 6]);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn launch_host<const N: usize>(
        &self,
        device: Device,
        api: &'static ApiDecl,
        args: [KernelArg<'_>; N],
        body: impl FnOnce([HostArg<'_>; N]) -> Result<()>,
    ) -> Result<()> {
        crate::kernel::launch_host(self, device, api, args, body)
    }

    /// What each device of this runtime can run, in [`Runtime::devices`] order: the table
    /// `rimms devices` prints.
    ///
    /// ```
    /// # fn main() -> rimms_runtime::Result<()> {
    /// use rimms_runtime::{Device, Runtime, SimConfig};
    /// let sim = SimConfig { max_fft_points: Some(1024), ..SimConfig::default() };
    /// let rt = Runtime::builder().sim(sim).build()?;
    /// let caps = rt.capabilities();
    /// let sim0 = caps.iter().find(|c| c.device == Device::Sim(0)).expect("sim0");
    /// assert!(sim0.has("fft") && sim0.has("power"));
    /// assert_eq!(sim0.fft_points.last(), Some(&1024));
    /// # Ok(())
    /// # }
    /// ```
    pub fn capabilities(&self) -> Vec<Capabilities> {
        crate::kernel::capabilities_of(self.shared())
    }

    /// Runs `f`, whose submitted calls run concurrently, and returns once all have finished:
    /// `Ok` with `f`'s value, or the first error a job returned. A panic in a job is resumed
    /// here after the others finished.
    ///
    /// ```
    /// # use rimms_runtime::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};
    /// # fn main() -> rimms_runtime::Result<()> {
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// let signal = HeteData::from_slice(&rt, &vec![Complex32::new(1.0, 0.0); 4 * 1024])?;
    /// let mut spectrum = HeteData::<Complex32>::alloc(&rt, 4 * 1024)?;
    /// let (rows_in, mut rows_out) = (signal.rows(1024)?, spectrum.rows_mut(1024)?);
    /// rt.scope(|s| {
    ///     for (k, (row, out)) in rows_in.iter().zip(rows_out.iter_mut()).enumerate() {
    ///         let device = if k % 2 == 0 { Device::Cpu } else { Device::Sim(0) };
    ///         s.spawn(move |rt| rt.fft(device, FftDirection::Forward, 1024, row, out));
    ///     }
    /// })?;
    /// assert_eq!(spectrum.host()?[3 * 1024].re, 1024.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scope<'env, F, T>(&'env self, f: F) -> Result<T>
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
    {
        crate::scope::run(self, f)
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("devices", &self.devices())
            .field("mode", &self.shared().mode())
            .finish()
    }
}

/// A runtime for unit tests: 1 MiB of host pool and one sim device of 1 MiB.
#[cfg(test)]
pub(crate) fn small_test_runtime() -> Runtime {
    Runtime::builder()
        .host_pool(1 << 20)
        .sim(crate::backend::sim::SimConfig {
            pool_bytes: 1 << 20,
            ..crate::backend::sim::SimConfig::default()
        })
        .build()
        .expect("runtime")
}

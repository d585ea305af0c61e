//! Which device runs each step of an application.
//!
//! An app is written once against [`Mapping::device`]: it asks where an FFT, a ZIP or one of
//! the small auxiliary steps (`fftshift`, `transpose`, `magnitude`, `conj`) should run, and a
//! mapping answers per step kind. That is what lets one source run all on the CPU, all on a
//! simulated card, FFT and ZIP on the FPGA with the small steps on the CPU (the FPGA's IP
//! cores do only FFT and ZIP), FFT alone on the FPGA, or all on a GPU, without a second copy
//! of the pipeline. `auto` leaves every step to the runtime's
//! scheduler (`Target::Auto`), on the CPU and two simulated cards.

use super::{AppError, Options};
use rimms::{Device, ExecMode, FpgaSource, Policy, Runtime, Target};

/// The first FFT core and the first ZIP core of a 2-FFT + 2-ZIP board (the emulator's layout
/// and `docs/board-example.toml`).
const FPGA_FFT: Device = Device::Fpga(0);
const FPGA_ZIP: Device = Device::Fpga(2);

/// A placement of an app's steps on devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[non_exhaustive]
pub enum Mapping {
    /// Every step on the CPU.
    Cpu,
    /// Every step on simulated device 0, a card with memory of its own.
    Sim,
    /// FFTs on the FPGA's first FFT core, ZIPs on its first ZIP core, the small steps on the
    /// CPU (the cores do only FFT and ZIP). The board named by `RIMMS_FPGA_BOARD`, else the
    /// emulator, laid out as two FFT cores then two ZIP cores.
    Fpga,
    /// FFTs on the FPGA, everything else on the CPU: the paper's CPU-FPGA case.
    FpgaCpu,
    /// Every call placed by the runtime's scheduler, among the CPU and two simulated cards.
    Auto,
    /// Every step on GPU 0 (CUDA), where there is one.
    Gpu,
}

/// The kinds of step an app is made of, as far as placing them goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A (batched) FFT or inverse FFT.
    Fft,
    /// An element-wise multiply or add.
    Zip,
    /// A multiply by the conjugate (a matched filter's correlation step): a ZIP that the
    /// FPGA's ZIP core lacks, so FPGA mappings run it on the CPU.
    MulConj,
    /// The small reshaping and reduction steps: `fftshift`, `transpose`, `magnitude`, `conj`.
    Aux,
}

impl Mapping {
    /// Every mapping this build knows.
    pub const ALL: [Mapping; 6] = [
        Mapping::Cpu,
        Mapping::Sim,
        Mapping::Fpga,
        Mapping::FpgaCpu,
        Mapping::Auto,
        Mapping::Gpu,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mapping::Cpu => "cpu",
            Mapping::Sim => "sim",
            Mapping::Fpga => "fpga",
            Mapping::FpgaCpu => "fpga-cpu",
            Mapping::Auto => "auto",
            Mapping::Gpu => "gpu",
        }
    }

    /// Where steps of kind `step` run.
    pub fn device(self, step: Step) -> Target {
        let device = match (self, step) {
            (Mapping::Auto, _) => return Target::Auto,
            (Mapping::Cpu, _) => Device::Cpu,
            (Mapping::Sim, _) => Device::Sim(0),
            (Mapping::Gpu, _) => Device::Gpu(0),
            (Mapping::Fpga | Mapping::FpgaCpu, Step::Fft) => FPGA_FFT,
            (Mapping::Fpga, Step::Zip) => FPGA_ZIP,
            (Mapping::Fpga | Mapping::FpgaCpu, Step::MulConj) => Device::Cpu,
            (Mapping::Fpga | Mapping::FpgaCpu, _) => Device::Cpu,
        };
        Target::On(device)
    }

    /// A runtime in `mode` with the devices this mapping uses: the simulated cards and the
    /// scheduler (for `auto`) as `opts` configures them.
    pub fn runtime(self, mode: ExecMode, opts: &Options) -> Result<Runtime, AppError> {
        let sim = &opts.sim;
        let builder = opts.pools.iter().fold(
            Runtime::builder()
                .mode(mode)
                .merge_calls(opts.merge)
                .prefetch(opts.prefetch)
                .scheduler(opts.policy.clone())
                .costs(opts.costs.clone()),
            |builder, (space, bytes)| builder.pool(space.clone(), *bytes),
        );
        let builder = match &opts.trace_file {
            Some(path) => builder.trace_file(path.clone()),
            None => builder,
        };
        match self {
            Mapping::Cpu => Ok(builder.build()?),
            Mapping::Sim => Ok(builder.sim(sim.clone()).build()?),
            Mapping::Auto => Ok(builder.sim(sim.clone()).sim(sim.clone()).build()?),
            // Fails with the reason where there is no usable GPU.
            Mapping::Gpu => Ok(builder.gpu(0).build()?),
            // Data the FPGA and the CPU share lives in the u-dma-buf, where both use it in place.
            Mapping::Fpga | Mapping::FpgaCpu => {
                with_board(|source| builder.fpga(source).zero_copy(true).build())
            }
        }
    }
}

/// Opens the FPGA mappings' board with `open`: the board file `RIMMS_FPGA_BOARD` names, else
/// the built-in emulator. A failure with a board file says that the path came from the
/// variable, since the user may not remember setting it; an empty value means unset (the
/// emulator), as `RIMMS_FPGA_BOARD= rimms …` in a shell intends.
pub(crate) fn with_board<T>(
    open: impl FnOnce(FpgaSource) -> rimms::Result<T>,
) -> Result<T, AppError> {
    let named = FpgaSource::board_path_from_env();
    let opened = FpgaSource::from_env().and_then(open);
    match (opened, named) {
        (Err(source), Some(path)) => Err(AppError::Board { path, source }),
        (opened, _) => Ok(opened?),
    }
}

/// The runtime's schedulers as the command line names them, for the `auto` mapping (a fixed
/// placement is what the other mappings are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Sched {
    /// The next device in turn.
    RoundRobin,
    /// Minimum execution time by the cost table.
    Met,
    /// Earliest finish time: CEDR's EFT.
    Eft,
    /// Earliest finish time plus the transfers the call would need.
    #[default]
    DataAwareEft,
}

impl Sched {
    /// The runtime policy.
    pub fn policy(self) -> Policy {
        match self {
            Sched::RoundRobin => Policy::RoundRobin,
            Sched::Met => Policy::Met,
            Sched::Eft => Policy::Eft,
            Sched::DataAwareEft => Policy::DataAwareEft,
        }
    }
}

//! Which device runs each step of an application.
//!
//! An app is written once against [`Mapping::device`]: it asks where an FFT, a ZIP or one of
//! the small auxiliary steps (`fftshift`, `transpose`, `magnitude`, `conj`) should run, and a
//! mapping answers per step kind. That is what lets one source run all on the CPU, all on a
//! simulated card, or — once those backends exist — FFT and ZIP on the FPGA with the small
//! steps on the CPU (the FPGA's IP cores do only FFT and ZIP), FFT alone on the FPGA, or all on
//! a GPU, without a second copy of the pipeline. `auto` (the scheduler picks) will need the
//! runtime to accept an unplaced call; until then there is nothing to map it to.

use rimms::{Device, ExecMode, FpgaSource, Runtime, SimConfig};

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
    pub const ALL: [Mapping; 4] = [Mapping::Cpu, Mapping::Sim, Mapping::Fpga, Mapping::FpgaCpu];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mapping::Cpu => "cpu",
            Mapping::Sim => "sim",
            Mapping::Fpga => "fpga",
            Mapping::FpgaCpu => "fpga-cpu",
        }
    }

    /// The device that runs steps of kind `step`.
    pub fn device(self, step: Step) -> Device {
        match (self, step) {
            (Mapping::Cpu, _) => Device::Cpu,
            (Mapping::Sim, _) => Device::Sim(0),
            (Mapping::Fpga | Mapping::FpgaCpu, Step::Fft) => FPGA_FFT,
            (Mapping::Fpga, Step::Zip) => FPGA_ZIP,
            (Mapping::Fpga | Mapping::FpgaCpu, Step::MulConj) => Device::Cpu,
            (Mapping::Fpga | Mapping::FpgaCpu, _) => Device::Cpu,
        }
    }

    /// A runtime with the devices this mapping uses; `sim` configures the simulated card.
    pub fn runtime(self, mode: ExecMode, sim: &SimConfig) -> rimms::Result<Runtime> {
        let builder = Runtime::builder().mode(mode);
        match self {
            Mapping::Cpu => builder.build(),
            Mapping::Sim => builder.sim(sim.clone()).build(),
            Mapping::Fpga | Mapping::FpgaCpu => builder.fpga(FpgaSource::from_env()?).build(),
        }
    }
}

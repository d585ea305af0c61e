//! Which device runs each step of an application.
//!
//! An app is written once against [`Mapping::device`]: it asks where an FFT, a ZIP or one of
//! the small auxiliary steps (`fftshift`, `transpose`, `magnitude`, `conj`) should run, and a
//! mapping answers per step kind. That is what lets one source run all on the CPU, all on a
//! simulated card, or — once those backends exist — FFT and ZIP on the FPGA with the small
//! steps on the CPU (the FPGA's IP cores do only FFT and ZIP), FFT alone on the FPGA, or all on
//! a GPU, without a second copy of the pipeline. `auto` (the scheduler picks) will need the
//! runtime to accept an unplaced call; until then there is nothing to map it to.

use rimms::{Device, ExecMode, Runtime, SimConfig};

/// A placement of an app's steps on devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[non_exhaustive]
pub enum Mapping {
    /// Every step on the CPU.
    Cpu,
    /// Every step on simulated device 0, a card with memory of its own.
    Sim,
}

/// The kinds of step an app is made of, as far as placing them goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A (batched) FFT or inverse FFT.
    Fft,
    /// An element-wise multiply, add or multiply-by-conjugate.
    Zip,
    /// The small reshaping and reduction steps: `fftshift`, `transpose`, `magnitude`, `conj`.
    Aux,
}

impl Mapping {
    /// Every mapping this build knows.
    pub const ALL: [Mapping; 2] = [Mapping::Cpu, Mapping::Sim];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mapping::Cpu => "cpu",
            Mapping::Sim => "sim",
        }
    }

    /// The device that runs steps of kind `step`.
    pub fn device(self, step: Step) -> Device {
        match (self, step) {
            (Mapping::Cpu, _) => Device::Cpu,
            (Mapping::Sim, _) => Device::Sim(0),
        }
    }

    /// A runtime with the devices this mapping uses; `sim` configures the simulated card.
    pub fn runtime(self, mode: ExecMode, sim: &SimConfig) -> rimms::Result<Runtime> {
        let builder = Runtime::builder().mode(mode);
        match self {
            Mapping::Cpu => builder.build(),
            Mapping::Sim => builder.sim(sim.clone()).build(),
        }
    }
}

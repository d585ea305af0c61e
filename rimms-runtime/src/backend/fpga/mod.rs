//! The FPGA backend's lower layers: u-dma-buf memory, register pages, the Xilinx AXI DMA in
//! simple mode, the FFT and ZIP cores, the board configuration, and a register-level emulator.
//!
//! This is the CPU+FPGA half of RIMMS (the paper's Zynq UltraScale+ path, CEDR's ZCU102 image).
//! Data that an FPGA kernel uses lives in a u-dma-buf region, which the CPU maps and the
//! accelerators reach through their DMA engines by physical address, so FPGA→FPGA chains and
//! host reads of FPGA results copy nothing: only cache maintenance
//! ([`Udmabuf::sync_for_device`], [`Udmabuf::sync_for_cpu`]) moves ownership.
//!
//! Layers, one module per job, each usable on its own:
//!
//! - [`udmabuf`]: the u-dma-buf device: size and physical address from sysfs, the mapping, and
//!   cache maintenance for exactly a byte range.
//! - [`regs`]: one mapped page of control registers, volatile 32-bit access, checked offsets.
//!   Nothing else in the backend touches a raw pointer to registers.
//! - [`axi_dma`]: the AXI DMA driver (reset, start, program, bounded wait, error bits).
//! - [`fft_ip`], [`zip_ip`]: the FFT and ZIP cores: their configuration registers, their limits,
//!   one transform or one ZIP through the DMA.
//! - [`config`]: the board configuration file (TOML) that names every device path, physical
//!   offset and limit, so the same driver runs on a board and against the emulator.
//! - [`buslog`]: the emulator's register bus, an ordered log of every register write.
//! - [`emulator`]: a model of the AXI DMA and both cores over files that stand in for the
//!   u-dma-buf device, its sysfs attributes and the register pages; a thread in tests, or a
//!   separate process driven through the same files.
//! - [`board`]: the facade the runtime wires in as `fpga(n)` devices: [`FpgaBoard`] opens a
//!   configuration and hands out [`Accelerator`]s whose blocking `fft` / `zip` calls take
//!   offsets into the u-dma-buf and do the cache maintenance for exactly the ranges that change
//!   hands.
//!
//! Every wait is bounded by the configured poll timeout, every DMA error bit is read and
//! reported, and every request is checked against the hardware's limits before a register is
//! written. The driver's calls return a [`BackendError`](crate::BackendError), as every
//! backend's do: a fault is [`BackendError::Fpga`](crate::BackendError::Fpga) naming the part
//! (`fft0`, `udmabuf0`) with an [`FpgaFault`] that says which; a size or operation a core does
//! not have is [`BackendError::Unsupported`](crate::BackendError::Unsupported). The runtime
//! turns them into its [`Error`](crate::Error) in one place (`Error::from_backend`).

pub mod axi_dma;
pub mod board;
pub mod buslog;
pub mod config;
mod device;
#[cfg(feature = "fpga-emulator")]
pub mod emulator;
mod fault;
pub mod fft_ip;
pub mod regs;
pub mod timing;
pub mod udmabuf;
pub mod zip_ip;

pub use axi_dma::{AxiDma, Channel, DmaErrorBit};
pub use board::{Accelerator, FpgaBoard};
pub use config::{
    AccelKind, AcceleratorConfig, BoardConfig, FftConfigPath, RegisterBlock, UdmabufConfig,
    MAX_BOARD_FILE_BYTES,
};
pub use device::{FpgaParts, FpgaSource, BOARD_ENV, STRICT_ENV, TIMING_ENV};
#[cfg(feature = "fpga-emulator")]
pub use emulator::{
    Block, BusTrace, Emulator, EmulatorLayout, InjectedFault, Rule, SyncRecord, Violation,
};
pub use fault::FpgaFault;
pub use fft_ip::FftIp;
pub use regs::RegisterPage;
pub use timing::{Phases, TimingModel};
pub use udmabuf::{CacheMode, SyncDirection, SyncFor, SyncMethod, Udmabuf};
pub use zip_ip::{ZipCoreOp, ZipIp};

//! The ZIP core (CEDR's HLS element-wise accelerator).
//!
//! Registers in the core's control page (an HLS AXI-Lite block): `size` at 0x10 and
//! `operation` at 0x18. Operations 0–3 are add, sub, mul, div element-wise on f32; operation 4
//! is a complex multiply of interleaved (re, im) pairs. `size` counts floats for every
//! operation, so a complex multiply of `n` values writes `size = 2n`. The core takes **one**
//! MM2S packet holding input 0 then input 1 (`2·size` floats) and returns one packet of `size`
//! floats.
//!
//! Mapping the runtime's complex `zip` onto it: add and sub are element-wise on the interleaved
//! floats (ops 0 and 1, `size = 2n`); multiply must use op 4; complex divide and multiply by
//! the conjugate have no operation in the core and are [`BackendError::Unsupported`](crate::hal::BackendError::Unsupported), so the runtime
//! falls back to the CPU.
//!
//! Limits: CEDR's core holds 4,096 floats per input (`REQUIRED_BUFFER_SIZE = 4096*3*sizeof(float)`
//! in CEDR's `zip.h`: two inputs and the output). The limit is counted in **floats**, the unit
//! of the `size` register, because that is what overruns the core: the `max_floats` key of the
//! board configuration (default 4,096), so at most 2,048 complex elements per call; longer ZIPs
//! are cut into pieces of that size by the caller.

use super::axi_dma::{AxiDma, Channel};
use super::fault::{unsupported, Result};
use super::regs::RegisterPage;
use crate::hal::ZipOp;

/// The size register.
pub const ZIP_SIZE_REG: usize = 0x10;
/// The operation register.
pub const ZIP_OP_REG: usize = 0x18;
/// Default `max_floats`: floats per input on CEDR's image.
pub const ZIP_DEFAULT_MAX_FLOATS: usize = 4096;

/// An operation of the core, with its register value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZipCoreOp {
    /// 0: `a + b` per float.
    Add = 0,
    /// 1: `a - b` per float.
    Sub = 1,
    /// 2: `a * b` per float.
    Mul = 2,
    /// 3: `a / b` per float.
    Div = 3,
    /// 4: complex multiply of interleaved pairs.
    ComplexMul = 4,
}

impl ZipCoreOp {
    /// The value written to the operation register.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The operation for a register value.
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            0 => Self::Add,
            1 => Self::Sub,
            2 => Self::Mul,
            3 => Self::Div,
            4 => Self::ComplexMul,
            _ => return None,
        })
    }

    /// How the runtime's complex `zip` maps onto the core; `Err` says why it cannot.
    pub fn for_complex(op: ZipOp) -> std::result::Result<Self, &'static str> {
        match op {
            ZipOp::Add => Ok(Self::Add),
            ZipOp::Sub => Ok(Self::Sub),
            ZipOp::Mul => Ok(Self::ComplexMul),
            ZipOp::Div => {
                Err("the ZIP core has no complex divide (its op 3 divides floats one by one)")
            }
            ZipOp::MulConj => Err("the ZIP core has no multiply by the conjugate"),
        }
    }
}

/// One ZIP core's control side.
#[derive(Debug)]
pub struct ZipIp {
    name: String,
    ctrl: RegisterPage,
    max_floats: usize,
}

impl ZipIp {
    /// Wraps the core's control page; `max_floats` per input.
    pub fn new(name: &str, ctrl: RegisterPage, max_floats: usize) -> Self {
        Self {
            name: name.to_owned(),
            ctrl,
            max_floats,
        }
    }

    /// The most complex elements per call (two floats each).
    pub fn max_elems(&self) -> usize {
        self.max_floats / 2
    }

    /// The largest `size` register value (floats per input).
    pub fn max_floats(&self) -> usize {
        self.max_floats
    }

    /// The control page.
    pub fn ctrl(&self) -> &RegisterPage {
        &self.ctrl
    }

    /// Refuses a size the core cannot take, as [`BackendError::Unsupported`](crate::hal::BackendError::Unsupported).
    pub fn check(&self, op: ZipCoreOp, size_floats: usize) -> Result<()> {
        let why = if size_floats == 0 {
            "a ZIP of 0 floats".to_owned()
        } else if size_floats > self.max_floats() {
            format!(
                "{size_floats} floats per input exceed the core's {} ({} complex elements)",
                self.max_floats,
                self.max_elems()
            )
        } else if op == ZipCoreOp::ComplexMul && size_floats % 2 != 0 {
            format!("a complex multiply needs an even number of floats, not {size_floats}")
        } else {
            return Ok(());
        };
        Err(unsupported(&self.name, "zip", why))
    }

    /// One ZIP of `size_floats` floats: `input` is the physical address of input 0 followed
    /// directly by input 1 (`8 · size_floats` bytes), `output` receives `4 · size_floats`
    /// bytes. Checks everything before writing any register.
    pub fn run(
        &self,
        dma: &AxiDma,
        op: ZipCoreOp,
        size_floats: usize,
        input: u64,
        output: u64,
    ) -> Result<()> {
        self.check(op, size_floats)?;
        let out_bytes = size_floats * 4;
        dma.check_buffer(Channel::Mm2s, input, 2 * out_bytes)?;
        dma.check_buffer(Channel::S2mm, output, out_bytes)?;
        // `check` bounded size_floats by max_floats, which the configuration keeps below 2^24.
        self.ctrl.write32(ZIP_SIZE_REG, size_floats as u32)?;
        self.ctrl.write32(ZIP_OP_REG, op.code())?;
        dma.transfer(input, 2 * out_bytes, output, out_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complex_ops_map_onto_the_core_or_say_why_not() {
        assert_eq!(ZipCoreOp::for_complex(ZipOp::Add), Ok(ZipCoreOp::Add));
        assert_eq!(ZipCoreOp::for_complex(ZipOp::Sub), Ok(ZipCoreOp::Sub));
        assert_eq!(
            ZipCoreOp::for_complex(ZipOp::Mul),
            Ok(ZipCoreOp::ComplexMul)
        );
        assert!(ZipCoreOp::for_complex(ZipOp::Div).is_err());
        assert!(ZipCoreOp::for_complex(ZipOp::MulConj).is_err());
        for code in 0..5 {
            assert_eq!(ZipCoreOp::from_code(code).map(ZipCoreOp::code), Some(code));
        }
        assert_eq!(ZipCoreOp::from_code(5), None);
    }
}

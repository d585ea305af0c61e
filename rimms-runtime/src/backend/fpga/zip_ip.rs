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
//! the conjugate have no operation in the core and are [`Error::Unsupported`], so the runtime
//! falls back to the CPU.
//!
//! Limits: DESIGN.md gives "at most 4,096 elements". This backend counts that limit (the
//! `max_elems` key of the board configuration) in **complex elements**, the unit of the
//! runtime's `zip` API, so the `size` register goes up to `2 · max_elems` floats (8,192 by
//! default). A board whose core buffers fewer floats sets a smaller `max_elems`.

use super::axi_dma::{AxiDma, Channel};
use super::regs::RegisterPage;
use crate::{Error, Result, ZipOp};

/// The size register.
pub const ZIP_SIZE_REG: usize = 0x10;
/// The operation register.
pub const ZIP_OP_REG: usize = 0x18;
/// Default `max_elems` (complex elements).
pub const ZIP_DEFAULT_MAX_ELEMS: usize = 4096;

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
    max_elems: usize,
}

impl ZipIp {
    /// Wraps the core's control page; `max_elems` in complex elements.
    pub fn new(name: &str, ctrl: RegisterPage, max_elems: usize) -> Self {
        Self {
            name: name.to_owned(),
            ctrl,
            max_elems,
        }
    }

    /// The most complex elements per call.
    pub fn max_elems(&self) -> usize {
        self.max_elems
    }

    /// The largest `size` register value (floats).
    pub fn max_floats(&self) -> usize {
        self.max_elems.saturating_mul(2)
    }

    /// The control page.
    pub fn ctrl(&self) -> &RegisterPage {
        &self.ctrl
    }

    /// Refuses a size the core cannot take, as [`Error::Unsupported`].
    pub fn check(&self, op: ZipCoreOp, size_floats: usize) -> Result<()> {
        let why = if size_floats == 0 {
            "a ZIP of 0 floats".to_owned()
        } else if size_floats > self.max_floats() {
            format!(
                "{size_floats} floats exceed the core's {} ({} complex elements)",
                self.max_floats(),
                self.max_elems
            )
        } else if op == ZipCoreOp::ComplexMul && size_floats % 2 != 0 {
            format!("a complex multiply needs an even number of floats, not {size_floats}")
        } else {
            return Ok(());
        };
        Err(Error::Unsupported {
            api: "zip",
            device: self.name.clone(),
            why,
        })
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
        dma.ensure_ready()?;
        // `check` bounded size_floats by 2 · max_elems, far below 2^32 for any real core; a
        // configuration that allows more is refused when the board is opened.
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

//! zip3x: two independent element-wise multiplies, then a ZIP of their results — the case
//! where the products never need to leave the device, so a runtime that tracks them copies
//! four inputs in and one result out instead of every operand of every call.

use super::native::Native;
use super::report::{Checksum, Run};
use super::two_fft::{checksum, signal};
use super::{execute, frames, App, AppError, Frame, Mapping, Options, Pipeline, Step, Submit};
use rimms::{Complex32, HeteData, Runtime, ZipOp};

/// Elements per buffer (docs/design.md: N = 4,096).
pub const LEN: usize = 4096;

/// The four operands: `out = a·b + c·d`.
#[derive(Clone, Debug)]
pub struct Input {
    pub(crate) operands: [Vec<Complex32>; 4],
}

impl Input {
    /// Four deterministic signals of `len` elements.
    pub fn generate(len: usize) -> Input {
        Input {
            operands: std::array::from_fn(|salt| signal(len, salt)),
        }
    }
}

/// Runs zip3x.
pub fn run(input: &Input, opts: &Options) -> Result<Run<Checksum>, AppError> {
    let len = input.operands[0].len();
    if len == 0 || input.operands.iter().any(|v| v.len() != len) {
        return Err(AppError::Param(
            "zip3x needs four non-empty operands of one length".to_string(),
        ));
    }
    execute(input, opts)
}

impl Pipeline for Input {
    type Output = Checksum;

    fn app(&self) -> App {
        App::Zip3x
    }

    fn managed<'a>(
        &'a self,
        rt: &'a Runtime,
        map: Mapping,
        submit: Submit,
    ) -> Result<Frame<'a, Checksum>, AppError> {
        let zip = map.device(Step::Zip);
        let len = self.operands[0].len();
        let mut p = HeteData::alloc(rt, len)?;
        let mut q = HeteData::alloc(rt, len)?;
        // A frame's ends: the four operands the host writes and the sum it reads.
        type Ends = (Vec<HeteData<Complex32>>, HeteData<Complex32>);
        frames::run(
            rt,
            submit,
            || {
                let inputs = (0..4)
                    .map(|_| HeteData::alloc(rt, len))
                    .collect::<rimms::Result<Vec<_>>>()?;
                Ok((inputs, HeteData::alloc(rt, len)?))
            },
            move |(inputs, _): &mut Ends, ahead| {
                for (x, values) in inputs.iter_mut().zip(&self.operands) {
                    x.host_fill(|x| x.copy_from_slice(values))?;
                    ahead.send(x, zip)?;
                }
                Ok(())
            },
            move |(inputs, r): &mut Ends| {
                rt.zip(zip, ZipOp::Mul, &inputs[0], &inputs[1], &mut p)?;
                rt.zip(zip, ZipOp::Mul, &inputs[2], &inputs[3], &mut q)?;
                rt.zip(zip, ZipOp::Add, &p, &q, r)?;
                Ok(())
            },
            |(_, r): &mut Ends| Ok(checksum(r.host()?)),
        )
    }

    fn native<'a>(&'a self, dev: &'a Native) -> Result<Frame<'a, Checksum>, AppError> {
        let len = self.operands[0].len();
        let mut inputs = (0..4)
            .map(|_| dev.mirror(len))
            .collect::<Result<Vec<_>, _>>()?;
        let mut p = dev.buffer(len)?;
        let mut q = dev.buffer(len)?;
        let mut r = dev.mirror(len)?;
        Ok(Box::new(move || {
            for (x, values) in inputs.iter_mut().zip(&self.operands) {
                x.host_mut().copy_from_slice(values);
                dev.upload(x);
            }
            dev.zip(ZipOp::Mul, inputs[0].dev(), inputs[1].dev(), &mut p)?;
            dev.zip(ZipOp::Mul, inputs[2].dev(), inputs[3].dev(), &mut q)?;
            dev.zip(ZipOp::Add, &p, &q, r.dev_mut())?;
            dev.download(&mut r);
            Ok(checksum(r.host()))
        }))
    }
}

//! A frame loop as its three parts (the host writes the input, the devices compute, the host
//! reads the result) and two ways to run it.
//!
//! One frame at a time, as the apps have always run, a frame's copies can hide only behind
//! its own calls: the input's behind the first call that reads it, the result's behind the
//! last. Between frames nothing moves. A streaming radar program does better with two sets of
//! frame buffers ([`Submit::DoubleBuffered`]): while frame k computes on one set, the host
//! writes frame k+1's input into the other and sends it on its way (`prefetch_async`, the
//! seed's `hete_Sync_Async`), and reads frame k−1's result, whose copy back the runtime
//! started when its last writer finished. Then a frame takes about the longer of its compute
//! and its copies rather than their sum.
//!
//! The price is latency: a double-buffered frame returns the result of the frame before it
//! (the first one waits for its own). The apps feed every frame the same input, so their
//! results do not change.

use super::{AppError, Frame, Submit};
use rimms::{Runtime, Target};

/// A frame loop of these parts, as `submit` runs it. `make` allocates one set of frame buffers
/// (twice where double-buffered); `fill` writes a frame's input into a set and, where asked,
/// starts its copies to the device that reads it first; `compute` runs a frame's calls on a
/// set (on a worker, beside the host, where double-buffered); `read` takes a set's result.
pub(crate) fn run<'a, S: Send + 'a, R: 'a>(
    rt: &'a Runtime,
    submit: Submit,
    mut make: impl FnMut() -> Result<S, AppError>,
    mut fill: impl FnMut(&mut S, Ahead) -> Result<(), AppError> + 'a,
    mut compute: impl FnMut(&mut S) -> Result<(), AppError> + Send + 'a,
    mut read: impl FnMut(&mut S) -> Result<R, AppError> + 'a,
) -> Result<Frame<'a, R>, AppError> {
    if submit != Submit::DoubleBuffered {
        let mut set = make()?;
        return Ok(Box::new(move || {
            fill(&mut set, Ahead::No)?;
            compute(&mut set)?;
            read(&mut set)
        }));
    }
    let mut sets = [make()?, make()?];
    let mut frame = 0usize;
    Ok(Box::new(move || {
        let first = frame == 0;
        let [even, odd] = &mut sets;
        let (this, other) = if frame % 2 == 0 {
            (even, odd)
        } else {
            (odd, even)
        };
        if first {
            fill(this, Ahead::Yes)?;
        }
        let (compute, mut failed, mut previous) = (&mut compute, None, None);
        let failed_slot = &mut failed;
        rt.scope(|s| -> Result<(), AppError> {
            s.spawn(move |_| {
                *failed_slot = compute(&mut *this).err();
                Ok(())
            });
            fill(other, Ahead::Yes)?;
            if !first {
                previous = Some(read(other)?);
            }
            Ok(())
        })??;
        if let Some(error) = failed {
            return Err(error);
        }
        frame += 1;
        match previous {
            Some(result) => Ok(result),
            // The first frame has no frame before it: it waits for its own.
            None => read(&mut sets[0]),
        }
    }))
}

/// Whether [`run`]'s `fill` starts its input's copies at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ahead {
    /// The frame's first call brings the input (or the runtime's prediction does).
    No,
    /// The frame that reads it runs later: send it now, so it lands meanwhile.
    Yes,
}

impl Ahead {
    /// Starts bringing `data` to `target`'s memory where asked and the target is one device
    /// (a call placed by the scheduler has no device yet). A copy that does not fit now is
    /// left to the call, which makes room.
    pub(crate) fn send<T: bytemuck::Pod>(
        self,
        data: &rimms::HeteData<T>,
        target: Target,
    ) -> Result<(), AppError> {
        match (self, target) {
            (Ahead::Yes, Target::On(device)) => match data.prefetch_async(device) {
                Ok(_in_flight) => Ok(()),
                Err(rimms::Error::DoesNotFit { .. }) => Ok(()),
                Err(e) => Err(e.into()),
            },
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rimms::{Complex32, Device, HeteData, ZipOp};

    /// Frame k's input is k everywhere, and its calls add 100: what each call of the frame
    /// loop returns, over `frames` calls.
    fn results(submit: Submit, frames: usize) -> Vec<f32> {
        let rt = Runtime::builder().build().expect("runtime");
        let hundred = HeteData::from_slice(&rt, &[Complex32::new(100.0, 0.0); 64]).expect("100");
        let mut next_input = 0.0f32;
        let mut frame = run(
            &rt,
            submit,
            || Ok((HeteData::alloc(&rt, 64)?, HeteData::alloc(&rt, 64)?)),
            |(x, _): &mut (HeteData<Complex32>, HeteData<Complex32>), ahead| {
                x.host_write()?.fill(Complex32::new(next_input, 0.0));
                next_input += 1.0;
                ahead.send(x, Target::On(Device::Cpu))
            },
            |(x, y)| Ok(rt.zip(Device::Cpu, ZipOp::Add, x, &hundred, y)?),
            |(_, y)| {
                let y = y.host()?;
                assert!(y.iter().all(|&v| v == y[0]), "one frame's values: {y:?}");
                Ok(y[0].re)
            },
        )
        .expect("frame loop");
        (0..frames).map(|_| frame().expect("frame")).collect()
    }

    /// One frame at a time, each call returns its own frame; double-buffered, the first call
    /// its own and every later one the frame before it, never a mix of two frames' buffers.
    #[test]
    fn a_double_buffered_frame_returns_the_frame_before_it() {
        for submit in [Submit::Sequential, Submit::Scoped] {
            assert_eq!(results(submit, 5), [100.0, 101.0, 102.0, 103.0, 104.0]);
        }
        assert_eq!(
            results(Submit::DoubleBuffered, 6),
            [100.0, 100.0, 101.0, 102.0, 103.0, 104.0]
        );
    }
}

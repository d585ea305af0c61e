//! The built-in APIs: declared here with `#[rimms::api]` like any user API (implementations
//! register per device kind, see `backend::cpu`), and offered as methods of [`Runtime`] that
//! check shapes first; device limits are their implementations' `accepts` checks, which the
//! call asks as any API's, so a bad call is refused before anything moves.
//!
//! The typed methods that call them (`Runtime::fft`, `Runtime::zip`, …) live with the handle,
//! in `runtime/builtins.rs`; their shape checks and device checks are here, shared with the
//! scope's versions of the calls.

use super::accepts::{self, check_as};
use super::{Api, ApiSpec, FftDirection, ZipOp};
use crate::apis;
use crate::hal::Device;
use crate::hal::Target;
use crate::hal::{Error, Result};
use crate::machine::Shared;

/// Refuses a call whose shapes do not fit, naming the API and the device.
pub(crate) fn shape(
    api: &'static str,
    device: Target,
    ok: bool,
    what: impl FnOnce() -> String,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Shape {
            api,
            device,
            what: what(),
        })
    }
}

pub(crate) fn same_len(
    api: &'static str,
    device: Target,
    names: [&str; 2],
    lens: [usize; 2],
) -> Result<()> {
    shape(api, device, lens[0] == lens[1], || {
        format!(
            "`{}` has {} elements but `{}` has {}",
            names[0], lens[0], names[1], lens[1]
        )
    })
}

/// The short equivalent of a ZIP operation a device lacks, for its error.
pub(crate) fn equivalent(op: ZipOp) -> &'static str {
    match op {
        ZipOp::MulConj => "; the same result in two calls: conjugate `b` once where `conj` runs (`rt.conj(Device::Cpu, &b, &mut b_conj)`), then `rt.zip(device, ZipOp::Mul, &a, &b_conj, &mut out)` here",
        ZipOp::Div => "; `rimms devices` lists the devices that divide",
        _ => "",
    }
}

/// Refuses a broadcast row (`name`, `row_len` elements) that does not tile `len` elements.
pub(crate) fn whole_rows(
    api: &'static str,
    device: Target,
    name: &str,
    row_len: usize,
    len: usize,
) -> Result<()> {
    shape(api, device, row_len > 0 && len % row_len == 0, || {
        format!("{len} elements are not a whole number of rows of `{name}`'s {row_len}")
    })
}

/// Refuses an FFT whose shape does not fit: `points` a power of two of at least 2, and
/// `len` a whole number of rows of it.
pub(crate) fn check_fft_shape(target: Target, points: usize, len: usize) -> Result<()> {
    shape(
        "fft",
        target,
        points.is_power_of_two() && points >= 2,
        || format!("the transform size must be a power of two of at least 2, got {points}"),
    )?;
    shape("fft", target, len % points == 0, || {
        format!("{len} elements are not a whole number of {points}-point rows")
    })
}

/// Refuses an FFT of `len` elements in rows of `points` that does not fit its shape or
/// that `device`'s implementation does not accept: a scope's check at submission, as the
/// call itself would check it.
pub(crate) fn check_fft_on(
    shared: &Shared,
    device: Device,
    dir: FftDirection,
    points: usize,
    len: usize,
) -> Result<()> {
    check_fft_shape(device.into(), points, len)?;
    let entry = shared.device(device)?;
    accepts::ask(entry, Api::of(apis::fft::DECL).index(), |dev, check| {
        check_as::<<apis::fft as ApiSpec>::Accepts>(check)?(dev, dir, points, len, len)
    })
    .map_err(|why| accepts::refused("fft", device, why))
}

/// Refuses a ZIP of `len` elements that `device`'s implementation does not accept, saying
/// what would.
pub(crate) fn check_zip_on(shared: &Shared, device: Device, op: ZipOp, len: usize) -> Result<()> {
    let entry = shared.device(device)?;
    accepts::ask(entry, Api::of(apis::zip::DECL).index(), |dev, check| {
        check_as::<<apis::zip as ApiSpec>::Accepts>(check)?(dev, op, len, len, len)
    })
    .map_err(|why| Error::Unsupported {
        api: "zip",
        device,
        why: format!("{why}{}", equivalent(op)),
    })
}

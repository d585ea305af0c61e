//! Which device runs a call: the one its target names, or, for `Target::Auto`, the scheduler's
//! choice among the devices that implement the API and accept the call. The scheduler is
//! policy alone; this is where it is handed the device table and asked what moving the call's
//! arguments to each candidate would cost.

use super::dispatch::KernelArg;
use super::Api;
use crate::hal::registry::registry;
use crate::hal::{Error, Result, Target};
use crate::machine::{DeviceEntry, Shared};
use crate::sched::{NoCandidate, Ticket};

/// The device a call of `api` runs on, as its entry in the device table (looked up once, here):
/// the one `target` names, or the scheduler's choice for `Target::Auto` among devices `fits`
/// accepts (`args` is only built then). The ticket, if any, must live until the call has
/// finished. A named device is a table look-up, inlined into the call's fast path; the
/// scheduler's choice is out of line, so what it inlines (the copy estimates) cannot push
/// this out of its callers (callgrind, `benches/fastpath.rs`).
#[inline(always)]
pub(crate) fn choose_device<'s, 'a, A: AsRef<[KernelArg<'a>]>>(
    shared: &'s Shared,
    target: Target,
    api: Api,
    args: impl FnOnce() -> A,
    fits: impl Fn(&DeviceEntry) -> bool,
) -> Result<(&'s DeviceEntry, Option<Ticket<'s>>)> {
    match target {
        Target::On(device) => Ok((shared.device(device)?, None)),
        Target::Auto => choose_auto(shared, api, args, fits),
    }
}

/// The scheduler's choice for `Target::Auto` ([`choose_device`]).
#[inline(never)]
fn choose_auto<'s, 'a, A: AsRef<[KernelArg<'a>]>>(
    shared: &'s Shared,
    api: Api,
    args: impl FnOnce() -> A,
    fits: impl Fn(&DeviceEntry) -> bool,
) -> Result<(&'s DeviceEntry, Option<Ticket<'s>>)> {
    let args = args();
    let args = args.as_ref();
    let index = api.index();
    let chosen = shared.scheduler().choose(
        shared.device_entries(),
        DeviceEntry::device,
        api.name(),
        args.iter().map(|a| a.len).sum(),
        |entry| {
            registry()
                .implementation(index, entry.device().kind(), entry.forms())
                .is_some()
                && fits(entry)
                // A secure argument is never handed to a device whose memory holds only its
                // ciphertext (`data::secure`): that call would be refused.
                && !args
                    .iter()
                    .any(|a| a.raw.sealed_spaces().contains(entry.space()))
        },
        |entry| {
            args.iter()
                .map(|a| {
                    a.raw
                        .transfer_ns(a.start, a.len, entry.space(), entry.reaches(), a.access)
                })
                .sum()
        },
    );
    match chosen {
        Ok((position, ticket)) => Ok((&shared.device_entries()[position], Some(ticket))),
        Err(NoCandidate) => Err(Error::NoImplementation {
            api: api.name(),
            device: Target::Auto,
            available: format!(
                "{}, none of whose devices here takes this call",
                registry().describe(api.index())
            ),
        }),
    }
}

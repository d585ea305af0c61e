//! The dispatch core: pick the device, acquire, run, mark, count.
//!
//! `launch` is the one call every kernel call ends in.
//!
//! The whole path for arguments that are already where the kernel runs is: per argument one
//! ownership compare and one summary check (load, AND or compare, branch), then the kernel,
//! then two relaxed counter bumps. No lock and no allocation: arguments travel in a
//! fixed-size array.

use crate::coherence::Access;
use crate::data::{BufferMemorySystem, Held, RawBuffer, Writer, WrittenBy};
use crate::hal::SpaceId;
use crate::hal::{During, Error, Result};
use crate::kernel::arg_names::name_argument;
use crate::kernel::Api;
use crate::machine::{DeviceEntry, ExecMode, Shared};
use crate::space::{Block, Pool};
use crate::stats::{Reason, Timeline};

/// One managed argument of a kernel call: a byte range of a buffer and how the kernel uses
/// it. Made with [`KernelArg::read`], [`KernelArg::read_write`] or [`KernelArg::write`].
/// Deliberately neither `Clone` nor `Copy`: a written argument stands for an exclusive borrow
/// of its view, and a copy would hand the kernel the same bytes twice.
pub struct KernelArg<'a> {
    pub(crate) name: &'static str,
    pub(crate) raw: &'a RawBuffer,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) access: Access,
    /// The space the call should use it in (`KernelArg::at`), if it says.
    pub(crate) at: Option<SpaceId>,
}

/// Where the kernel finds an argument: `len` bytes at `ptr` in the space it was acquired in (a
/// host pointer, or a device address that is never dereferenced), and whether the call writes
/// it. Its position in the call, which an error names it by, is its index in the call's
/// array: stored here, it was a store per argument on every call for the error path alone.
#[derive(Clone, Copy)]
pub(crate) struct ArgPtr {
    pub ptr: *mut u8,
    pub len: usize,
    pub writes: bool,
}

/// Runs `body` on the device `entry` describes with `args` acquired there. `body` gets
/// the device entry and where each argument sits, by reference: passed by value, the array
/// was copied into the kernel closure's frame (6 of a 1-element ZIP's 493 instructions). The
/// caller keeps `args` (and so the borrows of its views) for the call; taking the array by
/// value cost a `memcpy` per call.
/// Inlined into its two callers, as it was when it was a method: called, it costs the fast
/// path about 30 instructions of argument passing per call (callgrind, `benches/fastpath.rs`).
#[inline(always)]
pub(crate) fn launch<const N: usize>(
    shared: &Shared,
    entry: &DeviceEntry,
    api: Api,
    args: &[KernelArg<'_>; N],
    body: impl FnOnce(&DeviceEntry, &[ArgPtr; N]) -> Result<()>,
) -> Result<()> {
    let memory = shared.memory();
    for arg in args {
        if !arg.raw.belongs_to(memory) {
            return Err(Error::ForeignBuffer {
                api: api.name(),
                arg: arg.name,
            });
        }
    }
    // Baseline mode stages only through device memory: a call on the host is tracked.
    if shared.mode() == ExecMode::Tracked || entry.space() == SpaceId::HOST {
        tracked(shared, entry, api, args, body)
    } else {
        baseline(shared, entry, api, args, body)
    }
}

/// A tracked call: [`resident_call`] when every argument is already where the kernel runs,
/// otherwise [`tracked_general`].
#[inline(always)]
fn tracked<const N: usize>(
    shared: &Shared,
    entry: &DeviceEntry,
    api: Api,
    args: &[KernelArg<'_>; N],
    body: impl FnOnce(&DeviceEntry, &[ArgPtr; N]) -> Result<()>,
) -> Result<()> {
    let space = entry.space();
    // Only where the device's own space is never evicted: there a resident argument needs no
    // lease and no touch, so the whole check is one summary load per argument. Anything else
    // (an argument placed with `at`, one not resident, an evictable space) takes the general
    // path, which checks again from the start.
    let all_resident = !shared.memory().evictable().contains(space)
        && args
            .iter()
            .all(|a| a.at.is_none() && a.raw.resident(space, a.access));
    if all_resident {
        resident_call(shared, entry, api, args, body)
    } else {
        tracked_general(shared, entry, api, args, body)
    }
}

/// [`tracked_general`] for a call whose arguments are all valid in the device's own space as
/// their access needs, where that space is never evicted: nothing is acquired, pinned,
/// touched or (on success) marked, and nothing is copied ahead. Kept apart so that the
/// common call is straight-line code without the general path's per-argument bookkeeping.
#[inline(always)]
fn resident_call<const N: usize>(
    shared: &Shared,
    entry: &DeviceEntry,
    api: Api,
    args: &[KernelArg<'_>; N],
    body: impl FnOnce(&DeviceEntry, &[ArgPtr; N]) -> Result<()>,
) -> Result<()> {
    let space = entry.space();
    let ptrs = arg_ptrs(args, |_| space);
    // The arms return `Ok(())` afresh rather than the outcome: an `Error` is 96 bytes, and a
    // moved outcome was copied whole on the way out, Ok or not.
    match run_kernel(shared, entry, api, args, Spaces::All(space), ptrs, body) {
        Ok(()) => {
            shared.calls().record_call(api.index(), true);
            Ok(())
        }
        Err(e) => {
            record_writes(entry, api, args, &[space; N], 0, false);
            shared.calls().record_call(api.index(), true);
            Err(e)
        }
    }
}

fn tracked_general<const N: usize>(
    shared: &Shared,
    entry: &DeviceEntry,
    api: Api,
    args: &[KernelArg<'_>; N],
    body: impl FnOnce(&DeviceEntry, &[ArgPtr; N]) -> Result<()>,
) -> Result<()> {
    const { assert!(N <= 32, "a kernel takes at most 32 managed arguments") };
    let space = entry.space();
    // Where each argument is used: the device's own space, or another it reaches in place
    // (the CPU and a host-mapped space) when the data is already valid there as needed.
    let mut spaces = [space; N];
    // Bit i set: argument i is not resident and must be acquired (and marked if written).
    let mut missing = 0u32;
    // An evictor leaves alone the blocks of a buffer a call uses: each argument that may be
    // used in an evictable space is pinned before its resident check and until the marks
    // are made (a lease: `data::lease`). On a device with its own evictable space
    // that is every argument; on the CPU only those not already valid on the host, which is
    // never evicted (the pins are atomic read-modify-writes: the host fast path skips them).
    let memory = shared.memory();
    let evictable = memory.evictable();
    let own_evictable = evictable.contains(space);
    let mut pins = Pinned { args, mask: 0 };
    if own_evictable {
        (0..N).for_each(|i| pins.pin(i));
    }
    for (i, a) in args.iter().enumerate() {
        if let Some(at) = a.at {
            spaces[i] = space_at(shared, entry, api, a, at)?;
            if evictable.contains(at) {
                pins.pin(i);
            }
            if a.raw.resident(at, a.access) {
                a.raw.touch(at);
            } else {
                missing |= 1 << i;
            }
            continue;
        }
        if a.raw.resident(space, a.access) {
            if own_evictable {
                a.raw.touch(space);
            }
            continue;
        }
        if !evictable.is_empty() {
            pins.pin(i);
        }
        match a.raw.resident_in(entry.reaches(), a.access) {
            Some(other) => {
                a.raw.touch(other);
                spaces[i] = other;
            }
            None => {
                missing |= 1 << i;
                spaces[i] = a.raw.target_for(space, entry.reaches(), a.access);
            }
        }
    }
    // A hit is a call for which nothing moved or was filled.
    let hit = missing == 0 || !acquire_missing(api, args, &spaces, pins.mask, &mut missing)?;
    let ptrs = arg_ptrs(args, |i| spaces[i]);
    let outcome = run_kernel(shared, entry, api, args, Spaces::Each(&spaces), ptrs, body);
    // A resident write leaves the state exactly as it is (see `coherence::resident`), so a
    // call that found everything in place and succeeded has nothing to record.
    let next = if missing != 0 || outcome.is_err() {
        record_writes(entry, api, args, &spaces, missing, outcome.is_ok())
    } else {
        [None; N]
    };
    drop(pins);
    // Written bytes whose next place the owner history knows start moving there now.
    if next.iter().any(Option::is_some) {
        super::ahead::copy_predicted(args, &spaces, &next);
    }
    shared.calls().record_call(api.index(), hit);
    outcome
}

/// Runs the kernel on `ptrs` and waits for its completion, timed on the device's timeline.
/// A kernel that unwinds has written an unknown part of its outputs: they are marked as a
/// failed write is (in `spaces`), so the last valid copy survives a caller's `catch_unwind`.
#[inline(always)]
fn run_kernel<const N: usize>(
    shared: &Shared,
    entry: &DeviceEntry,
    api: Api,
    args: &[KernelArg<'_>; N],
    spaces: Spaces<'_, N>,
    ptrs: [ArgPtr; N],
    body: impl FnOnce(&DeviceEntry, &[ArgPtr; N]) -> Result<()>,
) -> Result<()> {
    let unwinding = FailOnUnwind { args, spaces };
    let outcome = timed(shared.memory().timeline(), entry, api, || {
        body(entry, &ptrs)
            .map_err(|e| name_argument(e, args))
            .and_then(|()| completion(entry, api))
    });
    std::mem::forget(unwinding);
    outcome
}

/// Where the kernel finds each argument, argument `i` in `space_of(i)`. A loop over a filled
/// array rather than `std::array::from_fn`, which left one out-of-line call per argument on
/// the fast path (about 22 instructions each; callgrind, `benches/per_call_instructions.rs`).
/// A space given as a function rather than an array lets [`resident_call`], whose arguments
/// all sit in one space, check that space's index once rather than once per argument.
#[inline(always)]
fn arg_ptrs<const N: usize>(
    args: &[KernelArg<'_>; N],
    space_of: impl Fn(usize) -> SpaceId,
) -> [ArgPtr; N] {
    let mut ptrs = [ArgPtr {
        ptr: std::ptr::null_mut(),
        len: 0,
        writes: false,
    }; N];
    for (i, (ptr, arg)) in ptrs.iter_mut().zip(args).enumerate() {
        *ptr = ArgPtr {
            ptr: arg.raw.ptr_in(space_of(i), arg.start),
            len: arg.len,
            writes: arg.access.writes(),
        };
    }
    ptrs
}

/// Records the call's writes: on success those of the arguments in `missing` (written where
/// they were acquired), on failure every written argument's as failed. Returns, per argument,
/// where the owner history predicts its written bytes go next (only on success, with
/// prefetching on), asked under the lock that marked them. Out of [`tracked`], so the path
/// where everything is in place and the call succeeded stays small.
#[cold]
#[inline(never)]
fn record_writes<const N: usize>(
    entry: &DeviceEntry,
    api: Api,
    args: &[KernelArg<'_>; N],
    spaces: &[SpaceId; N],
    missing: u32,
    ok: bool,
) -> [Option<SpaceId>; N] {
    let by = WrittenBy::Done(Writer::Call {
        api: api.name(),
        device: entry.device(),
    });
    let mut next = [None; N];
    for (i, arg) in args.iter().enumerate() {
        match (ok, arg.access.writes()) {
            (true, true) if missing & (1 << i) != 0 => {
                next[i] = arg
                    .raw
                    .mark_written_and_predict(arg.start, arg.len, spaces[i], by);
            }
            (false, true) => arg.raw.mark_failed(arg.start, arg.len, spaces[i]),
            _ => {}
        }
    }
    next
}

/// The space an argument that names one (`KernelArg::at`) is used in: that space, if the
/// device reaches it.
#[cold]
fn space_at(
    shared: &Shared,
    entry: &DeviceEntry,
    api: Api,
    arg: &KernelArg<'_>,
    at: SpaceId,
) -> Result<SpaceId> {
    if at == entry.space() || entry.reaches().contains(at) {
        return Ok(at);
    }
    Err(Error::Unsupported {
        api: api.name(),
        device: entry.device(),
        why: format!(
            "argument {} is to be used in space {} (`at`), which {} cannot reach",
            arg.name,
            shared.memory().space_name(at),
            entry.device()
        ),
    })
}

/// The arguments' buffers that are pinned against eviction (bit i: argument i), unpinned
/// when this goes.
struct Pinned<'s, 'a, const N: usize> {
    args: &'s [KernelArg<'a>; N],
    mask: u32,
}

impl<const N: usize> Pinned<'_, '_, N> {
    #[inline(always)]
    fn pin(&mut self, i: usize) {
        if self.mask & 1 << i == 0 {
            self.args[i].raw.pin();
            self.mask |= 1 << i;
        }
    }
}

impl<const N: usize> Drop for Pinned<'_, '_, N> {
    #[inline(always)]
    fn drop(&mut self) {
        let mut mask = self.mask;
        while mask != 0 {
            self.args[mask.trailing_zeros() as usize].raw.unpin();
            mask &= mask - 1;
        }
    }
}

/// The lease argument `i` holds, which a window move made for it may count as its own: one
/// where `mask` (the call's [`Pinned`] mask) says it is pinned. Never the leases of the call's
/// other arguments on the same buffer: they point into the window too, so a call with two
/// arguments on one buffer never moves its window.
fn held_by(mask: u32, i: usize) -> Held {
    if mask & 1 << i != 0 {
        Held::ONE
    } else {
        Held::NONE
    }
}

/// The bytes argument `i` and the other arguments in `pending` that touch it (same buffer,
/// same space, same access, adjacent or overlapping ranges) cover together, and the set of
/// those arguments: adjacent views of one buffer passed to one call are acquired as one range,
/// so they arrive in one copy rather than one per view.
fn joined_range<const N: usize>(
    args: &[KernelArg<'_>; N],
    spaces: &[SpaceId; N],
    pending: u32,
    i: usize,
) -> (std::ops::Range<usize>, u32) {
    let first = &args[i];
    let (mut bytes, mut merged) = (first.start..first.start + first.len, 1u32 << i);
    let joins = |j: usize| {
        let a = &args[j];
        std::ptr::eq(a.raw, first.raw) && spaces[j] == spaces[i] && a.access == first.access
    };
    // Each pass may reach arguments the previous one made adjacent; at most N passes.
    let mut grew = true;
    while grew {
        grew = false;
        for (j, a) in args.iter().enumerate().skip(i + 1) {
            if pending & !merged & (1 << j) == 0 || !joins(j) {
                continue;
            }
            if a.start <= bytes.end && bytes.start <= a.start + a.len {
                bytes = bytes.start.min(a.start)..bytes.end.max(a.start + a.len);
                merged |= 1 << j;
                grew = true;
            }
        }
    }
    (bytes, merged)
}

/// Acquires the arguments in `missing` (those not already valid where the call uses them),
/// each joined with the adjacent views of its buffer; returns whether any byte moved or was
/// filled, and adds to `missing` the arguments whose blocks it gave up and acquired again (a
/// write to them must be recorded). Kept out of [`tracked`] so the path where everything is in
/// place stays small.
#[cold]
#[inline(never)]
fn acquire_missing<const N: usize>(
    api: Api,
    args: &[KernelArg<'_>; N],
    spaces: &[SpaceId; N],
    pinned: u32,
    missing: &mut u32,
) -> Result<bool> {
    let mut moved = false;
    let mut pending = *missing;
    // How far this call has gone to make room: 0 not at all, 1 its other arguments' blocks
    // cut down to what it uses, 2 their blocks given up (and acquired again below).
    let mut room = 0;
    while pending != 0 {
        let i = pending.trailing_zeros() as usize;
        let (bytes, merged) = joined_range(args, spaces, pending, i);
        pending &= !merged;
        let arg = &args[i];
        let reason = Reason::Kernel {
            api: api.name(),
            arg: arg.name,
        };
        let held = held_by(pinned, i);
        match arg.raw.acquire(
            bytes.start,
            bytes.len(),
            spaces[i],
            arg.access,
            &reason,
            held,
        ) {
            Ok(m) => moved |= m,
            // The call's other arguments may hold blocks larger than the call uses (whole
            // buffers): cut them down to what it uses and try again; failing that, where
            // the pool has the room but in pieces, give their blocks up, so that they come
            // back laid out afresh.
            Err(e) if matches!(e, Error::DoesNotFit { .. }) && room < 2 => {
                room += 1;
                if room == 1 && trim_others(args, spaces, pinned, i)? {
                    pending |= merged;
                    continue;
                }
                room = 2;
                // Giving blocks up helps only where the room is there but in pieces.
                let fragmented = matches!(e, Error::DoesNotFit { needed, free, evictable, .. }
                    if free + evictable >= needed);
                if !fragmented {
                    return Err(e);
                }
                let given_up = give_up_others(args, spaces, pinned, i, bytes.len())?;
                if given_up == 0 {
                    return Err(e);
                }
                *missing |= given_up;
                pending |= merged | given_up;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(moved)
}

/// Cuts the blocks of argument `i`'s fellow arguments down to the ranges the call uses
/// (`RawBuffer::trim`), each buffer that only one argument holds; returns whether any room was
/// freed. A buffer two arguments hold is left alone: its window must cover both.
#[cold]
fn trim_others<const N: usize>(
    args: &[KernelArg<'_>; N],
    spaces: &[SpaceId; N],
    pinned: u32,
    i: usize,
) -> Result<bool> {
    let mut freed = false;
    for (j, a) in args.iter().enumerate() {
        let holders = args.iter().filter(|b| std::ptr::eq(b.raw, a.raw)).count();
        if std::ptr::eq(a.raw, args[i].raw) || holders > 1 {
            continue;
        }
        freed |= a.raw.trim(spaces[j], a.start, a.len, held_by(pinned, j))?;
    }
    Ok(freed)
}

/// Gives up the blocks of argument `i`'s fellow arguments (each buffer that only one
/// argument holds; `RawBuffer::give_up`); returns the arguments whose blocks went, which must
/// be acquired again.
#[cold]
fn give_up_others<const N: usize>(
    args: &[KernelArg<'_>; N],
    spaces: &[SpaceId; N],
    pinned: u32,
    i: usize,
    needed: usize,
) -> Result<u32> {
    let mut given_up = 0;
    for (j, a) in args.iter().enumerate() {
        let holders = args.iter().filter(|b| std::ptr::eq(b.raw, a.raw)).count();
        if std::ptr::eq(a.raw, args[i].raw) || holders > 1 || a.len == 0 {
            continue;
        }
        if a.raw.give_up(spaces[j], needed, held_by(pinned, j))? {
            given_up |= 1 << j;
        }
    }
    Ok(given_up)
}

/// Marks every written argument failed in the space it was used in if dropped, which happens
/// only while the kernel unwinds (the normal path forgets it).
struct FailOnUnwind<'s, 'a, const N: usize> {
    args: &'s [KernelArg<'a>; N],
    spaces: Spaces<'s, N>,
}

/// Where each argument of a call was used: one space for all of them (a resident call, which
/// then builds no array on its path), or one each.
#[derive(Clone, Copy)]
enum Spaces<'s, const N: usize> {
    All(SpaceId),
    Each(&'s [SpaceId; N]),
}

impl<const N: usize> Spaces<'_, N> {
    fn of(self, i: usize) -> SpaceId {
        match self {
            Spaces::All(space) => space,
            Spaces::Each(spaces) => spaces[i],
        }
    }
}

impl<const N: usize> Drop for FailOnUnwind<'_, '_, N> {
    #[cold]
    fn drop(&mut self) {
        for (i, arg) in self.args.iter().enumerate() {
            let space = self.spaces.of(i);
            if arg.access.writes() {
                arg.raw.mark_failed(arg.start, arg.len, space);
            }
        }
    }
}

/// CEDR's way: the data lives on the host; each call stages every argument through freshly
/// allocated device memory.
fn baseline<const N: usize>(
    shared: &Shared,
    entry: &DeviceEntry,
    api: Api,
    args: &[KernelArg<'_>; N],
    body: impl FnOnce(&DeviceEntry, &[ArgPtr; N]) -> Result<()>,
) -> Result<()> {
    let space = entry.space();
    // A secure argument is staged in the clear: only into a trusted space, and wiped after.
    for arg in args {
        let reason = Reason::Baseline {
            api: api.name(),
            arg: arg.name,
        };
        arg.raw.refuse_plaintext(space, &reason)?;
    }
    let mut temps = Staging {
        pool: shared.memory().pool(space),
        blocks: Vec::with_capacity(N),
        wipe: args
            .iter()
            .any(|a| a.raw.is_secure())
            .then(|| (shared.memory().as_ref(), space)),
    };
    // From the acquire on the host until the write-back is marked, the host bytes are this
    // call's: every argument holds a lease, so no eviction writes another copy back into
    // them meanwhile (`data::lease`).
    let mut pins = Pinned { args, mask: 0 };
    (0..N).for_each(|i| pins.pin(i));
    let staged = (|| {
        for arg in args {
            let reason = Reason::Kernel {
                api: api.name(),
                arg: arg.name,
            };
            let host_access = if arg.access == Access::Write {
                Access::Write
            } else {
                Access::Read
            };
            arg.raw.acquire(
                arg.start,
                arg.len,
                SpaceId::HOST,
                host_access,
                &reason,
                Held::ONE,
            )?;
            temps.blocks.push(temps.pool.alloc(arg.len)?);
        }
        for (arg, temp) in args.iter().zip(&temps.blocks) {
            if arg.access != Access::Write {
                let host = host_ptr(arg);
                let reason = Reason::Baseline {
                    api: api.name(),
                    arg: arg.name,
                };
                shared
                    .memory()
                    .copy(
                        SpaceId::HOST,
                        space,
                        host,
                        temp.ptr(),
                        0..arg.len,
                        &(0..0),
                        &reason,
                    )?
                    .wait();
            }
        }
        let ptrs = std::array::from_fn(|i| ArgPtr {
            ptr: temps.blocks[i].ptr(),
            len: args[i].len,
            writes: args[i].access.writes(),
        });
        timed(shared.memory().timeline(), entry, api, || {
            body(entry, &ptrs)
                .map_err(|e| name_argument(e, args))
                .and_then(|()| completion(entry, api))
        })?;
        for (arg, temp) in args.iter().zip(&temps.blocks) {
            if arg.access.writes() {
                let reason = Reason::Baseline {
                    api: api.name(),
                    arg: arg.name,
                };
                shared
                    .memory()
                    .copy(
                        space,
                        SpaceId::HOST,
                        temp.ptr(),
                        host_ptr(arg),
                        0..arg.len,
                        &(0..0),
                        &reason,
                    )?
                    .wait();
                let by = WrittenBy::Done(Writer::Call {
                    api: api.name(),
                    device: entry.device(),
                });
                arg.raw.mark_written(arg.start, arg.len, SpaceId::HOST, by);
            }
        }
        Ok(())
    })();
    drop(temps);
    drop(pins);
    shared.calls().record_call(api.index(), false);
    staged
}

/// Device blocks a baseline call stages its arguments through, returned to their pool however
/// the call ends (an error or an unwinding kernel included).
struct Staging<'p> {
    pool: &'p Pool,
    blocks: Vec<Block>,
    /// Where a secure argument was staged in the clear: the blocks are zeroised first.
    wipe: Option<(&'p BufferMemorySystem, SpaceId)>,
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        for block in self.blocks.drain(..) {
            if let Some((memory, space)) = self.wipe {
                if let Err(e) = memory.wipe(space, block.ptr(), self.pool.held(&block)) {
                    tracing::error!(error = %e, "a secure argument's staging block could not be zeroised");
                }
            }
            self.pool.free(block);
        }
    }
}

/// Runs a kernel, adding it to the timeline when one is being recorded. Always inlined: on
/// the call path it is a test of one pointer, and out of line it cost a call's worth.
#[inline(always)]
fn timed(
    timeline: Option<&Timeline>,
    entry: &DeviceEntry,
    api: Api,
    run: impl FnOnce() -> Result<()>,
) -> Result<()> {
    match timeline {
        None => run(),
        Some(timeline) => {
            let started = std::time::Instant::now();
            let outcome = run();
            timeline.kernel(
                api.name(),
                &entry.device().to_string(),
                started,
                started.elapsed(),
            );
            outcome
        }
    }
}

/// How the kernel that just ran ended, as its backend reports it; success without asking on a
/// device whose backend reports nothing else (`DeviceEntry::reports_completion`).
#[inline]
fn completion(entry: &DeviceEntry, api: Api) -> Result<()> {
    if !entry.reports_completion() {
        return Ok(());
    }
    match entry.backend().completion() {
        Ok(()) => Ok(()),
        Err(source) => Err(Error::from_backend(
            During::Kernel {
                api: api.name(),
                device: entry.device(),
            },
            source,
        )),
    }
}

/// The argument's bytes on the host, where it was acquired just before.
fn host_ptr(arg: &KernelArg<'_>) -> *mut u8 {
    arg.raw.ptr_in(SpaceId::HOST, arg.start)
}

#[cfg(test)]
mod tests {
    use crate::kernel::ApiDecl;
    use crate::{Device, HeteData, KernelArg, Runtime, SimConfig};
    use std::panic::{catch_unwind, AssertUnwindSafe};

    static SCRIBBLE: ApiDecl = ApiDecl::new("scribble");

    fn runtime() -> Runtime {
        crate::runtime::small_test_runtime()
    }

    /// A kernel that unwinds after writing part of its output leaves the copy it was given
    /// as the only valid one, in both modes a kernel can write in.
    #[test]
    fn an_unwinding_kernel_marks_its_outputs_failed() {
        let rt = runtime();
        for discard in [false, true] {
            let mut y = HeteData::from_slice(&rt, &[1u32; 16]).expect("y");
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let arg = if discard {
                    KernelArg::write::<u32>("y", &mut y)
                } else {
                    KernelArg::read_write::<u32>("y", &mut y)
                };
                rt.launch_host(Device::Sim(0), &SCRIBBLE, [arg], |[y]| {
                    y.into_slice_mut::<u32>()?[..8].fill(2);
                    panic!("part-way");
                })
            }));
            assert!(outcome.is_err());
            y.validate().expect("one trusted copy");
            assert_eq!(y.host().expect("y"), &[1; 16]);
        }
    }

    /// `KernelArg::at`: the CPU reaches a host-mapped sim's memory as well as its own, and an
    /// argument placed there is used there — brought in by one copy, written there, so the host
    /// then holds no valid copy of it. A place the device cannot reach fails the call, naming
    /// the argument, with nothing moved.
    #[test]
    fn an_argument_at_a_space_is_used_there() {
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .sim(SimConfig {
                pool_bytes: 1 << 20,
                host_mapped: true,
                ..SimConfig::default()
            })
            .sim(SimConfig {
                pool_bytes: 1 << 20,
                ..SimConfig::default()
            })
            .build()
            .expect("runtime");
        let (mapped, other) = (
            rt.space_of(Device::Sim(0)).expect("sim0"),
            rt.space_of(Device::Sim(1)).expect("sim1"),
        );
        let mut y = HeteData::from_slice(&rt, &[1u32; 16]).expect("y");
        rt.launch_host(
            Device::Cpu,
            &SCRIBBLE,
            [KernelArg::read_write("y", &mut y).at(mapped)],
            |[y]| {
                y.into_slice_mut::<u32>()?.fill(5);
                Ok(())
            },
        )
        .expect("a call with an argument at a space");
        assert_eq!(rt.stats().bytes("host", "sim0").expect("link"), 64);
        let state = y.fragment_state(0).expect("fragment");
        assert_eq!(state.valid.iter().collect::<Vec<_>>(), vec![mapped]);
        let err = rt
            .launch_host(
                Device::Cpu,
                &SCRIBBLE,
                [KernelArg::read("y", &y).at(other)],
                |_| Ok(()),
            )
            .expect_err("sim1 is out of the CPU's reach");
        assert!(
            err.to_string().contains("argument y") && err.to_string().contains("sim1"),
            "{err}"
        );
        assert_eq!(
            rt.stats().total_bytes(),
            64,
            "nothing moved for the refused call"
        );
        assert_eq!(y.host().expect("y"), &[5; 16]);
    }

    /// A resident argument written in place by a kernel that unwinds stays the one copy: there
    /// is nothing older to fall back to, and it is not dropped.
    #[test]
    fn an_unwinding_kernel_on_the_only_copy_keeps_it() {
        let rt = runtime();
        let mut y = HeteData::from_slice(&rt, &[1u32; 16]).expect("y");
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            rt.launch_host(
                Device::Cpu,
                &SCRIBBLE,
                [KernelArg::read_write("y", &mut y)],
                |[y]| {
                    y.into_slice_mut::<u32>()?[..8].fill(2);
                    panic!("part-way");
                },
            )
        }));
        assert!(outcome.is_err());
        y.validate().expect("one copy");
        assert_eq!(&y.host().expect("y")[..9], &[2, 2, 2, 2, 2, 2, 2, 2, 1]);
    }
}

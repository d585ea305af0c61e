//! Calls submitted to a scope (`s.fft(…)`, `s.zip(…)`, [`Scope::call`]): checked at once, held
//! per device while the next call continues them, and run as one merged device call (see
//! `kernel::merge` for exactly when). They borrow their views for the scope, as jobs do, so
//! holding them back is invisible to the rest of the program.

use super::Scope;
use crate::data::{ScopeInput, ScopeOutput};
use crate::hal::Device;
use crate::hal::{Error, Result};
use crate::hal::{FftDirection, ZipOp};
use crate::kernel::builtins::{
    conj::Conj, element_wise, fft::Fft, fftshift::Fftshift, magnitude::Magnitude, power::Power,
    window::Window, zip::Zip, zip_rows::ZipRows, ScopeCall,
};
use crate::kernel::merge::{Group, Part};
use crate::kernel::{KernelArg, MergeRule, Params, UNMERGED_GROUP};
use num_complex::Complex32 as C32;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The scope's [`Held`] groups behind a lock of their own: every row call of a per-row stage
/// takes it (128 or 256 a frame) for a few comparisons, and `std`'s `Mutex`, with its poison
/// checks (the held state is left consistent by every holder, so poison meant nothing here),
/// cost about as much as the comparisons. `parking_lot`'s has none: a compare-exchange to
/// lock and one to unlock, and a thread that finds it taken spins briefly and then parks.
pub(super) type HeldLock<'scope> = parking_lot::Mutex<Held<'scope>>;

/// The groups a scope holds, one per device at most.
pub(super) struct Held<'scope> {
    /// Set when the scope's body returned: later calls go to their queues at once. `groups`
    /// is empty from then on (`Scope::close_calls` takes them, and a new group is held only
    /// while this is clear).
    closed: bool,
    /// The runtime's `merges_calls`, which never changes: here, next to the groups, a row
    /// call reads it without going through the runtime.
    merge: bool,
    groups: Vec<Group<'scope>>,
    /// Calls that joined their group through the lean check ([`Scope::joined_alike`]).
    joined_alike: usize,
}

impl<'scope> Held<'scope> {
    pub(super) fn new(merge: bool) -> Self {
        Held {
            closed: false,
            merge,
            groups: Vec::new(),
            joined_alike: 0,
        }
    }

    /// The group held for `device` that a call may join: none once the scope's body returned,
    /// and none that already holds [`UNMERGED_GROUP`] calls while merging is off.
    #[inline]
    fn open_group(&mut self, device: Device) -> Option<&mut Group<'scope>> {
        if self.closed {
            return None;
        }
        self.held_group(device)
    }

    /// [`Held::open_group`] less the `closed` flag, which a group held tells already: once it
    /// is set no group is held (`closed`).
    #[inline]
    fn held_group(&mut self, device: Device) -> Option<&mut Group<'scope>> {
        debug_assert!(
            !self.closed || self.groups.is_empty(),
            "a closed scope holds nothing"
        );
        let merge = self.merge;
        self.groups
            .iter_mut()
            .find(|g| g.device == device)
            .filter(|g| merge || g.len() < UNMERGED_GROUP)
    }

    /// The group held for `device` that a call of `rules` and `params` with arguments
    /// `parts` continues alike ([`Group::continued_alike`]), if any.
    #[inline]
    fn continued_alike<const N: usize>(
        &mut self,
        device: Device,
        rules: &'static [&'static MergeRule],
        params: Params,
        parts: &[Part; N],
    ) -> Option<&mut Group<'scope>> {
        self.held_group(device)
            .filter(|g| g.continued_alike_parts(rules, params, parts))
    }

    /// [`Held::continued_alike`] for a call of the built-in whose `ScopeCall::ID` is `id`,
    /// through its method ([`Group::continued_alike_builtin`]): only a group that built-in's
    /// method opened, whose first call passed the built-in's shape check.
    #[inline]
    fn continued_alike_builtin<const N: usize>(
        &mut self,
        device: Device,
        id: u8,
        params: Params,
        parts: &[Part; N],
    ) -> Option<&mut Group<'scope>> {
        self.held_group(device)
            .filter(|g| g.continued_alike_builtin(id, params, parts))
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Submits a call of the API `rules` describe on `device`, with its scalar parameters
    /// encoded as `params` and its managed arguments borrowed for the scope. It runs on the
    /// device's queue like a job; consecutive calls that continue one another merge into one
    /// device call (see [`MergeRule`]). A device error comes back from [`crate::Runtime::scope`].
    ///
    /// The built-in APIs have their own methods ([`Scope::fft`], [`Scope::zip`], …), which check
    /// shapes first; an API of your own opts in with rules of its own, kept in a `static` (calls
    /// merge only under the same rules, told by their address, and a `const` slice may have a
    /// different address in each place that uses it):
    ///
    /// ```
    /// use rimms_runtime::{ApiDecl, Device, HeteData, Joins, KernelArg, MergeRule, Runtime};
    ///
    /// // `out = 2 · input`, for u32, one call per row.
    /// static DOUBLE: ApiDecl = ApiDecl::new("double");
    /// static RULES: &[&MergeRule] = &[&MergeRule {
    ///     api: &DOUBLE,
    ///     runs_as: &DOUBLE,
    ///     joins: &[Joins::Concat, Joins::Concat],
    ///     run: |rt, device, _params, args| {
    ///         let (input, mut out) = (args.input::<u32>(0)?, args.output::<u32>(1)?);
    ///         rt.launch_host(device, &DOUBLE, [KernelArg::read("input", &input), KernelArg::write("out", &mut out)], |[i, o]| {
    ///             for (o, i) in o.into_slice_mut::<u32>()?.iter_mut().zip(i.into_slice::<u32>()?) {
    ///                 *o = 2 * i;
    ///             }
    ///             Ok(())
    ///         })
    ///     },
    /// }];
    /// # fn main() -> rimms_runtime::Result<()> {
    /// let rt = Runtime::new()?;
    /// // Four rows of 1,024 (4 KiB, a fragment each, so each row is a mutable view of its own).
    /// let x = HeteData::from_slice(&rt, &(0..4096u32).collect::<Vec<_>>())?;
    /// let mut y = HeteData::<u32>::alloc(&rt, 4096)?;
    /// let (rows, mut outs) = (x.rows(1024)?, y.rows_mut(1024)?);
    /// rt.scope(|s| {
    ///     for (row, out) in rows.iter().zip(outs.iter_mut()) {
    ///         s.call(Device::Cpu, RULES, [0, 0], [KernelArg::read("input", row), KernelArg::write("out", out)])?;
    ///     }
    ///     Ok::<(), rimms_runtime::Error>(())
    /// })??;
    /// assert_eq!(y.host()?[4095], 8190);
    /// # Ok(())
    /// # }
    /// ```
    pub fn call<const N: usize>(
        &'scope self,
        device: Device,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: [KernelArg<'scope>; N],
    ) -> Result<()> {
        self.submit_call(device, rules, params, args, |_| Ok(()), |_| Ok(()))
    }

    /// What every built-in's scope method does with its call's description: submission as
    /// [`Scope::call`] with the built-in's rules, parameters and arguments, its shape check
    /// (of every call that does not join a group alike) and the checks the device must pass
    /// (those of every call that does not join a group alike, and those of a call that opens
    /// a group).
    ///
    /// A call that continues its device's group alike is told by its [`ScopeCall::parts`]
    /// (its arguments less their names, read off its views) and its built-in's
    /// [`ScopeCall::ID`] (which stands for its rules: `Group::continued_alike_builtin`), and
    /// only counted: its arguments are built only on the other way, out of line
    /// ([`Scope::builtin_apart`]), and by debug builds, which assert that they continue the
    /// group alike too, that the general rule check agrees and that the group's rules are
    /// the built-in's.
    #[inline(always)]
    pub(crate) fn builtin<const N: usize, B: ScopeCall<'scope, N>>(
        &'scope self,
        device: Device,
        call: B,
    ) -> Result<()> {
        {
            // Compared without building the arguments (`ScopeCall::parts`), which only a
            // call that does not continue its group alike needs, and by the built-in's ID
            // rather than its rules (`Group::continued_alike_builtin`).
            let mut held = self.calls.lock();
            let parts = call.parts();
            if let Some(group) =
                held.continued_alike_builtin(device, B::ID as u8, call.params(), &parts)
            {
                #[cfg(debug_assertions)]
                {
                    assert!(
                        std::ptr::eq(group.rules(), B::rules()),
                        "two built-ins share the ID {:?}",
                        B::ID
                    );
                    group.debug_check_alike(&call.args());
                }
                group.push_alike::<N>();
                held.joined_alike += 1;
                return Ok(());
            }
        }
        // Through `black_box`: the call's fields are stored for the out of line call only on
        // this way, not before the check above (moved as they are, they were). Its parameters
        // are worked out again there, so that here they stay constants where the call's are.
        // Its error comes boxed, a pointer in a register: the 96-byte `Result` it returned was
        // written to the caller's frame on both ways and read back after, even where the
        // call joined alike and the result is a constant `Ok`.
        self.builtin_apart(device, std::hint::black_box(call))
            .map_err(|e| *e)
    }

    /// How many calls submitted to this scope so far joined their device's group the cheapest
    /// way: told by their views alone, as the next step of the group's held calls, without
    /// asking any rule (and, through a built-in's method, without building their arguments:
    /// [`Scope::builtin`]). A loop of row calls should have all but its first two here. For
    /// tests and benches that check a loop stays on that path; not part of the stable API.
    #[doc(hidden)]
    pub fn joined_alike(&self) -> usize {
        self.calls.lock().joined_alike
    }

    /// [`Scope::builtin`] for a call that does not continue its device's group alike: its
    /// arguments, its shape check (before anything is held: a call of the wrong shape fails
    /// alone, at once), then as [`Scope::submit_call_apart`]. Out of line, so that a row call
    /// that joins alike neither builds its arguments nor keeps the closures' captures.
    #[inline(never)]
    fn builtin_apart<const N: usize, B: ScopeCall<'scope, N>>(
        &'scope self,
        device: Device,
        call: B,
    ) -> std::result::Result<(), Box<Error>> {
        let shared = self.rt.shared();
        let params = call.params();
        let args = call.args();
        B::check_args(device.into(), params, &args)?;
        Ok(self.submit_call_apart(
            device,
            B::rules(),
            params,
            args,
            B::ID as u8,
            |args| B::check_call_on(shared, device, params, args),
            |args| B::check_group_on(shared, device, params, args),
        )?)
    }

    /// [`Scope::call`] with the checks a call must pass on `device`: `call_checks`, which may
    /// depend only on the device, the rules, `params` and the arguments' lengths, and
    /// `group_checks`, which may depend only on the device, the rules, `params` and the
    /// lengths the members of a group share. It asks no shape check: a built-in's method asks
    /// its own ([`Scope::builtin`]).
    ///
    /// A call that joins the group held for its device skips the checks that cannot come out
    /// differently for it: the group's first call passed them with the same device, rules
    /// and parameters (and, for `call_checks`, lengths), and joining needs every argument on
    /// a buffer of the group (so of this runtime). A call that continues a group of several
    /// alike ([`Group::continued_alike`]) joins first thing; that keeps a merged row call at
    /// the cost of one comparison per argument (a per-row stage makes 128 or 256 of them a
    /// frame, where hand-written code makes one batched call).
    #[inline]
    fn submit_call<const N: usize>(
        &'scope self,
        device: Device,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: [KernelArg<'scope>; N],
        call_checks: impl FnOnce(&[KernelArg<'scope>; N]) -> Result<()>,
        group_checks: impl FnOnce(&[KernelArg<'scope>; N]) -> Result<()>,
    ) -> Result<()> {
        {
            let mut held = self.calls.lock();
            let parts = args.each_ref().map(Part::of);
            if let Some(group) = held.continued_alike(device, rules, params, &parts) {
                group.push(args);
                held.joined_alike += 1;
                return Ok(());
            }
        }
        self.submit_call_apart(device, rules, params, args, 0, call_checks, group_checks)
    }

    /// [`Scope::submit_call`] for a call that does not continue its device's group alike: the
    /// checks, then the general join or a new group. Kept out of line so that the row calls
    /// that do continue a group run only the few instructions above. `checked_as`: the
    /// built-in (`ScopeCall::ID`) whose method made the call, its shape check passed and its
    /// rules `rules`, or 0 (`Group::checked_as`).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)] // The checks are closures of the caller's.
    fn submit_call_apart<const N: usize>(
        &'scope self,
        device: Device,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: [KernelArg<'scope>; N],
        checked_as: u8,
        call_checks: impl FnOnce(&[KernelArg<'scope>; N]) -> Result<()>,
        group_checks: impl FnOnce(&[KernelArg<'scope>; N]) -> Result<()>,
    ) -> Result<()> {
        let shared = self.rt.shared();
        // Outside the lock: the checks may run code of the device's (`accepts` checks).
        call_checks(&args)?;
        let args = {
            let mut held = self.calls.lock();
            match held.open_group(device) {
                Some(group) => match group.join(rules, params, args) {
                    Ok(()) => return Ok(()),
                    Err(args) => args,
                },
                None => args,
            }
        };
        let plain = check_rules(rules, N, device)?;
        group_checks(&args)?;
        let position = shared.position(device)?;
        let entry = &shared.device_entries()[position];
        for arg in &args {
            if !arg.raw.belongs_to(shared.memory()) {
                return Err(Error::ForeignBuffer {
                    api: plain.api.name(),
                    arg: arg.name,
                });
            }
        }
        let mut group = Group::new(entry, position, rules, params, args);
        group.checked_as = checked_as;
        let mut held = self.calls.lock();
        if held.closed {
            drop(held);
            self.hand_over(group);
            return Ok(());
        }
        let done = match held.groups.iter().position(|g| g.device == device) {
            // It did not join the group it found (or one sent between the two locks, which
            // it follows just the same): that group is complete.
            Some(k) => std::mem::replace(&mut held.groups[k], group),
            None => {
                held.groups.push(group);
                return Ok(());
            }
        };
        drop(held);
        self.hand_over(done);
        Ok(())
    }

    /// Hands every held group to its queue; later calls go at once. Called when the scope's
    /// body returned, on the thread that waits for the scope: one group runs right there
    /// instead where that keeps the device's order — a CPU group (its kernel still spreads
    /// over the CPU's workers), or else an accelerator's whose queue is idle — which spares a
    /// hand-over to another thread and a wake-up per scope.
    pub(super) fn close_calls(&'scope self) {
        let mut groups = {
            let mut held = self.calls.lock();
            held.closed = true;
            std::mem::take(&mut held.groups)
        };
        let here = groups
            .iter()
            .position(|g| g.device == Device::Cpu)
            .or(groups.len().checked_sub(1))
            .map(|i| groups.swap_remove(i));
        for group in groups {
            self.hand_over(group);
        }
        let Some(group) = here else {
            return;
        };
        let (position, device) = (group.position, group.device);
        let run = move || self.run_here(group);
        let queues = self.rt.shared().queues();
        if let Some(run) = queues.run_here_if_idle(position, device, run) {
            if device == Device::Cpu {
                run();
            } else {
                // Busy: it goes behind the jobs already queued, as any job.
                self.submit_fn(position, device, run);
            }
        }
    }

    /// Runs `group` on this thread, its error or panic the scope's as a job's would be.
    fn run_here(&'scope self, group: Group<'scope>) {
        let merge = self.rt.shared().merges_calls();
        // Recorded without unwinding: this runs before the scope waits for its jobs.
        self.state
            .record(catch_unwind(AssertUnwindSafe(|| group.run(self.rt, merge))));
    }

    /// Sends `run` (which reports its own outcome) to the device's queue as a job.
    fn submit_fn(
        &'scope self,
        position: usize,
        device: Device,
        run: impl FnOnce() + Send + 'scope,
    ) {
        self.submit(position, device, move |_| {
            run();
            Ok(())
        });
    }

    fn hand_over(&'scope self, mut group: Group<'scope>) {
        let merge = self.rt.shared().merges_calls();
        // Its inputs start moving now, while the queue works through what is ahead of it.
        group.prefetch(self.rt, merge);
        let (position, device) = (group.position, group.device);
        self.submit(position, device, move |rt| group.run(rt, merge));
    }

    /// [`crate::Runtime::fft`] as a scope call: the FFT of every row of `points` elements of
    /// `input` into `output`, on `device`. Consecutive calls over following rows merge into one
    /// batched FFT.
    ///
    /// The scope holds the views until it closes, so each is borrowed for the scope (`&x`,
    /// `&mut out`) or is a view that lives that long, by value ([`ScopeInput`],
    /// [`ScopeOutput`]): the rows of [`HeteData::iter_rows`](crate::HeteData::iter_rows) and
    /// [`HeteData::iter_rows_mut`](crate::HeteData::iter_rows_mut) need no vector that
    /// outlives the scope. The other scope calls take their views the same way.
    ///
    /// ```
    /// # use rimms_runtime::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};
    /// # fn main() -> rimms_runtime::Result<()> {
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// let x = HeteData::from_slice(&rt, &vec![Complex32::new(1.0, 0.0); 8 * 64])?;
    /// let mut y = HeteData::<Complex32>::alloc(&rt, 8 * 64)?;
    /// y.fragment(64 * 8)?; // a row per fragment, so each row is a mutable view of its own
    /// let (rows, mut outs) = (x.rows(64)?, y.rows_mut(64)?);
    /// rt.scope(|s| {
    ///     for (row, out) in rows.iter().zip(outs.iter_mut()) {
    ///         s.fft(Device::Sim(0), FftDirection::Forward, 64, row, out)?;
    ///     }
    ///     Ok::<(), rimms_runtime::Error>(())
    /// })??;
    /// let fft = rt.stats().apis.into_iter().find(|a| a.name == "fft").expect("fft ran");
    /// assert_eq!((fft.merged, fft.merged_into, fft.calls), (8, 1, 1));
    /// assert_eq!(y.host()?[7 * 64].re, 64.0);
    /// # Ok(())
    /// # }
    /// ```
    #[inline(always)]
    pub fn fft(
        &'scope self,
        device: Device,
        dir: FftDirection,
        points: usize,
        input: impl ScopeInput<'scope, C32>,
        output: impl ScopeOutput<'scope, C32>,
    ) -> Result<()> {
        let (input, output) = (input.scope_input(), output.scope_output());
        self.builtin(
            device,
            Fft {
                dir,
                points,
                input,
                output,
            },
        )
    }

    /// [`crate::Runtime::zip`] as a scope call: `out = a op b`. Consecutive calls over
    /// following elements merge into one ZIP; calls that share `b` (one filter for every
    /// row) merge into one `zip_rows` where the device has it.
    #[inline(always)]
    pub fn zip(
        &'scope self,
        device: Device,
        op: ZipOp,
        a: impl ScopeInput<'scope, C32>,
        b: impl ScopeInput<'scope, C32>,
        out: impl ScopeOutput<'scope, C32>,
    ) -> Result<()> {
        let (a, b, out) = (a.scope_input(), b.scope_input(), out.scope_output());
        self.builtin(device, Zip { op, a, b, out })
    }

    /// [`crate::Runtime::zip_rows`] as a scope call.
    #[inline(always)]
    pub fn zip_rows(
        &'scope self,
        device: Device,
        op: ZipOp,
        a: impl ScopeInput<'scope, C32>,
        row: impl ScopeInput<'scope, C32>,
        out: impl ScopeOutput<'scope, C32>,
    ) -> Result<()> {
        let (a, row, out) = (a.scope_input(), row.scope_input(), out.scope_output());
        self.builtin(device, ZipRows { op, a, row, out })
    }

    /// [`crate::Runtime::window`] as a scope call.
    #[inline(always)]
    pub fn window(
        &'scope self,
        device: Device,
        input: impl ScopeInput<'scope, C32>,
        window: impl ScopeInput<'scope, f32>,
        out: impl ScopeOutput<'scope, C32>,
    ) -> Result<()> {
        let (input, window, out) = (
            input.scope_input(),
            window.scope_input(),
            out.scope_output(),
        );
        self.builtin(device, Window { input, window, out })
    }

    /// [`crate::Runtime::fftshift`] as a scope call.
    #[inline(always)]
    pub fn fftshift(
        &'scope self,
        device: Device,
        row_len: usize,
        input: impl ScopeInput<'scope, C32>,
        out: impl ScopeOutput<'scope, C32>,
    ) -> Result<()> {
        let (input, out) = (input.scope_input(), out.scope_output());
        self.builtin(
            device,
            Fftshift {
                row_len,
                input,
                out,
            },
        )
    }

    /// [`crate::Runtime::conj`] as a scope call.
    #[inline(always)]
    pub fn conj(
        &'scope self,
        device: Device,
        input: impl ScopeInput<'scope, C32>,
        out: impl ScopeOutput<'scope, C32>,
    ) -> Result<()> {
        let (input, out) = (input.scope_input(), out.scope_output());
        self.builtin(device, element_wise::Call::<Conj>::new(input, out))
    }

    /// [`crate::Runtime::magnitude`] as a scope call.
    #[inline(always)]
    pub fn magnitude(
        &'scope self,
        device: Device,
        input: impl ScopeInput<'scope, C32>,
        out: impl ScopeOutput<'scope, f32>,
    ) -> Result<()> {
        let (input, out) = (input.scope_input(), out.scope_output());
        self.builtin(device, element_wise::Call::<Magnitude>::new(input, out))
    }

    /// [`crate::Runtime::power`] as a scope call.
    #[inline(always)]
    pub fn power(
        &'scope self,
        device: Device,
        input: impl ScopeInput<'scope, C32>,
        out: impl ScopeOutput<'scope, f32>,
    ) -> Result<()> {
        let (input, out) = (input.scope_input(), out.scope_output());
        self.builtin(device, element_wise::Call::<Power>::new(input, out))
    }
}

/// Refuses rules that cannot describe a call of `n` arguments: none, a first rule that does
/// not run as its own API, or rules of different APIs or arities.
fn check_rules(
    rules: &'static [&'static MergeRule],
    n: usize,
    device: Device,
) -> Result<&'static MergeRule> {
    let refuse = |api: &'static str, what: String| Error::Shape {
        api,
        device: device.into(),
        what,
    };
    let Some(&plain) = rules.first() else {
        return Err(refuse(
            "?",
            "a scope call needs at least one merge rule".into(),
        ));
    };
    let name = plain.api.name();
    if !std::ptr::eq(plain.api, plain.runs_as) {
        return Err(refuse(
            name,
            "the first merge rule must run as the API itself".into(),
        ));
    }
    if rules.len() > 32 {
        return Err(refuse(name, "at most 32 merge rules per API".into()));
    }
    for rule in rules {
        if !std::ptr::eq(rule.api, plain.api) || rule.joins.len() != n {
            return Err(refuse(
                name,
                format!(
                    "every merge rule must be of `{name}` and say how each of its {n} arguments joins"
                ),
            ));
        }
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use crate::hal::{Error, FftDirection};
    use crate::kernel::builtins::{fft::Fft, ScopeCall};
    use crate::{Device, HeteData, KernelArg, Runtime};
    use num_complex::Complex32 as C32;

    /// Rows submitted through `Scope::call` join alike too, and are counted: ten rows under the
    /// FFT's rules make one group with eight alike joins (red, 0, where `Scope::call` skips the
    /// lean check), and run as the FFT of every row.
    #[test]
    fn rows_through_scope_call_join_alike() {
        let rt = Runtime::new().expect("rt");
        let (n, row) = (10, 512); // a row is a fragment, so a view of its own
        let input: Vec<C32> = (0..n * row)
            .map(|i| C32::new((i % 7) as f32, (i % 3) as f32))
            .collect();
        let x = HeteData::from_slice(&rt, &input).expect("x");
        let mut y = HeteData::<C32>::alloc(&rt, n * row).expect("y");
        let rows = x.rows(row).expect("rows");
        let mut outs = y.rows_mut(row).expect("rows");
        let params = [FftDirection::Forward as u64, row as u64];
        let fft_rules = <Fft<'_> as ScopeCall<'_, 2>>::rules();
        let joined = rt
            .scope(|s| {
                for (input, out) in rows.iter().zip(outs.iter_mut()) {
                    let args = [
                        KernelArg::read("input", input),
                        KernelArg::write("output", out),
                    ];
                    s.call(Device::Cpu, fft_rules, params, args)?;
                }
                Ok::<usize, Error>(s.joined_alike())
            })
            .expect("scope")
            .expect("rows");
        assert_eq!(joined, n - 2);
        // Each row's DC bin is its sum.
        let out = y.host().expect("host").to_vec();
        for r in 0..n {
            let sum: C32 = input[r * row..(r + 1) * row].iter().sum();
            let dc = out[r * row];
            assert!((dc - sum).norm() < 1e-2, "row {r}: {dc} against {sum}");
        }
    }

    /// A built-in's call that continues a group alike skips its shape check only where the
    /// group's first call passed it: rows of a 3-point FFT held as `Scope::call` holds them
    /// (no shape check) with the FFT's rules do not let the next row in as `s.fft` submits it
    /// without its shape error (red where the built-in's row call ignores the group's
    /// `checked_as`, the built-in's ID in its key).
    #[test]
    fn a_call_alike_to_a_group_no_shape_check_let_in_still_gets_its_shape_error() {
        let rt = Runtime::new().expect("rt");
        let row = 512; // 4 KiB of complex values: a fragment, so each row is a view of its own
        let x = HeteData::<C32>::alloc(&rt, 3 * row).expect("x");
        let mut y = HeteData::<C32>::alloc(&rt, 3 * row).expect("y");
        let rows = x.rows(row).expect("rows");
        let mut outs = y.rows_mut(row).expect("rows");
        let [out0, out1, out2] = &mut outs[..] else {
            unreachable!("three rows")
        };
        let params = [FftDirection::Forward as u64, 3];
        let fft_rules = <Fft<'_> as ScopeCall<'_, 2>>::rules();
        let mut third_row = None;
        // The held rows themselves run when the scope closes, with their 3 points: the
        // built-in's merge rule checks the merged call's shape as its own method would, so the
        // scope fails with that shape error rather than handing 3-point rows to the kernel.
        let closed = rt.scope(|s| {
            for (row, out) in [(&rows[0], out0), (&rows[1], out1)] {
                let args = [
                    KernelArg::read("input", row),
                    KernelArg::write("output", out),
                ];
                s.call(Device::Cpu, fft_rules, params, args)?;
            }
            third_row = Some(s.fft(Device::Cpu, FftDirection::Forward, 3, rows[2], out2));
            Ok::<(), Error>(())
        });
        assert!(
            matches!(third_row, Some(Err(Error::Shape { api: "fft", .. }))),
            "{third_row:?}"
        );
        assert!(
            matches!(closed, Err(Error::Shape { api: "fft", .. })),
            "{closed:?}"
        );
    }

    /// With merging off a group holds at most `UNMERGED_GROUP` calls, on the lean way too
    /// (the scope's own copy of the runtime's flag, `Held::merge`): 40 rows make groups of
    /// 16, 16 and 8, each with all but its first two members joined alike, so 34 alike joins,
    /// where merging on makes one group and 38 (red with `Held::merge` taken as on).
    #[test]
    fn with_merging_off_a_row_loop_still_stops_each_group_at_unmerged_group() {
        use crate::kernel::UNMERGED_GROUP;
        let (rows, row) = (40, 512);
        assert_eq!(UNMERGED_GROUP, 16, "the counts below assume groups of 16");
        for (merge, alike) in [(false, 34), (true, 38)] {
            let rt = Runtime::builder().merge_calls(merge).build().expect("rt");
            let x = HeteData::<C32>::alloc(&rt, rows * row).expect("x");
            let mut y = HeteData::<C32>::alloc(&rt, rows * row).expect("y");
            let ins = x.rows(row).expect("rows");
            let mut outs = y.rows_mut(row).expect("rows");
            let joined = rt
                .scope(|s| {
                    for (input, out) in ins.iter().zip(outs.iter_mut()) {
                        s.fft(Device::Cpu, FftDirection::Forward, row, input, out)?;
                    }
                    Ok::<usize, Error>(s.joined_alike())
                })
                .expect("scope")
                .expect("rows");
            assert_eq!(joined, alike, "merging {merge}");
        }
    }
}

//! Merging calls: calls of one API over neighbouring views become one device call.
//!
//! CEDR's applications call an API once per row of a matrix (128 or 256 calls a stage); each
//! call is a dispatch, an acquire and, on an FPGA, a DMA transaction, while hand-written code
//! makes one batched call per matrix. An API opts into merging with [`MergeRule`]s that say how
//! its calls concatenate, argument by argument ([`Joins`]): the FFT's input and output rows
//! follow one another (its batch dimension), a ZIP's operands and result likewise, and a ZIP
//! whose second operand is the same view every time is a `zip_rows` over the merged rows.
//!
//! # When calls merge
//!
//! Only calls submitted to a scope ([`crate::Scope::fft`], [`crate::Scope::call`], …) merge:
//! they borrow their views until the scope ends, so holding them back changes nothing another
//! part of the program can see (no host access, no conflicting call and no drop of their
//! buffers can happen before the scope returns). Calls made directly (`rt.fft(…)`, also inside
//! a job) run and complete before they return, as always: deferring them would change what the
//! program observes. A scope keeps, per device, one group of calls that have not been handed
//! to the device's queue yet. A new call on that device joins the group when
//!
//! - merging is on ([`crate::RuntimeBuilder::merge_calls`], and the runtime is not in
//!   baseline mode),
//! - it is a call of the same API with the same rules and the same scalar parameters
//!   ([`Params`]: the FFT's direction and size, the ZIP's operation),
//! - no argument is read and written in place ([`crate::Access::ReadWrite`]: a failed merged
//!   call could not be retried member by member on data it half changed),
//! - for at least one rule the device implements (the API the rule runs as, for its kind),
//!   every [`Joins::Concat`] argument starts on the same buffer exactly where the group's
//!   last call's ended, every [`Joins::Same`] argument is the group's first call's view, read
//!   only, and the merged ranges of a written argument overlap no other argument's on its
//!   buffer.
//!
//! Otherwise (another API, other parameters, a gap, a different buffer, the calls in reverse
//! order, another device's group is separate anyway) the group is handed to the device's queue
//! as one job and the new call starts the next group. Every group still open is handed over
//! when the scope's body returns; calls submitted after that (from the scope's jobs) are handed
//! over at once.
//!
//! A group of one call, or a group when merging is off, runs its calls one by one, each its own
//! device call (with merging off a group holds at most [`UNMERGED_GROUP`] calls, which is the
//! jobs-of-a-few-rows split the apps used before, so turning merging off changes nothing but
//! the merging). A group of several runs as one call of the first rule that still holds: one
//! acquire per argument over the whole range, one kernel, one completion; or, where its inputs
//! are still on a link whose copies take time, as a few such calls over consecutive members,
//! each starting once its own rows have landed (`kernel::ahead`).
//!
//! # When a merged call fails
//!
//! A shape error is returned by the call that submitted it, before anything is held. A device
//! error of a merged call marks its written ranges as a failed call's are (the last valid copy
//! survives), and then every member runs again on its own, in order (from the failed piece's
//! first member, where the group ran in pieces): members that succeed have
//! their results, each member that fails fails alone, and the scope returns the first error
//! (later ones are logged).
//!
//! # Observing it
//!
//! [`crate::ApiStats::merged`] counts the calls that were merged and
//! [`crate::ApiStats::merged_into`] the device calls they became; each merged call emits a
//! `tracing` event (target `rimms::merge`) with the API, device and member count.

use super::ahead;
use super::registry::{registry, ApiDecl};
use super::KernelArg;
use crate::coherence::Access;
use crate::data::{check_element, HeteSlice, HeteSliceMut, RawBuffer};
use crate::hal::{Device, SpaceId};
use crate::hal::{Error, Result};
use crate::machine::{DeviceEntry, Runtime};
use bytemuck::Pod;

/// How one managed argument of consecutive calls combines into the merged call's argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Joins {
    /// The calls' views follow one another on one buffer, in call order; the merged call
    /// gets their union (an FFT's rows, a ZIP's elements).
    Concat,
    /// Every call passes the same read-only view; the merged call gets it once (a filter
    /// spectrum multiplied into every row).
    Same,
}

/// A call's scalar parameters, encoded by the API that opts in (calls merge only when theirs
/// are equal).
pub type Params = [u64; 2];

/// How calls of an API merge: declared once beside the API, passed with each scope call.
/// When calls merge and when they do not, and what a failure does, is in the
/// [module's documentation](self).
///
/// An API's rules are a list, plain rule first: `rules[0]` runs as the API itself and runs
/// every call that did not merge; a later rule may run the merged call as another API (ZIP
/// with a shared operand as `zip_rows`).
pub struct MergeRule {
    /// The API whose calls this rule merges.
    pub api: &'static ApiDecl,
    /// The API the merged call runs as; a device merges by this rule only if it implements it.
    pub runs_as: &'static ApiDecl,
    /// How each managed argument joins, in the call's argument order.
    pub joins: &'static [Joins],
    /// Runs one call of `runs_as` with these arguments (a merged call, or one member).
    pub run: fn(&Runtime, Device, Params, &mut MergedArgs<'_>) -> Result<()>,
}

impl std::fmt::Debug for MergeRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MergeRule({} as {})",
            self.api.name(),
            self.runs_as.name()
        )
    }
}

/// The arguments a [`MergeRule::run`] gets, as views: each read argument as often as wanted,
/// each written one once (it stands for an exclusive borrow, and taking it empties its slot).
///
/// The slots are lent by whoever runs the rule, for as long as the views it hands out: a
/// call that runs whole keeps them in an array on its stack, where a vector cost an allocation
/// per call (a direct call on a sim device that is not cut runs this way).
pub struct MergedArgs<'a> {
    api: &'static str,
    device: Device,
    args: &'a mut [Option<KernelArg<'a>>],
}

impl<'a> MergedArgs<'a> {
    fn new(
        api: &'static str,
        device: Device,
        args: &'a mut [Option<KernelArg<'a>>],
    ) -> MergedArgs<'a> {
        MergedArgs { api, device, args }
    }

    fn refused(&self, i: usize, what: &str) -> Error {
        Error::Shape {
            api: self.api,
            device: self.device.into(),
            what: format!("merged argument {i}: {what}"),
        }
    }

    /// Whether argument `i` can be viewed as whole elements of `T`: `T` obeys the rules of
    /// `HeteData::alloc`, against the granule blocks start on and the fragment a window may
    /// start on, and the range is whole elements.
    fn whole<T: Pod>(&self, i: usize, arg: &KernelArg<'_>) -> Result<()> {
        let boundary = arg.raw.memory().granule().min(arg.raw.fragment_bytes());
        check_element::<T>(boundary).map_err(|e| self.refused(i, &e.to_string()))?;
        let size = std::mem::size_of::<T>();
        if arg.start % size == 0 && arg.len % size == 0 {
            Ok(())
        } else {
            Err(self.refused(i, "not whole elements of the type asked for"))
        }
    }

    /// Read argument `i` as a view of `T`.
    pub fn input<T: Pod>(&self, i: usize) -> Result<HeteSlice<'a, T>> {
        match self.args.get(i) {
            Some(Some(arg)) if arg.access == Access::Read => {
                self.whole::<T>(i, arg)?;
                Ok(HeteSlice::from_bytes(arg.raw, arg.start, arg.len))
            }
            _ => Err(self.refused(i, "not a read argument")),
        }
    }

    /// Written argument `i` as a mutable view of `T`; a second request for it is refused.
    pub fn output<T: Pod>(&mut self, i: usize) -> Result<HeteSliceMut<'a, T>> {
        // Checked before the slot is emptied: a request refused for its type takes nothing,
        // so the argument can still be asked for as the type it is.
        match self.args.get(i) {
            Some(Some(arg)) if arg.access.writes() => self.whole::<T>(i, arg)?,
            _ => return Err(self.refused(i, "not a written argument, or already taken")),
        }
        match self.args.get_mut(i).and_then(Option::take) {
            Some(arg) => Ok(HeteSliceMut::from_bytes(arg.raw, arg.start, arg.len)),
            None => Err(self.refused(i, "not a written argument, or already taken")),
        }
    }
}

/// With merging off, the most calls a group holds before it goes to its queue: enough rows per
/// job that handing a job over costs less than its work, as the apps split them by hand
/// before (8 jobs of 16 rows for 128 on a 2-core machine).
pub const UNMERGED_GROUP: usize = 16;

/// Where one member's argument lies on the buffer of the group's first call's argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) len: usize,
}

impl Span {
    fn of(arg: &KernelArg<'_>) -> Span {
        Span {
            start: arg.start,
            len: arg.len,
        }
    }

    /// A member's argument: the first call's `arg` over this span.
    pub(crate) fn on<'a>(self, arg: &KernelArg<'a>) -> KernelArg<'a> {
        KernelArg {
            name: arg.name,
            raw: arg.raw,
            start: self.start,
            len: self.len,
            access: arg.access,
            at: arg.at,
        }
    }
}

/// One managed argument of a call as [`Group::continued_alike`] compares it: a [`KernelArg`]
/// less its name (its buffer by address only), which a row call need not build where it
/// joins alike (`ScopeCall::parts` gives a built-in's without building its arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub(crate) raw: *const RawBuffer,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) access: Access,
    pub(crate) at: Option<SpaceId>,
}

impl Part {
    /// Its access and placement hint as one number, one to one (compared at once).
    #[inline]
    fn how(&self) -> u32 {
        let at = match self.at {
            None => 0,
            Some(SpaceId(space)) => 0x100 | u32::from(space) << 16,
        };
        self.access as u32 | at
    }

    /// `arg` without its name.
    #[inline]
    pub(crate) fn of(arg: &KernelArg<'_>) -> Part {
        Part {
            raw: arg.raw,
            start: arg.start,
            len: arg.len,
            access: arg.access,
            at: arg.at,
        }
    }

    /// A read view, as `KernelArg::reads` makes it.
    #[inline]
    pub(crate) fn reads<T: Pod>(view: &HeteSlice<'_, T>) -> Part {
        let (start, len) = view.byte_range();
        Part {
            raw: view.raw(),
            start,
            len,
            access: Access::Read,
            at: None,
        }
    }

    /// A written view, as `KernelArg::writes` makes it.
    #[inline]
    pub(crate) fn writes<T: Pod>(view: &HeteSliceMut<'_, T>) -> Part {
        let view = view.as_slice();
        let (start, len) = view.byte_range();
        Part {
            raw: view.raw(),
            start,
            len,
            access: Access::Write,
            at: None,
        }
    }
}

/// The most managed arguments of a group that may turn lean (its expected next member is
/// kept in an array of this many): a group of calls with more joins the general way only.
pub(crate) const LEAN_ARGS: usize = 4;

/// What argument `i` of the next member of a lean group that continues it alike is: on the
/// first call's buffer with its access and hint, starting at `start`, the first call's `len`
/// long. Each member that joins alike moves `start` on by `step` (the length for a `Concat`
/// argument, 0 for a `Same` one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Expected {
    /// The address of the first call's buffer: 0 in `Expected::NONE`, which no buffer has
    /// (an address, not a pointer, so that a group stays `Send`).
    raw: usize,
    start: usize,
    len: usize,
    step: usize,
    /// The first call's access and placement hint (`Part::how`).
    how: u32,
}

impl Expected {
    const NONE: Self = Expected {
        raw: 0,
        start: 0,
        len: 0,
        step: 0,
        how: 0,
    };
}

/// [`Group::key`]'s flag of a lean group: no lean group's key is 0, whatever its arity.
const LEAN: u32 = 1 << 8;

/// The bits of [`Group::key`] that [`Group::continued_alike_parts`] compares: the flag and the
/// arity, not the built-in whose shape check the first call passed.
const LEAN_AND_ARITY: u32 = 0xffff;

/// [`Group::key`] of a lean group of `arity` arguments (at most [`LEAN_ARGS`]) whose first
/// call passed the shape check of the built-in `checked_as` (its `ScopeCall::ID`; 0 for none).
#[inline]
const fn lean_key(arity: usize, checked_as: u8) -> u32 {
    LEAN | arity as u32 | (checked_as as u32) << 16
}

/// Calls on one device held by a scope until a call that does not continue them arrives.
pub(crate) struct Group<'a> {
    pub(crate) device: Device,
    pub(crate) position: usize,
    rules: &'static [&'static MergeRule],
    /// Bit r: rule r still holds for every member (and the device implements what it runs as).
    holding: u32,
    params: Params,
    /// Managed arguments per call.
    arity: usize,
    /// No written argument shares its buffer with another argument. True of the first call,
    /// it stays true of every member (a member's arguments lie on the first call's buffers,
    /// position by position), so joining need not compare merged ranges.
    disjoint: bool,
    /// The first call's arguments. Every member's arguments lie on these buffers with these
    /// accesses and placement hints, position by position (joining asks that of each), so a
    /// member's argument is its span on the first call's.
    first: Vec<KernelArg<'a>>,
    /// Each member's byte range of each argument, one call after another (one allocation per
    /// group, not per call): all that varies from member to member, 16 bytes an argument
    /// where a whole [`KernelArg`] is 48. Members that continued the group alike after the
    /// last one here are not stored (`alike`).
    spans: Vec<Span>,
    /// Members after those in `spans` that joined by [`Group::continued_alike`]: each starts
    /// its `Concat` arguments where the one before ended and has the first call's lengths and
    /// its `Same` arguments' views, so their spans follow from the last stored member's
    /// (`Group::span`) and a row call's join stores nothing.
    alike: usize,
    /// The built-in (its `ScopeCall::ID`, never 0) whose shape check (`ScopeCall::check_args`)
    /// and rules the first call passed and has, if it came through that built-in's method; 0
    /// if not. A call of that built-in that continues the group alike, with its parameters and
    /// lengths, passes the check too and skips it, and has the group's rules. A group opened
    /// by `Scope::call`, even with a built-in's rules, has 0.
    pub(crate) checked_as: u8,
    /// The pieces it runs in, once its inputs' copies have started (`kernel::ahead`).
    pieces: Option<usize>,
    /// Not 0 while a later call may join by [`Group::continued_alike`] alone (the group is
    /// lean): the group has several members, exactly one rule holds for them, and its
    /// arguments are `disjoint`. Set only by a join the general rule check let in, so the
    /// members' arguments stand on the first call's buffers with its accesses, hints and (for
    /// `Same` ones) views. While lean it is `lean_key(arity, checked_as)`: what a built-in's
    /// row call must match is then one number, compared at once
    /// ([`Group::continued_alike_builtin`]).
    key: u32,
    /// While the group is lean (`key` not 0): the next member that continues the group
    /// alike, argument by argument (the first `arity`), derived from the first call's
    /// arguments, the last stored member's spans and the `alike` members after it when the
    /// general join turns the group lean, and moved on by each member that joins alike
    /// ([`Group::push_alike`]). Meaningless while not lean; only the general join sets `key`,
    /// and it sets this too.
    next: [Expected; LEAN_ARGS],
}

impl<'a> Group<'a> {
    pub(crate) fn new<const N: usize>(
        entry: &DeviceEntry,
        position: usize,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: [KernelArg<'a>; N],
    ) -> Group<'a> {
        let (kind, forms) = (entry.device().kind(), entry.forms());
        let mut holding = 0u32;
        for (r, rule) in rules.iter().enumerate().take(32) {
            // An API with no registered implementations (run with `launch_host`, say) runs
            // wherever its rule's `run` takes it.
            let index = rule.runs_as.index();
            let runs =
                index == usize::MAX || registry().implementation(index, kind, forms).is_some();
            if runs && rule.joins.len() == N {
                holding |= 1 << r;
            }
        }
        if args.iter().any(|a| a.access == Access::ReadWrite) {
            holding = 0;
        }
        let disjoint = args.iter().enumerate().all(|(i, a)| {
            !a.access.writes()
                || args
                    .iter()
                    .enumerate()
                    .all(|(j, b)| j == i || !std::ptr::eq(a.raw, b.raw))
        });
        let mut spans = Vec::with_capacity(N * 16);
        spans.extend(args.iter().map(Span::of));
        Group {
            device: entry.device(),
            position,
            rules,
            holding,
            params,
            arity: N,
            disjoint,
            first: args.into(),
            spans,
            alike: 0,
            checked_as: 0,
            pieces: None,
            key: 0,
            next: [Expected::NONE; LEAN_ARGS],
        }
    }

    /// A direct call cut into `members` calls alike, each over the next equal part of every
    /// `Concat` argument (under `rules`' plain rule) and the whole of every `Same` one: a
    /// group as a scope holds for the call's rows (`kernel::ahead::run_direct`). `None` where
    /// a part would not join the group, which the caller's checks of the parts rule out.
    pub(crate) fn split<const N: usize>(
        entry: &DeviceEntry,
        position: usize,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: &[KernelArg<'a>; N],
        members: usize,
    ) -> Option<Group<'a>> {
        let joins = rules.first()?.joins;
        let part = |k: usize| -> [KernelArg<'a>; N] {
            std::array::from_fn(|i| match joins.get(i) {
                Some(Joins::Concat) => {
                    let len = args[i].len / members;
                    Span {
                        start: args[i].start + k * len,
                        len,
                    }
                    .on(&args[i])
                }
                _ => Span::of(&args[i]).on(&args[i]),
            })
        };
        let mut group = Group::new(entry, position, rules, params, part(0));
        for k in 1..members {
            group.join(rules, params, part(k)).ok()?;
        }
        Some(group)
    }

    /// Whether `check` passes for the first member's arguments (for a group of calls alike,
    /// every member's lengths).
    pub(crate) fn check_first<const N: usize>(
        &self,
        check: impl FnOnce(&[KernelArg<'a>; N]) -> Result<()>,
    ) -> bool {
        <&[KernelArg<'a>; N]>::try_from(&self.first[..]).is_ok_and(|first| check(first).is_ok())
    }

    /// Its rules, as its first call gave them: for debug builds' check that a built-in's ID
    /// stands for its rules (`Scope::builtin`).
    #[cfg(debug_assertions)]
    pub(crate) fn rules(&self) -> &'static [&'static MergeRule] {
        self.rules
    }

    /// Calls in the group.
    pub(crate) fn len(&self) -> usize {
        self.spans.len() / self.arity.max(1) + self.alike
    }

    /// Where member `k`'s argument `i` lies on the first call's argument `i`'s buffer.
    pub(crate) fn span(&self, k: usize, i: usize) -> Span {
        let n = self.arity;
        let stored = self.spans.len() / n.max(1);
        if k < stored {
            return self.spans[k * n + i];
        }
        // A member that joined alike (`alike` is 0 unless the group is lean, which it stays,
        // under the one rule that holds): it follows the last stored member `k - stored + 1`
        // places on, every member between of the first call's lengths.
        let last = self.spans[(stored - 1) * n + i];
        let rule = self.rules[self.holding.trailing_zeros() as usize];
        match rule.joins[i] {
            Joins::Concat => {
                let len = self.spans[i].len;
                Span {
                    start: last.start + last.len + (k - stored) * len,
                    len,
                }
            }
            Joins::Same => last,
        }
    }

    /// Stores the spans of the members that joined alike, so that another member can follow
    /// them in `spans`.
    fn store_alike(&mut self) {
        let (from, to) = (self.len() - self.alike, self.len());
        let spans: Vec<Span> = (from..to)
            .flat_map(|k| (0..self.arity).map(move |i| (k, i)))
            .map(|(k, i)| self.span(k, i))
            .collect();
        self.spans.extend(spans);
        self.alike = 0;
    }

    /// Adds the call if it continues the group; gives its arguments back if not.
    pub(crate) fn join<const N: usize>(
        &mut self,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: [KernelArg<'a>; N],
    ) -> std::result::Result<(), [KernelArg<'a>; N]> {
        let same_api = std::ptr::eq(self.rules, rules) && self.params == params && N == self.arity;
        let holding = if same_api { self.holds(&args) } else { 0 };
        if holding == 0 {
            return Err(args);
        }
        self.holding = holding;
        if self.alike > 0 {
            self.store_alike();
        }
        self.spans.extend(args.iter().map(Span::of));
        let lean = self.disjoint && holding.is_power_of_two() && N <= LEAN_ARGS;
        self.key = if lean {
            lean_key(N, self.checked_as)
        } else {
            0
        };
        if lean {
            self.expect_next();
        }
        Ok(())
    }

    /// Sets `next` from the one rule that holds, the first call's arguments and the last
    /// member's spans (all stored: `alike` is 0 after a general join): what
    /// `continued_alike` asked of them on every call before it was cached.
    fn expect_next(&mut self) {
        debug_assert_eq!(self.alike, 0, "the general join stores the alike members");
        let n = self.arity;
        let rule = self.rules[self.holding.trailing_zeros() as usize];
        let last = self.spans.len() / n.max(1) - 1;
        self.next = [Expected::NONE; LEAN_ARGS];
        for (i, (first, joins)) in self.first.iter().zip(rule.joins).enumerate().take(n) {
            let (l, len) = (self.span(last, i), self.spans[i].len);
            let (start, step) = match joins {
                Joins::Concat => (l.start + l.len, len),
                Joins::Same => (l.start, 0),
            };
            self.next[i] = Expected {
                raw: std::ptr::from_ref(first.raw) as usize,
                start,
                len,
                step,
                how: Part::of(first).how(),
            };
        }
    }

    /// Whether a call continues the group under the one rule that holds for it, each of its
    /// arguments the length of the first call's: the question [`Group::join`] answers, asked
    /// of a group that already holds several calls, in one pass over the arguments.
    ///
    /// A row call of a per-row stage asks it (128 or 256 a frame): the answer must cost
    /// little. Its yes is a strict special case of the general rule check (`holds`): the
    /// group is lean (its members joined under exactly this rule and write no buffer
    /// another argument uses), so comparing each argument's buffer, access and hint with the
    /// first call's (which every member shares) and its start with where the last member's
    /// ended (for a `Same` argument, the first's view) is what the rule asks, and the merged
    /// ranges need no comparing. Any other call (another API or parameters, a gap, another buffer, a
    /// different length, a group of one, a group of more than [`LEAN_ARGS`] arguments) gets
    /// no and goes the general way. What each argument is compared with (the first call's
    /// buffer, access, hint and length, and where the last member ended) is worked out once,
    /// when the general join turns the group lean, and moved on a step by each member that
    /// joins alike (`Group::next`), so the check is a comparison per field.
    ///
    /// The equal lengths are what let a joining call skip the checks a built-in's call must
    /// pass on the device, and its shape check: both depend only on the device, the API, its
    /// parameters and the arguments' lengths, which are the first call's, and it passed them
    /// (the shape check where `checked_as` says so).
    #[inline]
    pub(crate) fn continued_alike<const N: usize>(
        &self,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: &[KernelArg<'a>; N],
    ) -> bool {
        self.continued_alike_parts(rules, params, &args.each_ref().map(Part::of))
    }

    /// [`Group::continued_alike`] of a call's arguments without their names: each compared
    /// with what `next` expects (its buffer, access, hint, start and length), in one pass.
    #[inline]
    pub(crate) fn continued_alike_parts<const N: usize>(
        &self,
        rules: &'static [&'static MergeRule],
        params: Params,
        args: &[Part; N],
    ) -> bool {
        N <= LEAN_ARGS
            && self.key & LEAN_AND_ARITY == lean_key(N, 0)
            && std::ptr::eq(self.rules, rules)
            && self.params == params
            && self.next_is(args)
    }

    /// [`Group::continued_alike_parts`] of a call of the built-in whose `ScopeCall::ID` is
    /// `id` (not 0), through that built-in's method: the group's lean flag, its arity and the
    /// built-in that opened it in one compare (`key`), which stands for the rules too. A
    /// group whose `checked_as` is `id` was opened by that built-in's method, with its rules
    /// (the value of one `static`, so one address and length), and its first call passed the
    /// built-in's shape check; any other group (opened by `Scope::call`, by another built-in,
    /// not lean, of another arity) has another key. So this says yes exactly where
    /// `continued_alike_parts` with the built-in's rules does and the group's first call passed
    /// its shape check, without loading the rules.
    #[inline]
    pub(crate) fn continued_alike_builtin<const N: usize>(
        &self,
        id: u8,
        params: Params,
        args: &[Part; N],
    ) -> bool {
        debug_assert_ne!(id, 0, "a built-in's ID is never 0");
        N <= LEAN_ARGS && self.key == lean_key(N, id) && self.params == params && self.next_is(args)
    }

    /// Whether `args` are what `next` expects, field by field (the group lean, of `N`
    /// arguments, at most [`LEAN_ARGS`]).
    #[inline]
    fn next_is<const N: usize>(&self, args: &[Part; N]) -> bool {
        // Every field of every argument at once, without a branch per comparison: the
        // differences ORed together are zero only where all are equal.
        let differ = (0..N).fold(0, |differ, i| {
            let (a, e) = (&args[i], &self.next[i]);
            differ
                | (a.raw as usize ^ e.raw)
                | (a.start ^ e.start)
                | (a.len ^ e.len)
                | (a.how() ^ e.how) as usize
        });
        differ == 0
    }

    /// Adds a call that [`Group::continued_alike`] said continues the group.
    #[inline]
    pub(crate) fn push<const N: usize>(&mut self, args: [KernelArg<'a>; N]) {
        self.debug_check_alike(&args);
        self.push_alike::<N>();
    }

    /// Debug builds: that `args` continue the group alike, and that the general rule check
    /// agrees (the lean check is a strict special case of it).
    #[inline]
    pub(crate) fn debug_check_alike<const N: usize>(&self, args: &[KernelArg<'a>; N]) {
        debug_assert!(
            self.continued_alike(self.rules, self.params, args),
            "only a call that continues the group alike is pushed"
        );
        debug_assert_eq!(
            self.holds(args),
            self.holding,
            "the lean continuation check let in a call the rule check refuses"
        );
    }

    /// Counts a member of `N` arguments that [`Group::continued_alike`] said continues the
    /// group: its spans follow from the group's (`Group::span`), so nothing is stored; the
    /// next member is expected one step on. `N` is the group's arity (the check compared
    /// them), given as a constant so that the steps are as many straight adds rather than a
    /// loop over the arity read from the group.
    #[inline]
    pub(crate) fn push_alike<const N: usize>(&mut self) {
        debug_assert_eq!(N, self.arity, "a member has the group's arity");
        for e in self.next.iter_mut().take(N) {
            e.start += e.step;
        }
        self.alike += 1;
    }

    /// The rules that still hold with `args` appended.
    fn holds(&self, args: &[KernelArg<'a>]) -> u32 {
        let n = self.arity;
        if n == 0 || self.first.len() != n || self.spans.len() < n || args.len() != n {
            return 0;
        }
        let (first, last) = (&self.first[..], self.len() - 1);
        let last = |i: usize| self.span(last, i);
        // No ReadWrite argument gets in: a group holds a rule only if its first call has none
        // (`new`), and each argument must have the first call's access.
        let mut holding = self.holding;
        let mut bits = holding;
        while bits != 0 {
            let r = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if !continues(self.rules[r].joins, first, last, args, self.disjoint) {
                holding &= !(1 << r);
            }
        }
        holding
    }

    /// The rule the group runs under as one merged call, if it does: merging is on and a
    /// rule holds for several calls.
    fn merged_rule(&self, merge: bool) -> Option<&'static MergeRule> {
        (merge && self.len() > 1 && self.holding != 0)
            .then(|| self.rules[self.holding.trailing_zeros() as usize])
    }

    /// Starts its inputs' copies where they can overlap what runs before it, and decides the
    /// pieces it runs in (`kernel::ahead`); once per group, when it is handed to its queue
    /// or else when it runs.
    pub(crate) fn prefetch(&mut self, rt: &Runtime, merge: bool) {
        if self.pieces.is_none() {
            let joins = self.merged_rule(merge).map(|rule| rule.joins);
            let span = |k: usize, i: usize| self.span(k, i);
            let pieces = ahead::start_pieces(
                rt.shared(),
                self.position,
                joins,
                &self.first,
                self.len(),
                span,
            );
            self.pieces = Some(pieces);
        }
    }

    /// The merged call's arguments over members `head` to `tail`: each `Concat` one the union
    /// of theirs, each `Same` one the first's.
    fn merged_args(&self, joins: &[Joins], head: usize, tail: usize) -> Vec<Option<KernelArg<'a>>> {
        (joins.iter().zip(&self.first).enumerate())
            .map(|(i, (joins, arg))| {
                let (f, l) = (self.span(head, i), self.span(tail, i));
                let len = match joins {
                    Joins::Concat => l.start + l.len - f.start,
                    Joins::Same => f.len,
                };
                Some(
                    Span {
                        start: f.start,
                        len,
                    }
                    .on(arg),
                )
            })
            .collect()
    }

    /// Runs the group: merged calls if merging is on and a rule holds for several calls (one,
    /// or one per piece where its inputs are still on their way), else (or from a merged call
    /// that failed on) each call on its own.
    pub(crate) fn run(mut self, rt: &Runtime, merge: bool) -> Result<()> {
        self.prefetch(rt, merge);
        let calls = self.len();
        let rule = self.merged_rule(merge);
        let (device, params, pieces) = (self.device, self.params, self.pieces);
        let plain = self.rules[0];
        let mut from = 0;
        if let Some(rule) = rule {
            let pieces = pieces.unwrap_or(1);
            for k in 0..pieces {
                let members = ahead::members(k, pieces, calls);
                let mut merged = self.merged_args(rule.joins, members.start, members.end - 1);
                let outcome = (rule.run)(
                    rt,
                    device,
                    params,
                    &mut MergedArgs::new(rule.runs_as.name(), device, &mut merged),
                );
                rt.shared()
                    .calls()
                    .record_merge(rule.api.index(), members.len());
                tracing::debug!(
                    target: "rimms::merge",
                    api = rule.api.name(),
                    runs_as = rule.runs_as.name(),
                    %device,
                    calls = members.len(),
                    piece = k,
                    ok = outcome.is_ok(),
                    "merged calls"
                );
                if let Err(error) = outcome {
                    rt.shared().calls().record_merge_retry(rule.api.index());
                    tracing::warn!(
                        %error, api = rule.api.name(), %device, calls = members.len(),
                        "a merged call failed; its calls run again one by one (from the failed piece on)"
                    );
                    from = members.start;
                    break;
                }
                from = members.end;
            }
            if from == calls {
                return Ok(());
            }
        }
        let mut first_error = None;
        for k in from..calls {
            let mut member: Vec<Option<KernelArg<'_>>> = (self.first.iter().enumerate())
                .map(|(i, a)| Some(self.span(k, i).on(a)))
                .collect();
            let outcome = (plain.run)(
                rt,
                device,
                params,
                &mut MergedArgs::new(plain.api.name(), device, &mut member),
            );
            if let Err(error) = outcome {
                match first_error {
                    None => first_error = Some(error),
                    Some(_) => tracing::warn!(%error, "a further call of the group failed"),
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Runs one call with `args` through `rule` (a built-in's plain rule: the call as it came).
pub(crate) fn run_whole<const N: usize>(
    rt: &Runtime,
    device: Device,
    rule: &MergeRule,
    params: Params,
    args: [KernelArg<'_>; N],
) -> Result<()> {
    let mut slots = args.map(Some);
    (rule.run)(
        rt,
        device,
        params,
        &mut MergedArgs::new(rule.api.name(), device, &mut slots),
    )
}

/// Whether a call with `args` continues a group whose first call had `first` and last `last`
/// under `joins`, and its merged written ranges stay clear of its other arguments (which they
/// are when the group's arguments are `disjoint`: no written one shares a buffer).
///
/// It runs once per call a scope holds (hundreds a frame in the radar apps), so it returns at
/// the first argument that does not fit and compares ranges only where buffers are shared.
fn continues(
    joins: &[Joins],
    first: &[KernelArg<'_>],
    last: impl Fn(usize) -> Span,
    args: &[KernelArg<'_>],
    disjoint: bool,
) -> bool {
    let n = args.len();
    if joins.len() != n || first.len() != n {
        return false;
    }
    for (i, ((joins, a), f)) in joins.iter().zip(args).zip(first).enumerate() {
        let l = last(i);
        // A placement hint (`KernelArg::at`) must agree too: the merged call has one.
        let same_buffer = std::ptr::eq(a.raw, f.raw) && a.access == f.access && a.at == f.at;
        let fits = match joins {
            Joins::Concat => same_buffer && a.start == l.start + l.len,
            Joins::Same => {
                same_buffer && a.access == Access::Read && a.start == f.start && a.len == f.len
            }
        };
        if !fits {
            return false;
        }
    }
    if disjoint {
        return true;
    }
    // The merged call's ranges: a written one may share its buffer with another argument
    // only where they do not overlap (each call's own borrows kept them apart; their unions
    // might not be).
    let range = |i: usize| match joins[i] {
        Joins::Concat => first[i].start..args[i].start + args[i].len,
        Joins::Same => first[i].start..first[i].start + first[i].len,
    };
    (0..n).all(|i| {
        !args[i].access.writes()
            || (0..n).all(|j| {
                if j == i || !std::ptr::eq(args[i].raw, args[j].raw) {
                    return true;
                }
                let (ri, rj) = (range(i), range(j));
                ri.end <= rj.start || rj.end <= ri.start
            })
    })
}

/// The built-in APIs' rules, under the names they had here; each is defined in its built-in's
/// home (`kernel/builtins/<name>.rs`), beside the call it merges.
pub mod rules {
    pub use crate::kernel::builtins::conj::RULES as CONJ;
    pub use crate::kernel::builtins::fft::RULES as FFT;
    pub use crate::kernel::builtins::fftshift::RULES as FFTSHIFT;
    pub use crate::kernel::builtins::magnitude::RULES as MAGNITUDE;
    pub use crate::kernel::builtins::power::RULES as POWER;
    pub use crate::kernel::builtins::window::RULES as WINDOW;
    pub use crate::kernel::builtins::zip::RULES as ZIP;
    pub use crate::kernel::builtins::zip_rows::RULES as ZIP_ROWS;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::builtins::BuiltinId;
    use crate::{HeteData, SimConfig};

    /// A runtime with one sim device, for groups on the CPU or on `sim0`.
    fn sim_runtime() -> Runtime {
        Runtime::builder()
            .sim(SimConfig::default())
            .build()
            .expect("rt")
    }

    /// A merged group runs under its rule's `runs_as` API on the group's device, so every
    /// kind of device that implements a built-in with merge rules must implement what those
    /// run as, or its row calls never merge there and each runs alone (the GPU lacked
    /// `zip_rows` until it first ran on one: 768 single launches a SAR frame).
    #[test]
    fn every_device_that_runs_a_builtin_runs_what_its_merged_calls_run_as() {
        use crate::hal::{DeviceKind, Forms};
        let reg = registry();
        let all = [
            rules::CONJ,
            rules::FFT,
            rules::FFTSHIFT,
            rules::MAGNITUDE,
            rules::POWER,
            rules::WINDOW,
            rules::ZIP,
            rules::ZIP_ROWS,
        ];
        let mut checked = 0;
        for rule in all.into_iter().flatten() {
            for kind in DeviceKind::ALL {
                let runs = |api: &'static ApiDecl| {
                    reg.registered(api.index(), kind, Forms::DeviceThenHost)
                        .is_some()
                };
                if runs(rule.api) {
                    assert!(
                        runs(rule.runs_as),
                        "{kind:?} runs {} but not {}, which its merged calls run as",
                        rule.api.name(),
                        rule.runs_as.name()
                    );
                    checked += 1;
                }
            }
        }
        // Every built-in runs on the CPU at least.
        assert!(checked >= all.iter().map(|r| r.len()).sum::<usize>());
    }

    /// Bytes in a row of the lean-check tests: 4 KiB, a fragment, so rows are views apart.
    const ROW: usize = 4096;

    /// A buffer of sixteen `ROW`-byte rows of `u32`.
    fn sixteen_rows(rt: &Runtime) -> HeteData<u32> {
        HeteData::<u32>::alloc(rt, 16 * ROW / 4).expect("buffer")
    }

    fn arg<'a>(
        raw: &'a crate::data::RawBuffer,
        start: usize,
        len: usize,
        access: Access,
    ) -> KernelArg<'a> {
        KernelArg {
            name: "x",
            raw,
            start,
            len,
            access,
            at: None,
        }
    }

    /// Rows `r..r + n` (of `ROW` bytes each) of `input`, read, and of `output`, written: the
    /// arguments of an FFT or another row-wise call on them.
    fn rows_of<'a>(
        input: &'a crate::data::RawBuffer,
        output: &'a crate::data::RawBuffer,
        r: usize,
        n: usize,
    ) -> [KernelArg<'a>; 2] {
        [
            arg(input, r * ROW, n * ROW, Access::Read),
            arg(output, r * ROW, n * ROW, Access::Write),
        ]
    }

    /// Calls whose own views are apart but whose merged ranges would overlap (read row r,
    /// write row r + 1 of one buffer) do not merge: the merged call would read what it writes.
    #[test]
    fn merged_ranges_that_would_overlap_a_written_one_do_not_join() {
        let rt = sim_runtime();
        let x = HeteData::<u32>::alloc(&rt, 4096).expect("x");
        let raw = x.as_slice().raw();
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let row = 4096;
        let call = |r: usize| {
            [
                arg(raw, r * row, row, Access::Read),
                arg(raw, (r + 1) * row, row, Access::Write),
            ]
        };
        let mut group = Group::new(entry, 0, rules::FFT, [0, 64], call(0));
        assert!(group.join(rules::FFT, [0, 64], call(1)).is_err());
        // The same calls on two buffers do merge.
        let y = HeteData::<u32>::alloc(&rt, 4096).expect("y");
        let out = y.as_slice().raw();
        let call = |r: usize| {
            [
                arg(raw, r * row, row, Access::Read),
                arg(out, r * row, row, Access::Write),
            ]
        };
        let mut group = Group::new(entry, 0, rules::FFT, [0, 64], call(0));
        assert!(group.join(rules::FFT, [0, 64], call(1)).is_ok());
        // Other parameters, or a read-write argument, do not.
        assert!(group.join(rules::FFT, [1, 64], call(2)).is_err());
        let mut rw = call(2);
        rw[1].access = Access::ReadWrite;
        assert!(group.join(rules::FFT, [0, 64], rw).is_err());
        // Nor a call whose placement hint differs from the group's.
        let mut at_a_space = call(2);
        at_a_space[0].at = Some(crate::hal::SpaceId(0));
        assert!(group.join(rules::FFT, [0, 64], at_a_space).is_err());
        assert_eq!(group.len(), 2);
        assert!(group.join(rules::FFT, [0, 64], call(2)).is_ok());
    }

    /// The lean continuation check (`continued_alike`) says yes only where the general rule
    /// check lets the call in: each call below that the rules refuse gets no from it as well
    /// as from `join`, on a group of several rows that it answers for, and the next row alike
    /// gets yes.
    #[test]
    fn the_lean_continuation_check_refuses_whatever_the_rules_refuse() {
        let rt = sim_runtime();
        let buffer = || sixteen_rows(&rt);
        let (x, y, other) = (buffer(), buffer(), buffer());
        let (input, output, other) = (
            x.as_slice().raw(),
            y.as_slice().raw(),
            other.as_slice().raw(),
        );
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let rows = |r: usize, n: usize| rows_of(input, output, r, n);
        let call = |r: usize| rows(r, 1);
        let params = [0, 1024];
        let mut group = Group::new(entry, 0, rules::FFT, params, call(0));
        for r in 1..3 {
            assert!(group.join(rules::FFT, params, call(r)).is_ok());
        }
        let mut refused: Vec<(&str, Params, [KernelArg<'_>; 2])> = vec![
            ("a gap", params, call(4)),
            ("the last row again", params, call(2)),
            ("the row before", params, call(1)),
            ("other parameters", [1, 1024], call(3)),
        ];
        let mut on_another_buffer = call(3);
        on_another_buffer[0].raw = other;
        refused.push(("another buffer", params, on_another_buffer));
        let mut read_and_written = call(3);
        read_and_written[1].access = Access::ReadWrite;
        refused.push(("a read-write argument", params, read_and_written));
        let mut hinted = call(3);
        hinted[1].at = Some(crate::hal::SpaceId(0));
        refused.push(("another placement hint", params, hinted));
        let mut written_over_the_input = call(3);
        written_over_the_input[1].raw = input;
        refused.push((
            "a written range on the input",
            params,
            written_over_the_input,
        ));
        for (what, params, call) in refused {
            assert!(
                !group.continued_alike(rules::FFT, params, &call),
                "the lean check let in {what}"
            );
            assert!(
                group.join(rules::FFT, params, call).is_err(),
                "the rules let in {what}"
            );
        }
        assert!(!group.continued_alike(rules::ZIP, params, &call(3)));
        // Two rows at once continue the group by the rule, but not alike: the general way.
        assert!(!group.continued_alike(rules::FFT, params, &rows(3, 2)));
        assert!(group.continued_alike(rules::FFT, params, &call(3)));
        group.push(call(3));
        assert_eq!(group.len(), 4);
    }

    /// Placement hints of different spaces are different hints to the lean check, as to the
    /// rules (red with `Part::how` dropping the space, e.g. shifting it out of the word).
    #[test]
    fn the_lean_check_tells_the_spaces_of_two_hints_apart() {
        let rt = sim_runtime();
        let (x, y) = (sixteen_rows(&rt), sixteen_rows(&rt));
        let (input, output) = (x.as_slice().raw(), y.as_slice().raw());
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let hinted = |r: usize, space: u8| {
            let mut call = rows_of(input, output, r, 1);
            call[1].at = Some(crate::hal::SpaceId(space));
            call
        };
        let params = [0, 1024];
        let mut group = Group::new(entry, 0, rules::FFT, params, hinted(0, 1));
        for r in 1..3 {
            assert!(group.join(rules::FFT, params, hinted(r, 1)).is_ok());
        }
        assert!(!group.continued_alike(rules::FFT, params, &hinted(3, 2)));
        assert!(group.join(rules::FFT, params, hinted(3, 2)).is_err());
        assert!(group.continued_alike(rules::FFT, params, &hinted(3, 1)));
    }

    /// The lean check answers only for a lean group and a call of the group's arity, whatever
    /// `next` still holds: a group no longer lean (`key` 0) refuses the call `next` expects
    /// (red with the key's compare left out), and so does a group asked about fewer arguments
    /// than it has, whose first ones match (red with the arity left out of the key).
    #[test]
    fn the_lean_check_answers_only_for_a_lean_group_of_the_calls_arity() {
        let rt = sim_runtime();
        let (x, y) = (sixteen_rows(&rt), sixteen_rows(&rt));
        let (input, output) = (x.as_slice().raw(), y.as_slice().raw());
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let call = |r: usize| rows_of(input, output, r, 1);
        let params = [0, 1024];
        let mut group = Group::new(entry, 0, rules::FFT, params, call(0));
        for r in 1..3 {
            assert!(group.join(rules::FFT, params, call(r)).is_ok());
        }
        let [first_part, _] = call(3).each_ref().map(Part::of);
        assert!(group.continued_alike(rules::FFT, params, &call(3)));
        assert!(!group.continued_alike_parts(rules::FFT, params, &[first_part]));
        group.key = 0;
        assert!(!group.continued_alike(rules::FFT, params, &call(3)));
    }

    /// A built-in's row call is told by its ID, not its rules (`continued_alike_builtin`), so
    /// its check wants the group's key whole: a group whose first call no built-in's method
    /// made (`checked_as` 0) refuses it where the rules check would let it in (red with
    /// `checked_as` left out of the key), as does a group another built-in opened (red with
    /// the key compared under `LEAN_AND_ARITY`), one no longer lean, and other parameters.
    #[test]
    fn a_builtins_row_call_joins_alike_only_a_group_its_own_method_opened() {
        let rt = sim_runtime();
        let (x, y) = (sixteen_rows(&rt), sixteen_rows(&rt));
        let (input, output) = (x.as_slice().raw(), y.as_slice().raw());
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let call = |r: usize| rows_of(input, output, r, 1);
        let parts = |r: usize| call(r).each_ref().map(Part::of);
        let (params, fft, zip) = ([0, 1024], BuiltinId::Fft as u8, BuiltinId::Zip as u8);
        let held = |checked_as: u8| {
            let mut group = Group::new(entry, 0, rules::FFT, params, call(0));
            group.checked_as = checked_as;
            for r in 1..3 {
                assert!(group.join(rules::FFT, params, call(r)).is_ok());
            }
            group
        };
        let unchecked = held(0);
        assert!(unchecked.continued_alike_parts(rules::FFT, params, &parts(3)));
        assert!(!unchecked.continued_alike_builtin(fft, params, &parts(3)));
        let mut group = held(fft);
        assert!(group.continued_alike_builtin(fft, params, &parts(3)));
        assert!(!group.continued_alike_builtin(zip, params, &parts(3)));
        assert!(!group.continued_alike_builtin(fft, [1, 1024], &parts(3)));
        assert!(!group.continued_alike_builtin(fft, params, &parts(4)));
        // The general check asks nothing of the built-in.
        assert!(group.continued_alike_parts(rules::FFT, params, &parts(3)));
        group.key = 0;
        assert!(!group.continued_alike_builtin(fft, params, &parts(3)));
    }

    /// The next member a lean group expects (`Group::next`) moves a row on with each member
    /// that joins alike, and is set again by a general join: a row already joined is refused
    /// (red with `push_alike` not moving it on), the row the alike members left expected is
    /// refused after two rows joined at once (red with the general join leaving it stale),
    /// and the expected length stays the first call's (red with the last member's).
    #[test]
    fn the_expected_next_member_follows_alike_and_general_joins() {
        let rt = sim_runtime();
        let row = ROW;
        let (x, y) = (sixteen_rows(&rt), sixteen_rows(&rt));
        let (input, output) = (x.as_slice().raw(), y.as_slice().raw());
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let rows = |r: usize, n: usize| rows_of(input, output, r, n);
        let call = |r: usize| rows(r, 1);
        let params = [0, 1024];
        let mut group = Group::new(entry, 0, rules::FFT, params, call(0));
        // A group of one is not lean: the next row joins the general way.
        assert!(!group.continued_alike(rules::FFT, params, &call(1)));
        assert!(group.join(rules::FFT, params, call(1)).is_ok());
        for r in 2..5 {
            assert!(
                group.continued_alike(rules::FFT, params, &call(r)),
                "row {r}"
            );
            group.push(call(r));
            assert!(
                !group.continued_alike(rules::FFT, params, &call(r)),
                "row {r} again"
            );
        }
        assert!(group.join(rules::FFT, params, rows(5, 2)).is_ok());
        for r in [5, 6] {
            assert!(
                !group.continued_alike(rules::FFT, params, &call(r)),
                "row {r}, joined already"
            );
        }
        assert!(!group.continued_alike(rules::FFT, params, &rows(7, 2)));
        assert!(group.continued_alike(rules::FFT, params, &call(7)));
        group.push(call(7));
        assert_eq!(group.len(), 7);
        let spans: Vec<Span> = (0..7).map(|k| group.span(k, 1)).collect();
        let want: Vec<Span> = [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (7, 1)]
            .iter()
            .map(|&(r, n)| Span {
                start: r * row,
                len: n * row,
            })
            .collect();
        assert_eq!(spans, want);
    }

    /// A group of calls with more managed arguments than the expected member holds
    /// (`LEAN_ARGS`) never turns lean: every call joins it the general way (red, with a
    /// panic, where the general join turns it lean regardless).
    #[test]
    fn a_group_of_more_arguments_than_lean_args_joins_the_general_way() {
        static FIVE: ApiDecl = ApiDecl::new("five_rows");
        static FIVE_RULES: &[&MergeRule] = &[&MergeRule {
            api: &FIVE,
            runs_as: &FIVE,
            joins: &[Joins::Concat; LEAN_ARGS + 1],
            run: |_, _, _, _| Ok(()),
        }];
        let rt = sim_runtime();
        let row = ROW;
        let buffers: Vec<HeteData<u32>> = (0..=LEAN_ARGS).map(|_| sixteen_rows(&rt)).collect();
        let raws: Vec<&RawBuffer> = buffers.iter().map(|b| b.as_slice().raw()).collect();
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let call = |r: usize| -> [KernelArg<'_>; LEAN_ARGS + 1] {
            std::array::from_fn(|i| {
                let access = if i == LEAN_ARGS {
                    Access::Write
                } else {
                    Access::Read
                };
                arg(raws[i], r * row, row, access)
            })
        };
        let params = [0, 0];
        let mut group = Group::new(entry, 0, FIVE_RULES, params, call(0));
        for r in 1..4 {
            assert!(
                !group.continued_alike(FIVE_RULES, params, &call(r)),
                "row {r}"
            );
            assert!(group.join(FIVE_RULES, params, call(r)).is_ok(), "row {r}");
        }
        assert_eq!(group.len(), 4);
        assert_eq!(
            group.span(3, LEAN_ARGS),
            Span {
                start: 3 * row,
                len: row
            }
        );
    }

    /// Members that join alike store no spans (`Group::alike`); every member's arguments are
    /// still what it submitted, also around a member that joined the general way (two rows at
    /// once) between alike ones, and the merged call covers them all.
    #[test]
    fn members_that_joined_alike_keep_the_ranges_they_submitted() {
        let rt = sim_runtime();
        let row = ROW;
        let buffer = || sixteen_rows(&rt);
        let (x, y) = (buffer(), buffer());
        let (input, output) = (x.as_slice().raw(), y.as_slice().raw());
        let entry = rt.shared().device(Device::Cpu).expect("cpu");
        let rows = |r: usize, n: usize| rows_of(input, output, r, n);
        let params = [0, 1024];
        // Rows 0 and 1 the general way, 2 to 4 alike, 5 and 6 at once, then 7 to 9 alike.
        let submitted = [
            (0, 1),
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 1),
            (5, 2),
            (7, 1),
            (8, 1),
            (9, 1),
        ];
        let mut group = Group::new(entry, 0, rules::FFT, params, rows(0, 1));
        for &(r, n) in &submitted[1..] {
            let call = rows(r, n);
            if group.continued_alike(rules::FFT, params, &call) {
                group.push(call);
            } else {
                assert!(group.join(rules::FFT, params, call).is_ok(), "row {r}");
            }
        }
        assert_eq!(group.alike, 3, "rows 7 to 9 joined alike");
        assert_eq!(group.len(), submitted.len());
        for (k, &(r, n)) in submitted.iter().enumerate() {
            for i in 0..2 {
                let want = Span {
                    start: r * row,
                    len: n * row,
                };
                assert_eq!(group.span(k, i), want, "member {k}, argument {i}");
            }
        }
        let merged = group.merged_args(rules::FFT[0].joins, 0, submitted.len() - 1);
        assert!(merged.iter().all(|a| a
            .as_ref()
            .is_some_and(|a| a.start == 0 && a.len == 10 * row)));
    }

    /// A ZIP whose second operand is the same view every call holds only the `zip_rows` rule
    /// from its second member on; the lean check then wants that very view again.
    #[test]
    fn the_lean_check_wants_a_shared_operand_to_be_the_same_view() {
        let rt = sim_runtime();
        let row = ROW;
        let buffer = || sixteen_rows(&rt);
        let (a, b, out) = (buffer(), buffer(), buffer());
        let (a, b, out) = (a.as_slice().raw(), b.as_slice().raw(), out.as_slice().raw());
        let entry = rt.shared().device(Device::Sim(0)).expect("sim");
        let call = |r: usize, shared: usize| {
            [
                arg(a, r * row, row, Access::Read),
                arg(b, shared * row, row, Access::Read),
                arg(out, r * row, row, Access::Write),
            ]
        };
        let params = [0, 0];
        let mut group = Group::new(entry, 0, rules::ZIP, params, call(0, 0));
        for r in 1..3 {
            assert!(group.join(rules::ZIP, params, call(r, 0)).is_ok());
        }
        assert_eq!(group.holding.count_ones(), 1, "only zip_rows holds");
        let mut shorter = call(3, 0);
        shorter[1].len = row / 2;
        for (what, call) in [("another view", call(3, 1)), ("a shorter view", shorter)] {
            assert!(
                !group.continued_alike(rules::ZIP, params, &call),
                "the lean check let in {what}"
            );
            assert!(group.join(rules::ZIP, params, call).is_err());
        }
        assert!(group.continued_alike(rules::ZIP, params, &call(3, 0)));
        // Members that join alike leave the shared view where it is (red with the expected
        // member's shared view moved on a row by each): the next view is still refused.
        for r in 3..6 {
            assert!(
                !group.continued_alike(rules::ZIP, params, &call(r, r - 2)),
                "row {r}"
            );
            assert!(
                group.continued_alike(rules::ZIP, params, &call(r, 0)),
                "row {r}"
            );
            group.push(call(r, 0));
        }
        assert_eq!(group.span(5, 1), Span { start: 0, len: row });
    }

    /// A written argument asked for as a type it cannot be viewed as is refused, and is still
    /// there to be asked for as the right type: a refused request takes nothing.
    #[test]
    fn a_refused_output_request_leaves_the_argument_to_take() {
        let rt = sim_runtime();
        let x = HeteData::<u32>::alloc(&rt, 3).expect("x");
        let raw = x.as_slice().raw();
        let mut slots = [Some(arg(raw, 0, 12, Access::Write))];
        let mut args = MergedArgs::new("test", Device::Cpu, &mut slots);
        let err = args
            .output::<u64>(0)
            .expect_err("12 bytes are not whole u64s");
        assert!(err.to_string().contains("whole elements"), "{err}");
        let view = args
            .output::<u32>(0)
            .expect("the argument was not taken by the refused request");
        assert_eq!(view.len(), 3);
        assert!(args.output::<u32>(0).is_err(), "a second taking is refused");
    }
}

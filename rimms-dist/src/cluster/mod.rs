//! A rank's runtime joined to its job: distributed buffers whose rows live on the ranks that
//! own them, calls that run where their written rows live, reads that move the fewest bytes,
//! and the corner turn as one collective.
//!
//! Each rank has its own [`Runtime`] (its devices, spaces, fragments, eviction: all local, all
//! free to depend on timing) and one [`Cluster`] around it. A [`DistData`] is a buffer of rows
//! spread over the ranks by a [`Distribution`]; every rank keeps the rows it owns and the
//! copies of others' rows it holds, as local buffers of its runtime (`store.rs`: a flush gives
//! the copies' memory back), and every rank keeps the same replicated [`RankTable`] of who
//! holds what. The cluster's methods are SPMD: every rank
//! calls them in the same order with the same arguments, and each rank does its own part:
//!
//! - [`Cluster::compute`]: owner computes. The call runs on the ranks that own the rows it
//!   writes, on their local runtime (which moves data between its own devices as ever);
//!   afterwards, every rank's table says those rows are valid on their owners alone.
//! - [`Cluster::fetch`]: each rank names the rows it will read; every rank plans the same
//!   exchange from the table (one message per run of fragments a reader lacks, from the owner)
//!   and does its sends and receives. With the cache on (the default), a second fetch of
//!   unchanged rows sends nothing; with it off, received rows are forgotten after the next call
//!   that uses them, as StarPU-MPI's `insert_task_recv_cache` test expects.
//! - [`Cluster::here`]: the rows a rank may read, refused where the table says this rank does
//!   not hold them, so a missing fetch is an error, never stale bytes.
//! - [`Cluster::corner_turn`]: the distributed transpose, one block per destination and one
//!   all-to-all, never fragment moves (`corner_turn.rs`), after a vote (one word per rank)
//!   that lets no rank into the all-to-all unless every rank prepared its part: a rank that
//!   failed before it fails the turn on every rank, naming it, and collectives stay in step.
//!
//! After each call the ranks compare digests of the table it changed (always at allocation; in
//! debug builds, or with [`Cluster::check_drift`], after every call): ranks whose call order
//! drifted fail together, naming the call, instead of hanging or computing a wrong image.
//!
//! The network is this layer's own space: its bytes are counted by the transport
//! ([`Cluster::net_bytes`], per peer) and planned by the table, beside the local runtime's
//! spaces rather than among them (so its 16-space summary word and fast path stay as they are).

mod corner_turn;
mod sealed;
mod store;

use crate::{owner_computes, DistError, Distribution, Exchange, Rank, RankTable, Span, Transport};
use crate::{Fragments, Packed, RankSet, TransportError};
use bytemuck::Pod;
use rimms_runtime::{HeteSlice, HeteSliceMut, Runtime, SecureKey};
pub use sealed::SEAL_BYTES;
use sealed::{open_message, seal_message, sealing_id};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::rc::{Rc, Weak};
use store::{RowStore, StoreError};

/// The most bytes of one cross-rank fragment: the unit the table tracks and the planner
/// coalesces, as the runtime's fragments are inside a rank.
pub const NET_FRAGMENT_BYTES: usize = 4096;

/// What a distributed call can fail with; every rank reports the same error for a bad call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The distribution or the call does not fit the job (more ranks than rows, a write
    /// across ranks that cannot be split, a range outside the buffer).
    #[error("{call}: {source}")]
    Dist {
        /// The call, as drift errors name it.
        call: String,
        /// What is wrong.
        source: DistError,
    },
    /// Ranks could not exchange what the call needs, or drifted apart.
    #[error("{call}: {source}")]
    Transport {
        /// The call.
        call: String,
        /// What went wrong between ranks.
        source: TransportError,
    },
    /// The local runtime failed the call on this rank.
    #[error("{call} on {rank}: {source}")]
    Runtime {
        /// The call.
        call: String,
        /// This rank.
        rank: Rank,
        /// The runtime's error (boxed, so that every distributed result stays small).
        source: Box<rimms_runtime::Error>,
    },
    /// Rows read on a rank whose table says it does not hold them: fetch them first.
    #[error("rows {rows:?} of distributed buffer {buffer} are not on {rank}: fetch them before reading (the owners hold them)")]
    NotHere {
        /// The buffer.
        buffer: u64,
        /// The rows asked for.
        rows: Range<usize>,
        /// This rank.
        rank: Rank,
    },
    /// Rows asked for as one view that lie in the runs of several owners, which a rank keeps
    /// apart: [`Cluster::read`] copies them out.
    #[error("rows {rows:?} of distributed buffer {buffer} lie in the runs of several owners, which {rank} keeps apart: view one owner's rows with `here`, or copy them out with `read`")]
    AcrossOwners {
        /// The buffer.
        buffer: u64,
        /// The rows asked for.
        rows: Range<usize>,
        /// This rank.
        rank: Rank,
    },
    /// Two buffers that do not fit the call (a corner turn between non-transposed shapes).
    #[error("{call}: {what}")]
    Shape {
        /// The call.
        call: String,
        /// What does not fit.
        what: String,
    },
    /// Some ranks could not do their part of a collective call before its exchange (a bad
    /// argument there, rows not there, their runtime or their fetch failing there) while
    /// others could: they said so in the vote before the exchange, so no rank ran it, every
    /// rank's collectives stay in step, and every rank reports this, naming them. The
    /// destination is as it was.
    #[error("{call}: {} failed before the exchange, so no rank exchanged and the destination is as it was", failed_list(.failed))]
    FailedBefore {
        /// The call.
        call: String,
        /// Each rank that failed, lowest first, and what failed there.
        failed: Vec<(Rank, String)>,
        /// This rank's own error, where it is one of them.
        #[source]
        local: Option<Box<ClusterError>>,
    },
}

/// `rank 1 (why), rank 3 (why)`.
fn failed_list(failed: &[(Rank, String)]) -> String {
    let named: Vec<String> = failed
        .iter()
        .map(|(rank, why)| format!("{rank} ({why})"))
        .collect();
    named.join(", ")
}

/// The top bit of a vote: this rank failed; the bits below say why ([`why_code`]). A vote
/// without it carries the digest of the state the rank is in (its top bit cleared).
const FAILED: u64 = 1 << 63;

/// What kind of error a rank failed with, as one word of a vote: enough for every other rank
/// to say why (the failing rank keeps the error itself).
fn why_code(error: &ClusterError) -> u64 {
    match error {
        ClusterError::Shape { .. } => 1,
        ClusterError::Dist { .. } => 2,
        ClusterError::NotHere { .. } => 3,
        ClusterError::AcrossOwners { .. } => 4,
        ClusterError::Runtime { .. } => 5,
        ClusterError::Transport { .. } => 6,
        ClusterError::FailedBefore { .. } => 7,
    }
}

/// [`why_code`]'s words.
fn why_of(code: u64) -> &'static str {
    match code {
        1 => "its buffers do not fit the call: shapes, distributions or element alignment",
        2 => "the call's rows or distribution do not fit the job there",
        3 => "rows it must read are not held there",
        4 => "rows it must view lie in several owners' runs there",
        5 => "its local runtime failed the call",
        6 => "its fetch of the source's rows failed between ranks",
        _ => "an error of its own",
    }
}

/// The result of a distributed call.
pub type Result<T> = std::result::Result<T, ClusterError>;

/// The replicated state of one distributed buffer: its table and write epoch.
struct Entry {
    table: RankTable,
    epoch: u64,
}

impl Entry {
    /// A digest of it, equal on every rank that applied the same calls.
    fn state(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        (self.table.digest(), self.epoch).hash(&mut hasher);
        hasher.finish()
    }
}

/// Fragments a rank received, to forget once used when the receive cache is off.
struct Received {
    entry: Weak<RefCell<Entry>>,
    rank: Rank,
    frags: Range<usize>,
}

/// One rank of a job: its runtime, its transport, and the order of distributed calls.
pub struct Cluster<'t> {
    rt: Runtime,
    transport: Box<dyn Transport + 't>,
    next_id: Cell<u64>,
    calls: Cell<u64>,
    check_drift: Cell<bool>,
    cache: Cell<bool>,
    /// Received rows to forget after the next call that uses them (cache off).
    uncached: RefCell<Vec<Received>>,
    /// The corner turn's send and receive buffers, kept for the next one.
    scratch: Cell<(Packed, Packed)>,
    /// How many clusters joined this transport before this one ([`Transport::join`]), the
    /// same on every rank: mixed into every envelope's epoch, so that a message an earlier
    /// cluster on the same transport left untaken never matches this one's receives.
    generation: u64,
}

impl fmt::Debug for Cluster<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("rank", &self.rank())
            .field("ranks", &self.ranks())
            .field("calls", &self.calls.get())
            .finish_non_exhaustive()
    }
}

/// A buffer of `rows` rows of `row_len` elements spread over the ranks of a job.
pub struct DistData<T: Pod> {
    id: u64,
    rows: usize,
    row_len: usize,
    dist: Distribution,
    frag_elems: usize,
    entry: Rc<RefCell<Entry>>,
    store: RowStore<T>,
    /// A secure buffer's key (`Cluster::alloc_secure`).
    key: Option<SecureKey>,
}

impl<T: Pod> fmt::Debug for DistData<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistData")
            .field("id", &self.id)
            .field("rows", &self.rows)
            .field("row_len", &self.row_len)
            .field("dist", &self.dist)
            .finish_non_exhaustive()
    }
}

/// Runs `work` as every rank of a job of `ranks` threads of this process over the in-process
/// transport, each with its own CPU runtime, and returns what each rank returned, in rank
/// order: the whole job in one call, for tests, models and `--ranks` without MPI. A wait of a
/// rank for the others ends after `timeout`; a rank that panics panics the caller.
pub fn on_threads<T: Send>(
    ranks: usize,
    timeout: std::time::Duration,
    work: impl Fn(&Cluster<'_>) -> T + Sync,
) -> Result<Vec<T>> {
    let outcomes: Vec<std::thread::Result<Result<T>>> = std::thread::scope(|s| {
        let handles: Vec<_> = crate::InProcess::world(ranks)
            .into_iter()
            .map(|t| {
                let work = &work;
                s.spawn(move || {
                    let rt = Runtime::new().map_err(|source| ClusterError::Runtime {
                        call: "starting a rank's runtime".into(),
                        rank: t.rank(),
                        source: Box::new(source),
                    })?;
                    Ok(work(&Cluster::new(rt, t.with_timeout(timeout))))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    outcomes
        .into_iter()
        .map(|outcome| outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        .collect()
}

impl<T: Pod> DistData<T> {
    /// Its id, the same on every rank (allocation order).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }
    /// How its rows are spread.
    pub fn distribution(&self) -> Distribution {
        self.dist
    }
    /// The ranks holding each row's newest bytes, as every rank's table says.
    pub fn valid_on(&self, row: usize) -> Option<RankSet> {
        // A row past the buffer has no entry: checked first, since `row * row_len` of such a
        // row may overflow (a panic in debug builds, another row's answer in release).
        if row >= self.rows {
            return None;
        }
        self.entry
            .borrow()
            .table
            .valid(row * self.row_len / self.frag_elems)
    }
    fn frags(&self, rows: &Range<usize>) -> Range<usize> {
        let per_row = self.row_len / self.frag_elems;
        rows.start * per_row..rows.end * per_row
    }
    /// Bytes this rank keeps for the buffer: its own rows, and the copies of others' it holds
    /// (a flush gives the copies back).
    pub fn resident_bytes(&self) -> usize {
        self.store.resident() * size_of::<T>()
    }
}

/// The cross-rank fragment of rows of `row_len` elements of `size` bytes: the longest divisor
/// of the row that fits [`NET_FRAGMENT_BYTES`], or the whole row where the divisors are so
/// short (a prime row length) that fragments would cost more in messages than they save.
fn fragment_elems(row_len: usize, size: usize) -> usize {
    let most = (NET_FRAGMENT_BYTES / size.max(1)).max(1);
    if row_len <= most {
        return row_len.max(1);
    }
    let divisor = (1..=most).rev().find(|d| row_len % d == 0).unwrap_or(1);
    if divisor * 4 < most {
        row_len
    } else {
        divisor
    }
}

impl<'t> Cluster<'t> {
    /// This rank of the job `transport` joins (owned, or borrowed: `&transport`), running its
    /// calls on `rt`. Drift is checked after every call in debug builds or where
    /// `RIMMS_DIST_CHECK=1`; the receive cache is on.
    pub fn new(rt: Runtime, transport: impl Transport + 't) -> Cluster<'t> {
        let check =
            cfg!(debug_assertions) || std::env::var("RIMMS_DIST_CHECK").is_ok_and(|v| v == "1");
        let generation = transport.join();
        Cluster {
            rt,
            generation,
            transport: Box::new(transport),
            next_id: Cell::new(0),
            calls: Cell::new(0),
            check_drift: Cell::new(check),
            cache: Cell::new(true),
            uncached: RefCell::default(),
            scratch: Cell::default(),
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.transport.rank()
    }
    /// Ranks in the job.
    pub fn ranks(&self) -> usize {
        self.transport.ranks()
    }
    /// This rank's runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }
    /// Compare table digests after every call (on), or only at allocation (off). Every rank
    /// must choose the same.
    pub fn check_drift(&self, on: bool) {
        self.check_drift.set(on);
    }
    /// Keep received rows valid until they are written again (on, the default), or forget
    /// them after the next call, so that every read sends again. Every rank must choose the
    /// same.
    pub fn cache(&self, on: bool) {
        self.cache.set(on);
    }
    /// Data bytes this rank has sent each peer: the traffic on the network.
    pub fn net_bytes(&self) -> Vec<u64> {
        self.transport.sent_bytes()
    }
    /// Data messages this rank has sent each peer, where the transport counts them (the
    /// in-process one does); empty where it does not.
    pub fn net_messages(&self) -> Vec<u64> {
        self.transport.sent_messages()
    }

    /// The next call's name, as errors and drift reports give it.
    fn call(&self, what: fmt::Arguments<'_>) -> String {
        let n = self.calls.get();
        self.calls.set(n + 1);
        format!("distributed call {n} ({what})")
    }

    /// Compares `state`, a digest of what the call left (mixed here with the call's place in
    /// the order), across ranks: always at allocations, after other calls where drift checks
    /// are on.
    fn agree(&self, call: &str, state: u64, always: bool) -> Result<()> {
        if !always && !self.check_drift.get() {
            return Ok(());
        }
        let mut hasher = DefaultHasher::new();
        (state, self.calls.get()).hash(&mut hasher);
        self.transport
            .agree(hasher.finish(), call)
            .map_err(|source| ClusterError::Transport {
                call: call.into(),
                source,
            })
    }

    /// The vote before a collective exchange (a corner turn's all-to-all), after each rank's
    /// own preparation, `local`: every rank contributes one word, `state` (a digest of the
    /// source's replicated state) where its preparation succeeded, or [`FAILED`] and why it
    /// failed, and all go on only if every rank can. One small collective: the agreement's
    /// (an 8-byte word to every peer in-process, a 16-byte all-gather under MPI), always, drift
    /// checks on or off, since a rank that failed alone and skipped the exchange would leave
    /// its collectives out of step with the others' (in-process, its next exchange would take
    /// the blocks sent for this one; under MPI the others' exchange would never complete).
    ///
    /// Where some ranks failed, every rank returns [`ClusterError::FailedBefore`] naming them
    /// (the failing ones with their own error as its source); where every rank failed, each
    /// returns its own error (a bad argument passed alike everywhere is that error
    /// everywhere). Where the ok ranks' states differ, every rank returns the drift, naming
    /// the ranks that differ from rank 0.
    ///
    /// `order` names the vote by the call's place in the order alone (not its arguments):
    /// ranks at other places fail it as drift.
    fn vote<P>(&self, call: &str, order: &str, local: Result<P>, state: u64) -> Result<P> {
        let word = match &local {
            Ok(_) => state & !FAILED,
            Err(e) => FAILED | why_code(e),
        };
        let transport_error = |source| ClusterError::Transport {
            call: call.into(),
            source,
        };
        let words = match self.transport.vote(word, order) {
            Ok(words) => words,
            // This rank's own error says more than the vote's that followed it.
            Err(source) => return Err(local.err().unwrap_or_else(|| transport_error(source))),
        };
        let failed: Vec<(Rank, String)> = words
            .iter()
            .enumerate()
            .filter(|(_, &w)| w & FAILED != 0)
            .map(|(i, &w)| (Rank(i as u16), why_of(w & !FAILED).to_string()))
            .collect();
        match local {
            Err(e) if failed.len() == words.len() => Err(e),
            Err(e) => Err(ClusterError::FailedBefore {
                call: call.into(),
                failed,
                local: Some(Box::new(e)),
            }),
            Ok(_) if !failed.is_empty() => Err(ClusterError::FailedBefore {
                call: call.into(),
                failed,
                local: None,
            }),
            Ok(prepared) => {
                crate::transport::verdict(call, &words).map_err(transport_error)?;
                Ok(prepared)
            }
        }
    }

    /// A fresh distributed buffer of zeros, `rows` rows of `row_len` elements spread by `dist`.
    /// Every rank must allocate it, in the same order: an allocation on only some ranks is an
    /// error on every rank (the digests compared here differ or never come).
    pub fn alloc<T: Pod>(
        &self,
        rows: usize,
        row_len: usize,
        dist: Distribution,
    ) -> Result<DistData<T>> {
        self.alloc_keyed(rows, row_len, dist, None)
    }

    /// [`Self::alloc`] of a secure buffer (RIMMS's `hete_Malloc_Secure` across ranks): every
    /// rank's rows are secure buffers of its runtime under `key` (sealed wherever they leave
    /// its trusted spaces), and every run of rows a fetch sends is sealed with AES-256-GCM
    /// before it leaves the rank and authenticated before it lands: the network carries
    /// ciphertext and one 28-byte seal per fragment, and a run altered on the way is an error
    /// naming its fragment, never bytes. Every rank passes the same key. A corner turn with a
    /// secure side seals its packed blocks the same way (`sealed.rs`).
    pub fn alloc_secure<T: Pod>(
        &self,
        rows: usize,
        row_len: usize,
        dist: Distribution,
        key: &SecureKey,
    ) -> Result<DistData<T>> {
        self.alloc_keyed(rows, row_len, dist, Some(key))
    }

    fn alloc_keyed<T: Pod>(
        &self,
        rows: usize,
        row_len: usize,
        dist: Distribution,
        key: Option<&SecureKey>,
    ) -> Result<DistData<T>> {
        let id = self.next_id.get();
        let secure = if key.is_some() { ", secure" } else { "" };
        let call = self.call(format_args!(
            "alloc buffer {id}: {rows} rows of {row_len}, {dist:?}{secure}"
        ));
        let frag_elems = fragment_elems(row_len, size_of::<T>());
        let table = RankTable::fresh(&dist, rows, row_len / frag_elems, self.ranks()).map_err(
            |source| ClusterError::Dist {
                call: call.clone(),
                source,
            },
        )?;
        let (ranks, me) = (self.ranks(), self.rank());
        let store = RowStore::new(&self.rt, &dist, rows, row_len, ranks, me, key)
            .map_err(|e| self.store_error(&call, e))?;
        self.next_id.set(id + 1);
        // The buffer's id, shape, distribution, security and element type: what every rank
        // must have allocated alike. The element type too: two buffers of one shape but other
        // types allocated in another order on another rank would otherwise agree here, then
        // move bytes of one type into the other (reinterpreted where the sizes match, a
        // length error on one rank and a timeout on the others where not). Every rank runs the
        // same binary (as the digests already assume), so the type's name is the same there.
        let mut hasher = DefaultHasher::new();
        let element = (std::any::type_name::<T>(), size_of::<T>(), align_of::<T>());
        // The generation too: ranks whose programs joined the transport a different number of
        // times would mark envelopes differently, so they fail here, as drift, not at a fetch.
        let shape = (
            id,
            rows,
            row_len,
            format!("{dist:?}"),
            key.is_some(),
            element,
            self.generation,
        );
        (shape, table.digest()).hash(&mut hasher);
        self.agree(&call, hasher.finish(), true)?;
        let entry = Entry { table, epoch: 0 };
        Ok(DistData {
            id,
            rows,
            row_len,
            dist,
            frag_elems,
            entry: Rc::new(RefCell::new(entry)),
            store,
            key: key.cloned(),
        })
    }

    fn store_error(&self, call: &str, error: StoreError) -> ClusterError {
        match error {
            StoreError::Dist(source) => ClusterError::Dist {
                call: call.into(),
                source,
            },
            StoreError::Runtime(source) => self.runtime_error(call, source),
            StoreError::Overflow => ClusterError::Shape {
                call: call.into(),
                what: "the buffer's rows overflow this rank's address space".into(),
            },
        }
    }

    fn runtime_error(&self, call: &str, source: rimms_runtime::Error) -> ClusterError {
        ClusterError::Runtime {
            call: call.into(),
            rank: self.rank(),
            source: Box::new(source),
        }
    }

    /// Owner computes: `kernel` runs on this rank for each run of `rows` of `out` it owns, with
    /// the local runtime and a view of those rows; then every rank records them valid on their
    /// owners alone. A call over rows of several owners is split at the owners' edges where
    /// `row_wise` (the API works row by row), and refused naming the ranks otherwise.
    ///
    /// A kernel that fails here fails this call on every rank: this rank reports the kernel's
    /// error, the others a drift at this call naming it (where drift checks are on; otherwise
    /// at their next agreement).
    pub fn compute<T: Pod>(
        &self,
        out: &mut DistData<T>,
        rows: Range<usize>,
        row_wise: bool,
        name: &str,
        mut kernel: impl FnMut(&Runtime, Range<usize>, HeteSliceMut<'_, T>) -> rimms_runtime::Result<()>,
    ) -> Result<()> {
        let call = self.call(format_args!("{name} on rows {rows:?} of buffer {}", out.id));
        self.owner_computes(out, rows, row_wise, &call, |rows, view| {
            kernel(&self.rt, rows, view).map_err(|e| self.runtime_error(&call, e))
        })
    }

    /// `kernel` runs on `rank` alone for `rows` of `out`, whoever owns them (an explicit
    /// placement overriding owner-computes): that rank first receives the rows' newest bytes
    /// (a kernel may read what it writes), then every rank records them valid on `rank`
    /// alone, so a later read of them comes from there. The rows must be one owner's run
    /// (refused on every rank otherwise, naming the rows).
    pub fn compute_on<T: Pod>(
        &self,
        rank: Rank,
        out: &mut DistData<T>,
        rows: Range<usize>,
        name: &str,
        mut kernel: impl FnMut(&Runtime, Range<usize>, HeteSliceMut<'_, T>) -> rimms_runtime::Result<()>,
    ) -> Result<()> {
        let call = self.call(format_args!(
            "{name} on rows {rows:?} of buffer {} on {rank}",
            out.id
        ));
        let dist_error = |source| ClusterError::Dist {
            call: call.clone(),
            source,
        };
        if usize::from(rank.0) >= self.ranks() {
            return Err(dist_error(DistError::NoSuchRank {
                rank,
                ranks: self.ranks(),
            }));
        }
        if rows.end > out.rows || rows.start > rows.end {
            return Err(dist_error(DistError::OutOfRange {
                end: rows.end,
                len: out.rows,
            }));
        }
        // Every rank cuts rows alike, so every rank refuses alike.
        if !out.store.one_segment(&rows) {
            return Err(ClusterError::AcrossOwners {
                buffer: out.id,
                rows,
                rank: self.rank(),
            });
        }
        let spans = vec![Span {
            ranks: RankSet::only(rank),
            rows,
        }];
        self.run_spans(out, spans, &call, |rows, view| {
            kernel(&self.rt, rows, view).map_err(|e| self.runtime_error(&call, e))
        })
    }

    /// Owner computes from another buffer's same rows: `kernel` gets this rank's rows of `src`
    /// (which must be here: the owners of `out`'s rows hold them when both are distributed
    /// alike, or after a fetch; and within one owner's run of `src`, as `here` views) and the
    /// same rows of `out`. A map from one distributed buffer
    /// to another, as the stages of a pipeline are.
    pub fn compute_from<S: Pod, T: Pod>(
        &self,
        src: &DistData<S>,
        out: &mut DistData<T>,
        rows: Range<usize>,
        name: &str,
        mut kernel: impl FnMut(
            &Runtime,
            Range<usize>,
            HeteSlice<'_, S>,
            HeteSliceMut<'_, T>,
        ) -> rimms_runtime::Result<()>,
    ) -> Result<()> {
        let call = self.call(format_args!(
            "{name} on rows {rows:?} of buffer {} from buffer {}",
            out.id, src.id
        ));
        if src.rows != out.rows {
            return Err(ClusterError::Shape {
                call,
                what: format!("{} rows in, {} rows out", src.rows, out.rows),
            });
        }
        self.owner_computes(out, rows, true, &call, |rows, view| {
            let input = self.here(src, rows.clone())?;
            kernel(&self.rt, rows, input, view).map_err(|e| self.runtime_error(&call, e))
        })
    }

    /// What `compute` and `compute_from` share: split the rows by owner, then
    /// [`Self::run_spans`].
    fn owner_computes<T: Pod>(
        &self,
        out: &mut DistData<T>,
        rows: Range<usize>,
        row_wise: bool,
        call: &str,
        kernel: impl FnMut(Range<usize>, HeteSliceMut<'_, T>) -> Result<()>,
    ) -> Result<()> {
        let spans = owner_computes(&out.dist, out.rows, self.ranks(), rows, row_wise).map_err(
            |source| ClusterError::Dist {
                call: call.into(),
                source,
            },
        )?;
        self.run_spans(out, spans, call, kernel)
    }

    /// Runs the kernel on this rank's spans (each one segment's rows), then records every
    /// span's write on every rank, and agrees. Each rank that runs a span first holds its
    /// rows' newest bytes, since a kernel may read what it writes: nothing moves where the
    /// owners hold them (always, unless a placement elsewhere wrote them).
    fn run_spans<T: Pod>(
        &self,
        out: &mut DistData<T>,
        spans: Vec<Span>,
        call: &str,
        mut kernel: impl FnMut(Range<usize>, HeteSliceMut<'_, T>) -> Result<()>,
    ) -> Result<()> {
        let dist_error = |source| ClusterError::Dist {
            call: call.into(),
            source,
        };
        self.fetch_runs(out, call, |rank| {
            let runs = spans.iter().filter(|s| s.ranks.contains(rank));
            runs.map(|s| s.rows.clone()).collect()
        })?;
        let me = self.rank();
        let mut failed = None;
        for span in spans.iter().filter(|s| s.ranks.contains(me)) {
            // A span is one segment's rows, which the fetch above gave room here.
            let run = match out.store.view_mut(&span.rows) {
                Some(Ok(view)) => kernel(span.rows.clone(), view),
                Some(Err(e)) => Err(self.runtime_error(call, e)),
                None => Err(ClusterError::AcrossOwners {
                    buffer: out.id,
                    rows: span.rows.clone(),
                    rank: me,
                }),
            };
            if let Err(error) = run {
                failed = Some(error);
                break;
            }
        }
        self.forget_uncached();
        let mut entry = out.entry.borrow_mut();
        for span in &spans {
            let frags = out.frags(&span.rows);
            entry
                .table
                .mark_written(span.ranks, frags)
                .map_err(dist_error)?;
        }
        entry.epoch += 1;
        let state = entry.state();
        drop(entry);
        self.settle(out);
        if let Some(error) = failed {
            // The others must not wait for an agreement this rank will not reach in step:
            // a state no rank that succeeded has makes them fail at this call.
            let _ = self.agree(call, !state, true);
            return Err(error);
        }
        self.agree(call, state, false)
    }

    /// Moves to each rank the rows `needs(rank)` that it lacks: every rank plans the same
    /// exchange from the table, one message per run of fragments, from the owner where it
    /// holds the newest bytes, and does its own sends and receives. Rows a rank already holds
    /// (and, with the cache on, rows it received earlier and nobody wrote since) move nothing.
    pub fn fetch<T: Pod>(
        &self,
        buf: &mut DistData<T>,
        needs: impl Fn(Rank) -> Range<usize>,
    ) -> Result<()> {
        let call = self.call(format_args!("fetch rows of buffer {}", buf.id));
        self.fetch_runs(buf, &call, |rank| vec![needs(rank)])
    }

    /// [`Self::fetch`] of runs of rows, as part of `call`.
    fn fetch_runs<T: Pod>(
        &self,
        buf: &mut DistData<T>,
        call: &str,
        needs: impl Fn(Rank) -> Vec<Range<usize>>,
    ) -> Result<()> {
        let exchange = self.fetch_moves(buf, call, needs)?;
        let state = self.fetch_commit(buf, &exchange);
        self.settle(buf);
        self.agree(call, state, false)
    }

    /// The moves of [`Self::fetch_runs`], not yet recorded in the table: the exchange they
    /// carried out, for [`Self::fetch_commit`]. A caller that votes before recording them (a
    /// corner turn) leaves every rank's table as it was where some rank failed: the bytes that
    /// arrived meanwhile are then in rows the table does not say this rank holds, never read.
    fn fetch_moves<T: Pod>(
        &self,
        buf: &mut DistData<T>,
        call: &str,
        needs: impl Fn(Rank) -> Vec<Range<usize>>,
    ) -> Result<Exchange> {
        let call = call.to_string();
        let dist_error = |source| ClusterError::Dist {
            call: call.clone(),
            source,
        };
        let mut exchange = Exchange::default();
        {
            let entry = buf.entry.borrow();
            for rank in (0..self.ranks()).map(|r| Rank(r as u16)) {
                for rows in needs(rank) {
                    // Rows past the buffer are refused (alike on every rank, which all
                    // evaluate `needs` for every rank) before `frags` multiplies them into
                    // fragments, which may overflow: a panic in debug builds, and in release
                    // a wrapped range that would pass the table's own bounds check.
                    if rows.end > buf.rows {
                        return Err(dist_error(DistError::OutOfRange {
                            end: rows.end,
                            len: buf.rows,
                        }));
                    }
                    let plan = entry
                        .table
                        .plan_read(rank, buf.frags(&rows))
                        .map_err(dist_error)?;
                    exchange.sends.extend(plan.sends);
                }
            }
        }
        let me = self.rank();
        // Rows this rank will read get room: received ones, and fresh ones (zeros everywhere,
        // so nothing moves for them).
        for rows in needs(me) {
            buf.store
                .materialise(&self.rt, &rows)
                .map_err(|e| self.store_error(&call, e))?;
        }
        if exchange.sends.iter().any(|s| s.from == me || s.to == me) {
            let epoch = buf.entry.borrow().epoch;
            let mut rows = RowBytes {
                store: &mut buf.store,
                per_row: buf.row_len / buf.frag_elems,
                frag_bytes: buf.frag_elems * size_of::<T>(),
                sealed: buf
                    .key
                    .as_ref()
                    .map(|key| (key, sealing_id("fetch", buf.id, epoch))),
            };
            // The envelope's epoch is the write epoch in the low bits and this cluster's
            // generation in the high ones (see `generation`); the seals keep the write epoch.
            let envelope_epoch = epoch ^ self.generation.rotate_right(16);
            crate::execute_on(
                &*self.transport,
                &exchange,
                buf.id,
                envelope_epoch,
                &mut rows,
            )
            .map_err(|e| match e {
                Moved::Transport(source) => ClusterError::Transport {
                    call: call.clone(),
                    source,
                },
                Moved::Runtime(e) => self.runtime_error(&call, e),
            })?;
        }
        Ok(exchange)
    }

    /// Records a fetch's moves (every rank alike): the readers hold the rows they received
    /// (until they are used, with the receive cache off). The digest of the state it leaves.
    fn fetch_commit<T: Pod>(&self, buf: &DistData<T>, exchange: &Exchange) -> u64 {
        let mut entry = buf.entry.borrow_mut();
        entry.table.commit(exchange);
        if !self.cache.get() {
            let mut uncached = self.uncached.borrow_mut();
            for send in &exchange.sends {
                uncached.push(Received {
                    entry: Rc::downgrade(&buf.entry),
                    rank: send.to,
                    frags: send.frags.clone(),
                });
            }
        }
        entry.state()
    }

    /// Forgets received rows once a call has used them (cache off): the readers no longer
    /// hold them, in every rank's table.
    fn forget_uncached(&self) {
        for received in self.uncached.borrow_mut().drain(..) {
            if let Some(entry) = received.entry.upgrade() {
                entry
                    .borrow_mut()
                    .table
                    .forget(received.rank, received.frags);
            }
        }
    }

    /// Moves the whole buffer to `to`.
    pub fn gather<T: Pod>(&self, buf: &mut DistData<T>, to: Rank) -> Result<()> {
        // A rank outside the job would match no rank's needs, so the gather would succeed
        // having moved nothing: refused instead (alike on every rank), naming the rank.
        if usize::from(to.0) >= self.ranks() {
            let call = self.call(format_args!("gather buffer {} to {to}", buf.id));
            return Err(ClusterError::Dist {
                call,
                source: DistError::NoSuchRank {
                    rank: to,
                    ranks: self.ranks(),
                },
            });
        }
        let rows = buf.rows;
        self.fetch(buf, |rank| if rank == to { 0..rows } else { 0..0 })
    }

    /// Forgets every copy but the owners' (StarPU-MPI's cache flush): the next reads send
    /// again.
    pub fn flush<T: Pod>(&self, buf: &mut DistData<T>) -> Result<()> {
        let call = self.call(format_args!("flush buffer {}", buf.id));
        let state = {
            let mut entry = buf.entry.borrow_mut();
            entry.table.flush();
            entry.state()
        };
        self.settle(buf);
        self.agree(&call, state, false)
    }

    /// The rows `rows` of `buf` as this rank holds them, refused unless the table says this
    /// rank holds their newest bytes (fetch them first), and refused where they lie in the
    /// runs of several owners, which a rank keeps apart ([`Self::read`] copies those).
    pub fn here<'a, T: Pod>(
        &self,
        buf: &'a DistData<T>,
        rows: Range<usize>,
    ) -> Result<HeteSlice<'a, T>> {
        self.check_held(buf, &rows)?;
        let me = self.rank();
        match buf.store.view(&rows) {
            Some(view) => view.map_err(|e| self.runtime_error("reading a distributed buffer", e)),
            None if !buf.store.one_segment(&rows) => Err(ClusterError::AcrossOwners {
                buffer: buf.id,
                rows,
                rank: me,
            }),
            // Fresh rows (zeros) never fetched here: valid, but not given room yet.
            None => Err(ClusterError::NotHere {
                buffer: buf.id,
                rows,
                rank: me,
            }),
        }
    }

    /// A copy of rows `rows` of `buf`, which this rank must hold (as for [`Self::here`]),
    /// across owners' runs: what a rank reads after a gather.
    pub fn read<T: Pod>(&self, buf: &DistData<T>, rows: Range<usize>) -> Result<Vec<T>> {
        self.check_held(buf, &rows)?;
        buf.store
            .gather(&rows)
            .map_err(|e| self.runtime_error("reading a distributed buffer", e))
    }

    fn check_held<T: Pod>(&self, buf: &DistData<T>, rows: &Range<usize>) -> Result<()> {
        let me = self.rank();
        let entry = buf.entry.borrow();
        let held = rows.end <= buf.rows
            && buf
                .frags(rows)
                .all(|f| entry.table.valid(f).is_some_and(|v| v.contains(me)));
        if held {
            Ok(())
        } else {
            Err(ClusterError::NotHere {
                buffer: buf.id,
                rows: rows.clone(),
                rank: me,
            })
        }
    }

    /// Frees the rows this rank keeps of `buf` that the table says it no longer holds (copies
    /// a flush, a write elsewhere or the receive cache forgot), so that its memory is the rows
    /// it owns plus the copies it holds.
    fn settle<T: Pod>(&self, buf: &mut DistData<T>) {
        let me = self.rank();
        let per_row = buf.row_len / buf.frag_elems;
        let DistData { entry, store, .. } = buf;
        let entry = entry.borrow();
        store.release(|rows| {
            (rows.start * per_row..rows.end * per_row)
                .any(|f| entry.table.valid(f).is_some_and(|v| v.contains(me)))
        });
    }
}

/// Why moving a fetch's bytes failed.
enum Moved {
    Transport(TransportError),
    Runtime(rimms_runtime::Error),
}

impl From<TransportError> for Moved {
    fn from(e: TransportError) -> Self {
        Moved::Transport(e)
    }
}

impl From<rimms_runtime::Error> for Moved {
    fn from(e: rimms_runtime::Error) -> Self {
        Moved::Runtime(e)
    }
}

/// A rank's rows of a buffer, as the fragments an exchange sends and receives.
struct RowBytes<'a, T: Pod> {
    store: &'a mut RowStore<T>,
    per_row: usize,
    frag_bytes: usize,
    /// A secure buffer's key and the id its seals bind ([`sealing_id`]).
    sealed: Option<(&'a SecureKey, u64)>,
}

impl<T: Pod> RowBytes<'_, T> {
    /// The rows covering `frags`, and where the fragments' bytes lie in those rows' bytes.
    fn rows(&self, frags: &Range<usize>) -> (Range<usize>, Range<usize>) {
        let per_row = self.per_row.max(1);
        let rows = frags.start / per_row..frags.end.div_ceil(per_row);
        let first = (frags.start - rows.start * per_row) * self.frag_bytes;
        (rows, first..first + frags.len() * self.frag_bytes)
    }
}

impl<T: Pod> Fragments for RowBytes<'_, T> {
    type Error = Moved;
    fn read(
        &mut self,
        frags: Range<usize>,
        send: impl FnOnce(&[u8]) -> std::result::Result<(), TransportError>,
    ) -> std::result::Result<(), Moved> {
        let (rows, bytes) = self.rows(&frags);
        let frag_bytes = self.frag_bytes;
        let sealed = self.sealed;
        self.store.read_bytes(&rows, |all| match sealed {
            None => Ok(send(&all[bytes])?),
            Some((key, id)) => {
                let message = seal_message(key, id, frags.start, frag_bytes, &all[bytes])?;
                Ok(send(&message)?)
            }
        })
    }
    fn write(
        &mut self,
        frags: Range<usize>,
        recv: impl FnOnce(&mut [u8]) -> std::result::Result<(), TransportError>,
    ) -> std::result::Result<(), Moved> {
        let (rows, bytes) = self.rows(&frags);
        let frag_bytes = self.frag_bytes;
        let sealed = self.sealed;
        self.store.write_bytes(&rows, |all| match sealed {
            None => Ok(recv(&mut all[bytes])?),
            Some((key, id)) => {
                let room = &mut all[bytes];
                let mut message = vec![0u8; room.len() + frags.len() * SEAL_BYTES];
                recv(&mut message)?;
                Ok(open_message(
                    key,
                    id,
                    frags.start,
                    frag_bytes,
                    &mut message,
                    room,
                )?)
            }
        })
    }
}

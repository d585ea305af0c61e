//! The protocol model of the random-program tests, shared by `programs.rs` (pools large
//! enough that nothing is evicted) and `eviction.rs` (device pools of a few blocks, so that
//! allocations evict): random programs, a host-only model of the contents, and a model of the
//! coherence protocol that predicts every copy per link, every eviction and every write-back.
//!
//! The runtime has the CPU and two sim devices with different links: sim0 sits on a fast link,
//! sim1 on a slow one. From those links the cheapest source of a fragment, derived by hand, is:
//! into the host, sim0 before sim1; into sim0, the host before sim1; into sim1, the host before
//! sim0 (equal cost), except that a run of neighbouring fragments keeps the source it started
//! with where that ties, and a new run where they tie starts from the source that holds the
//! longer run of what must be copied (then the lower id). The protocol model below encodes
//! that order directly. A
//! write-back on eviction goes to the host: from either sim, the host is the cheapest space
//! (sim0 to sim1 crosses sim1's slow link; sim1 to the host and to sim0 tie, the host's id is
//! lower).
//!
//! Eviction, as the model has it: each buffer is stamped per space with a clock that every
//! acquire advances and that a call finding its argument in place copies without advancing.
//! A sim's pool hands its granules out as the NF allocator does (`PoolModel`, worked out
//! plainly from its documented rule). An acquire into a sim whose pool has no room for the
//! block evicts the blocks of the buffers not used by the current call, oldest stamp first
//! (ties: the older buffer), trying again after each, unless even evicting all of them would
//! not free enough. A block is the whole buffer where that fits; otherwise a window of the
//! fragments the access needs (`rimms-runtime/src/data/window.rs`): a window that does not
//! cover an access grows (to the whole buffer, else to the hull of itself and the access) when
//! no other argument of the call holds the buffer, else is retired like an evicted block and
//! replaced by a window of just the access. An acquire that finds no room cuts the blocks of
//! the call's other buffers (each held by one argument) down to the granules of what the call
//! uses, evicting their fragments outside it, and tries once more. A call that still finds no
//! room fails with `DoesNotFit`, and the model predicts which calls do.
#![allow(dead_code)]

use proptest::prelude::*;
use rimms::{Complex32, Device, HeteData, LinkModel, Runtime, SimConfig, ZipOp};
use std::collections::BTreeMap;
use std::time::Duration;

pub const SPACES: [&str; 3] = ["host", "sim0", "sim1"];
const DEVICES: [Device; 3] = [Device::Cpu, Device::Sim(0), Device::Sim(1)];

/// Preferred sources for a copy into each space, best first.
const SOURCE_ORDER: [[usize; 2]; 3] = [[1, 2], [0, 2], [0, 1]];

/// Whether the two sources of a copy into each space cost the same: into sim1 both the host
/// and sim0 cross sim1's slow link. On a tie the planner stays with the source of the run it
/// is building, so neighbouring fragments come in one copy.
const SOURCES_TIE: [bool; 3] = [false, false, true];

/// One pool granule: every buffer of a program (at most 1,500 elements of 8 bytes) fits in
/// one, so a device pool of `n` granules holds exactly `n` blocks.
pub const GRANULE: usize = 16 << 10;

/// Each sim's pool under pressure: `granules` granules of `granule` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Pools {
    pub granule: usize,
    pub granules: usize,
}

impl Pools {
    /// `blocks` blocks of one buffer each (a buffer fits in one granule of [`GRANULE`]).
    pub const fn blocks(blocks: usize) -> Pools {
        Pools {
            granule: GRANULE,
            granules: blocks,
        }
    }
}

/// What a program did under pressure: per space (evictions, bytes dropped, bytes written
/// back), and the model's count of windows made, grown, retired and cut down, of calls that
/// gave their blocks up to lay them out afresh, and of calls refused.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    pub evictions: [(u64, u64, u64); 3],
    pub windows: u64,
    pub grown: u64,
    pub retired: u64,
    pub trimmed: u64,
    pub given_up: u64,
    pub refused: u64,
}

/// The runtime the models describe; with `host_mapped`, sim0's memory is also mapped into the
/// host (as an integrated GPU's or a u-dma-buf is), so host code and CPU kernels use data
/// there in place and write there when a buffer lives there. With `pool_blocks`, each sim's
/// pool is as `pools` says, so that programs evict.
fn runtime(host_mapped: bool, pools: Option<Pools>) -> Runtime {
    let fast = LinkModel {
        latency: Duration::from_micros(1),
        bytes_per_second: 20e9,
    };
    let slow = LinkModel {
        latency: Duration::from_micros(20),
        bytes_per_second: 1e9,
    };
    let sim = |link| SimConfig {
        link,
        pool_bytes: pools.map_or(64 << 20, |p| p.granules * p.granule),
        ..SimConfig::default()
    };
    Runtime::builder()
        .host_pool(64 << 20)
        .granule(pools.map_or(GRANULE, |p| p.granule))
        .sim(SimConfig {
            host_mapped,
            ..sim(fast)
        })
        .sim(sim(slow))
        .build()
        .expect("runtime")
}

#[derive(Clone, Debug)]
pub enum Op {
    Alloc {
        len: usize,
        frag_log2: u32,
    },
    HostRead {
        buf: usize,
        a: usize,
        b: usize,
    },
    HostWrite {
        buf: usize,
        a: usize,
        b: usize,
        discard: bool,
        seed: i32,
    },
    Scale {
        buf: usize,
        a: usize,
        b: usize,
        dev: usize,
        factor: usize,
    },
    Zip {
        x: usize,
        y: usize,
        out: usize,
        a: usize,
        b: usize,
        c: usize,
        dev: usize,
        op: usize,
    },
    Conj {
        x: usize,
        out: usize,
        a: usize,
        b: usize,
        dev: usize,
    },
    Prefetch {
        buf: usize,
        dev: usize,
    },
    Reset {
        buf: usize,
    },
    Drop {
        buf: usize,
    },
    /// Changes a live buffer's fragment size (merging or splitting its fragments).
    Refragment {
        buf: usize,
        frag_log2: u32,
    },
}

pub fn op() -> impl Strategy<Value = Op> {
    let idx = || 0usize..1 << 20;
    prop_oneof![
        2 => (1usize..1500, 3u32..14).prop_map(|(len, frag_log2)| Op::Alloc { len, frag_log2 }),
        3 => (idx(), idx(), idx()).prop_map(|(buf, a, b)| Op::HostRead { buf, a, b }),
        2 => (idx(), idx(), idx(), any::<bool>(), -50i32..50)
            .prop_map(|(buf, a, b, discard, seed)| Op::HostWrite { buf, a, b, discard, seed }),
        2 => (idx(), idx(), idx(), 0usize..3, 0usize..3)
            .prop_map(|(buf, a, b, dev, factor)| Op::Scale { buf, a, b, dev, factor }),
        3 => (idx(), idx(), idx(), idx(), idx(), idx(), 0usize..3, 0usize..4).prop_map(
            |(x, y, out, a, b, c, dev, op)| Op::Zip { x, y, out, a, b, c, dev, op }
        ),
        2 => (idx(), idx(), idx(), idx(), 0usize..3)
            .prop_map(|(x, out, a, b, dev)| Op::Conj { x, out, a, b, dev }),
        1 => (idx(), 0usize..3).prop_map(|(buf, dev)| Op::Prefetch { buf, dev }),
        1 => idx().prop_map(|buf| Op::Reset { buf }),
        1 => idx().prop_map(|buf| Op::Drop { buf }),
        1 => (idx(), 3u32..14).prop_map(|(buf, frag_log2)| Op::Refragment { buf, frag_log2 }),
    ]
}

/// The model of one buffer: its true contents and, per fragment, where it is valid and
/// whether it is zero.
struct ModelBuf {
    data: Vec<Complex32>,
    frag_elems: usize,
    valid: Vec<[bool; 3]>,
    zero: Vec<bool>,
    /// Where the buffer lives: the first space that wrote it.
    home: Option<usize>,
    /// Per space: the buffer's block there, and the clock when a call last used the buffer
    /// there.
    block: [Option<Win>; 3],
    stamp: [u64; 3],
    live: bool,
}

/// A sim's pool as the NF allocator (`rimms_runtime::alloc`) hands its granules out, worked
/// out plainly: single granules freed last are kept back (at most 16, the last kept given out
/// first); a request takes the head of a free run of the least size class whose every length
/// fits it, the run filed last among them, else of a run of its own class long enough, among
/// the runs not cut by kept granules; and only when none fits are the kept granules filed,
/// the last kept first, and the search made again.
#[derive(Clone, Debug, Default)]
struct PoolModel {
    taken: Vec<bool>,
    /// Free single granules kept back from the runs, the last kept last.
    kept: Vec<usize>,
    /// At the first granule of each free run: when it was last filed (a run cut from another,
    /// or joined with its neighbours, is filed anew).
    filed_at: Vec<u64>,
    clock: u64,
}

/// NF's size class of a run of `len >= 1` granules: one per length below 16, then 16 of equal
/// width per power of two; ordered as the lengths they hold.
fn nf_class(len: usize) -> (usize, usize) {
    if len < 16 {
        return (0, len);
    }
    let p = (usize::BITS - 1 - len.leading_zeros()) as usize;
    (p - 3, (len - (1 << p)) / (1 << (p - 4)))
}

/// The shortest length of class `c`.
fn nf_class_min((level, sub): (usize, usize)) -> usize {
    if level == 0 {
        sub
    } else {
        (1 << (level + 3)) + sub * (1 << (level - 1))
    }
}

impl PoolModel {
    fn new(granules: usize) -> PoolModel {
        PoolModel {
            taken: vec![false; granules],
            filed_at: vec![0; granules],
            ..PoolModel::default()
        }
    }

    /// Free granules, the kept ones included.
    fn free_count(&self) -> usize {
        self.taken.iter().filter(|&&t| !t).count()
    }

    fn filed(&self, g: usize) -> bool {
        !self.taken[g] && !self.kept.contains(&g)
    }

    /// The maximal runs of filed granules, as (first, length).
    fn runs(&self) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        let mut g = 0;
        while g < self.taken.len() {
            let first = g;
            while g < self.taken.len() && self.filed(g) {
                g += 1;
            }
            if g > first {
                runs.push((first, g - first));
            }
            g += 1;
        }
        runs
    }

    /// The run a request of `n` granules takes the head of, if one fits.
    fn pick(&self, n: usize) -> Option<(usize, usize)> {
        let runs = self.runs();
        let latest = |keep: &dyn Fn(usize) -> bool| {
            runs.iter()
                .filter(|&&(_, len)| keep(len))
                .max_by_key(|&&(first, _)| self.filed_at[first])
                .copied()
        };
        let least = runs
            .iter()
            .map(|&(_, len)| nf_class(len))
            .filter(|&c| nf_class_min(c) >= n)
            .min();
        match least {
            Some(least) => latest(&|len| nf_class(len) == least),
            None => latest(&|len| nf_class(len) == nf_class(n) && len >= n),
        }
    }

    fn alloc(&mut self, n: usize) -> Option<usize> {
        if n == 1 {
            if let Some(g) = self.kept.pop() {
                self.taken[g] = true;
                return Some(g);
            }
        }
        if n > self.free_count() {
            return None;
        }
        let (first, len) = match self.pick(n) {
            Some(run) => run,
            None if self.kept.is_empty() => return None,
            None => {
                while let Some(g) = self.kept.pop() {
                    self.release(g, 1);
                }
                self.pick(n)?
            }
        };
        self.taken[first..first + n].fill(true);
        if len > n {
            self.file(first + n);
        }
        Some(first)
    }

    fn free(&mut self, first: usize, n: usize) {
        if n == 0 {
            return;
        }
        if n == 1 && self.kept.len() < 16 {
            self.taken[first] = false;
            self.kept.push(first);
            return;
        }
        self.release(first, n);
    }

    /// Frees the granules of the run `first..first + n` outside `keep` (counted from
    /// `first`): the head, then the tail, each filed.
    fn shrink(&mut self, first: usize, n: usize, keep: std::ops::Range<usize>) {
        if keep.start > 0 {
            self.release(first, keep.start);
        }
        if keep.end < n {
            self.release(first + keep.end, n - keep.end);
        }
    }

    /// Files `first..first + n` free, joined with the filed runs beside it.
    fn release(&mut self, first: usize, n: usize) {
        self.taken[first..first + n].fill(false);
        let mut head = first;
        while head > 0 && self.filed(head - 1) {
            head -= 1;
        }
        self.file(head);
    }

    fn file(&mut self, first: usize) {
        self.clock += 1;
        self.filed_at[first] = self.clock;
    }
}

/// A block of a buffer: granules `first..first + granules` of its sim's pool, holding bytes
/// `start..end` of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Win {
    first: usize,
    granules: usize,
    /// The buffer byte at the block's first byte.
    origin: usize,
    start: usize,
    end: usize,
}

/// Where an access by a device happens, decided before any argument of a call moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    /// The whole buffer is already there, in this space, as the access needs: nothing moves
    /// or changes but the buffer's stamp there.
    InPlace(usize),
    /// Bring the range into this space (and mark it there if written).
    Acquire(usize),
}

#[derive(Default)]
struct Model {
    bufs: Vec<ModelBuf>,
    /// The CPU (device 0) reaches sim0's memory (space 1) in place.
    host_mapped: bool,
    /// (from, to) → (copies, bytes)
    links: BTreeMap<(usize, usize), (u64, u64)>,
    /// Each sim's pool; `None`: room for everything.
    pools: Option<Pools>,
    /// Per space, its pool's granules.
    pool: [PoolModel; 3],
    /// The clock of least-recent use.
    clock: u64,
    /// The buffers the call being modelled uses, once per argument: never evicted while it
    /// runs, and a window of one held by two arguments never moves.
    pinned: Vec<usize>,
    /// Whether the last acquire that found no room failed with the room there in pieces:
    /// free plus evictable bytes at least what it needed (as its `DoesNotFit` says).
    fragmented: bool,
    totals: Totals,
}

impl ModelBuf {
    fn frag_range(&self, start: usize, len: usize) -> std::ops::Range<usize> {
        start / self.frag_elems..(start + len).div_ceil(self.frag_elems)
    }

    fn frag_bytes(&self, f: usize) -> u64 {
        let end = ((f + 1) * self.frag_elems).min(self.data.len());
        ((end - f * self.frag_elems) * 8) as u64
    }
}

impl Model {
    /// Whether every fragment is valid in `space` (for a read), or valid only there and not
    /// zero-marked (for a write).
    fn resident(&self, buf: usize, space: usize, writes: bool) -> bool {
        let b = &self.bufs[buf];
        (0..b.valid.len()).all(|f| {
            b.valid[f][space]
                && (!writes || (b.valid[f].iter().filter(|&&v| v).count() == 1 && !b.zero[f]))
        })
    }

    /// DESIGN.md's rule for a device that reaches several spaces: the device's own space if
    /// the buffer is resident there, else (for the CPU) sim0 if it is resident there, else an
    /// acquire into the buffer's home when the device reaches it, or into its own space.
    fn decide(&self, buf: usize, device: usize, writes: bool) -> Where {
        let reaches_sim0 = device == 0 && self.host_mapped;
        if self.resident(buf, device, writes) {
            return Where::InPlace(device);
        }
        if reaches_sim0 && self.resident(buf, 1, writes) {
            return Where::InPlace(1);
        }
        match self.bufs[buf].home {
            Some(1) if reaches_sim0 => Where::Acquire(1),
            _ => Where::Acquire(device),
        }
    }

    /// An access by `device`, decided and applied; see [`Self::apply`].
    fn access_by(
        &mut self,
        buf: usize,
        start: usize,
        len: usize,
        device: usize,
        reads: bool,
        writes: bool,
    ) -> bool {
        let at = self.decide(buf, device, writes);
        self.call(&[(at, buf, start, len, reads, writes)])
    }

    /// One call's accesses, decided before any of them moves, as dispatch does: every
    /// argument found in place is stamped first, then the others are acquired in order, none
    /// of the call's buffers evictable meanwhile. Returns whether the call ran: an acquire that
    /// finds no room fails it, after what the acquires before it did.
    fn call(&mut self, accesses: &[(Where, usize, usize, usize, bool, bool)]) -> bool {
        let pins: Vec<usize> = accesses.iter().map(|a| a.1).collect();
        self.call_pinned(pins, accesses)
    }

    /// [`Self::call`] where `pins` (one entry per argument) differs from the accesses: two
    /// arguments planned as one range.
    fn call_pinned(
        &mut self,
        pins: Vec<usize>,
        accesses: &[(Where, usize, usize, usize, bool, bool)],
    ) -> bool {
        self.pinned = pins;
        for &(at, buf, ..) in accesses {
            if let Where::InPlace(space) = at {
                self.bufs[buf].stamp[space] = self.clock;
            }
        }
        let mut at: Vec<Where> = accesses.iter().map(|a| a.0).collect();
        let mut pending = vec![true; accesses.len()];
        // 0: nothing done to make room yet; 1: the other buffers' blocks cut down to what
        // the call uses; 2: their blocks given up, to be acquired again.
        let mut room = 0;
        let mut ran = true;
        while let Some(k) = pending.iter().position(|&p| p) {
            let (_, buf, start, len, reads, writes) = accesses[k];
            if self.apply(at[k], buf, start, len, reads, writes) {
                pending[k] = false;
                continue;
            }
            if room == 2 {
                ran = false;
                break;
            }
            room += 1;
            if room == 1 && self.trim_others(accesses, k) {
                continue;
            }
            room = 2;
            if !self.fragmented {
                ran = false;
                break;
            }
            let given_up = self.give_up_others(accesses, &at, k);
            if given_up.is_empty() {
                ran = false;
                break;
            }
            self.totals.given_up += 1;
            for (j, space) in given_up {
                at[j] = Where::Acquire(space);
                pending[j] = true;
            }
        }
        self.pinned.clear();
        if !ran {
            self.totals.refused += 1;
        }
        ran
    }

    /// Gives buffer `buf` a block in `space` covering bytes `need` of it, as the buffer layer
    /// does (see the module doc). False where none fits.
    fn ensure_window(&mut self, buf: usize, space: usize, need: std::ops::Range<usize>) -> bool {
        let total = self.bufs[buf].data.len() * 8;
        let whole = 0..total;
        let window = |first, granules, bytes: std::ops::Range<usize>| Win {
            first,
            granules,
            origin: bytes.start,
            start: bytes.start,
            end: bytes.end,
        };
        let Some(pools) = self.pools.filter(|_| space != 0) else {
            let b = &mut self.bufs[buf];
            b.block[space].get_or_insert(window(0, 0, whole));
            return true;
        };
        let granules = |bytes: usize| bytes.div_ceil(pools.granule).max(1);
        let old = match self.bufs[buf].block[space] {
            Some(w) if w.start <= need.start && need.end <= w.end => return true,
            Some(w) => w,
            None => {
                if let Some(first) = self.alloc_evicting(buf, space, total) {
                    self.bufs[buf].block[space] = Some(window(first, granules(total), whole));
                    return true;
                }
                if need == whole {
                    return false;
                }
                let Some(first) = self.alloc_evicting(buf, space, need.len()) else {
                    return false;
                };
                self.bufs[buf].block[space] = Some(window(first, granules(need.len()), need));
                self.totals.windows += 1;
                return true;
            }
        };
        if self.pinned.iter().filter(|&&p| p == buf).count() > 1 {
            let free = self.pool[space].free_count();
            self.fragmented = free * pools.granule >= need.len();
            return false;
        }
        let hull = old.start.min(need.start)..old.end.max(need.end);
        let tries = if hull == whole {
            vec![whole]
        } else {
            vec![whole, hull]
        };
        for bytes in tries {
            if let Some(first) = self.alloc_evicting(buf, space, bytes.len()) {
                self.release(space, old);
                self.bufs[buf].block[space] = Some(window(first, granules(bytes.len()), bytes));
                self.totals.grown += 1;
                return true;
            }
        }
        self.evict(buf, space);
        self.totals.retired += 1;
        let Some(first) = self.alloc_evicting(buf, space, need.len()) else {
            return false;
        };
        self.bufs[buf].block[space] = Some(window(first, granules(need.len()), need));
        self.totals.windows += 1;
        true
    }

    /// The call's buffers other than access `k`'s, each held by one argument, with the space
    /// each is used in.
    fn others(
        &self,
        accesses: &[(Where, usize, usize, usize, bool, bool)],
        at: &[Where],
        k: usize,
    ) -> Vec<(usize, usize)> {
        (0..accesses.len())
            .filter(|&j| {
                let other = accesses[j].1;
                other != accesses[k].1 && self.pinned.iter().filter(|&&p| p == other).count() == 1
            })
            .map(|j| {
                let (Where::InPlace(space) | Where::Acquire(space)) = at[j];
                (j, space)
            })
            .collect()
    }

    /// Cuts the blocks of the call's other buffers down to what it uses; whether that freed
    /// anything.
    fn trim_others(
        &mut self,
        accesses: &[(Where, usize, usize, usize, bool, bool)],
        k: usize,
    ) -> bool {
        let at: Vec<Where> = accesses.iter().map(|a| a.0).collect();
        let mut freed = false;
        for (j, space) in self.others(accesses, &at, k) {
            let (_, other, start, len, ..) = accesses[j];
            freed |= self.trim(other, space, start, len);
        }
        freed
    }

    /// Gives up (evicts) the blocks of the call's other buffers; the accesses whose block
    /// went, with their space, to be acquired again.
    fn give_up_others(
        &mut self,
        accesses: &[(Where, usize, usize, usize, bool, bool)],
        at: &[Where],
        k: usize,
    ) -> Vec<(usize, usize)> {
        let mut given_up = Vec::new();
        for (j, space) in self.others(accesses, at, k) {
            let other = accesses[j].1;
            if space != 0 && self.pools.is_some() && self.bufs[other].block[space].is_some() {
                self.evict(other, space);
                given_up.push((j, space));
            }
        }
        given_up
    }

    /// Cuts `buf`'s block in `space` down, in place, to the granules holding the fragments
    /// of elements `start..start + len`, after one eviction of its fragments outside them.
    /// False where that frees nothing (or the block does not hold them).
    fn trim(&mut self, buf: usize, space: usize, start: usize, len: usize) -> bool {
        let Some(pools) = self.pools.filter(|_| space != 0) else {
            return false;
        };
        let b = &self.bufs[buf];
        let Some(w) = b.block[space] else {
            return false;
        };
        let frags = b.frag_range(start, len);
        let fb = b.frag_elems * 8;
        let need = frags.start * fb..(frags.end * fb).min(b.data.len() * 8);
        let g = pools.granule;
        if !(w.start <= need.start && need.end <= w.end) {
            return false;
        }
        let keep = (need.start - w.origin) / g..(need.end - w.origin).div_ceil(g);
        if keep.len() == w.granules {
            return false;
        }
        self.evict_outside(buf, space, frags);
        // As the pool cuts a block down: its head, then its tail, each filed (a shrink never
        // keeps a single granule back).
        let pool = &mut self.pool[space];
        pool.shrink(w.first, w.granules, keep.clone());
        self.bufs[buf].block[space] = Some(Win {
            first: w.first + keep.start,
            granules: keep.len(),
            origin: w.origin + keep.start * g,
            start: need.start,
            end: need.end,
        });
        self.totals.trimmed += 1;
        true
    }

    /// The first granule of a run for `bytes` in `space`'s pool, evicting the least recently
    /// used blocks of buffers the call does not use, one at a time, until it fits; `None`
    /// (having evicted nothing) where even evicting all of them would not free enough.
    fn alloc_evicting(&mut self, buf: usize, space: usize, bytes: usize) -> Option<usize> {
        let pools = self.pools.expect("a limited pool");
        let granules = bytes.div_ceil(pools.granule).max(1);
        if let Some(first) = self.pool[space].alloc(granules) {
            return Some(first);
        }
        let mut victims: Vec<usize> = (0..self.bufs.len())
            .filter(|&v| {
                let b = &self.bufs[v];
                b.live && b.block[space].is_some() && v != buf && !self.pinned.contains(&v)
            })
            .collect();
        victims.sort_by_key(|&v| (self.bufs[v].stamp[space], v));
        let evictable: usize = victims
            .iter()
            .map(|&v| {
                self.bufs[v].block[space]
                    .expect("a victim has a block")
                    .granules
            })
            .sum();
        let free = self.pool[space].free_count();
        if free + evictable < granules {
            self.fragmented = false;
            return None;
        }
        for v in victims {
            self.evict(v, space);
            if let Some(first) = self.pool[space].alloc(granules) {
                return Some(first);
            }
        }
        let free = self.pool[space].free_count();
        self.fragmented = free >= granules;
        None
    }

    /// Gives a block's granules back to its pool.
    fn release(&mut self, space: usize, win: Win) {
        if space != 0 && self.pools.is_some() {
            self.pool[space].free(win.first, win.granules);
        }
    }

    /// Drops buffer `buf`'s block in `space`: fragments valid only there (and not zero) are
    /// written back to the host first, one copy per run of neighbours.
    fn evict(&mut self, buf: usize, space: usize) {
        self.evict_outside(buf, space, 0..0);
        let win = self.bufs[buf].block[space]
            .take()
            .expect("an evicted block exists");
        self.release(space, win);
    }

    /// One eviction of the fragments of `buf` valid in `space` outside fragments `keep`:
    /// the last copies written back to the host (one copy per run), the rest dropped.
    fn evict_outside(&mut self, buf: usize, space: usize, keep: std::ops::Range<usize>) {
        let b = &mut self.bufs[buf];
        let (mut dropped, mut written) = (0, 0);
        let mut run_end = None;
        for f in 0..b.valid.len() {
            if !b.valid[f][space] || keep.contains(&f) {
                continue;
            }
            let last_copy = b.valid[f].iter().filter(|&&v| v).count() == 1 && !b.zero[f];
            b.valid[f][space] = false;
            if last_copy {
                b.valid[f][0] = true;
                let entry = self.links.entry((space, 0)).or_default();
                if run_end != Some(f) {
                    entry.0 += 1;
                }
                entry.1 += b.frag_bytes(f);
                written += b.frag_bytes(f);
                run_end = Some(f + 1);
            } else {
                dropped += b.frag_bytes(f);
            }
        }
        let e = &mut self.totals.evictions[space];
        *e = (e.0 + 1, e.1 + dropped, e.2 + written);
    }

    fn apply(
        &mut self,
        at: Where,
        buf: usize,
        start: usize,
        len: usize,
        reads: bool,
        writes: bool,
    ) -> bool {
        if let Where::Acquire(space) = at {
            if !self.access(buf, start, len, space, reads, writes) {
                return false;
            }
            if writes {
                self.bufs[buf].home.get_or_insert(space);
            }
        }
        true
    }

    /// An acquire: advances the clock, stamps the buffer in `dst`, gives it a block there that
    /// covers the fragments of the range, then [`Self::transfer`]. False where no block fits.
    fn access(
        &mut self,
        buf: usize,
        start: usize,
        len: usize,
        dst: usize,
        reads: bool,
        writes: bool,
    ) -> bool {
        self.clock += 1;
        self.bufs[buf].stamp[dst] = self.clock;
        let b = &self.bufs[buf];
        let frags = b.frag_range(start, len);
        let fb = b.frag_elems * 8;
        let need = frags.start * fb..(frags.end * fb).min(b.data.len() * 8);
        if !self.ensure_window(buf, dst, need) {
            return false;
        }
        self.transfer(buf, start, len, dst, reads, writes);
        true
    }

    /// The protocol: read-acquire (`reads`) copies missing non-zero fragments from the
    /// preferred valid source, one copy per run of neighbours with the same source; then a
    /// write leaves `dst` the only holder.
    fn transfer(
        &mut self,
        buf: usize,
        start: usize,
        len: usize,
        dst: usize,
        reads: bool,
        writes: bool,
    ) {
        let b = &mut self.bufs[buf];
        let frags = b.frag_range(start, len);
        if reads {
            let mut run: Option<(usize, usize)> = None; // (src, last frag)
            for f in frags.clone() {
                if b.valid[f][dst] {
                    run = None;
                    continue;
                }
                if b.zero[f] {
                    b.valid[f][dst] = true;
                    run = None;
                    continue;
                }
                let best = SOURCE_ORDER[dst]
                    .into_iter()
                    .find(|&s| b.valid[f][s])
                    .expect("a non-zero fragment is valid somewhere");
                let src = match run {
                    Some((r, last)) if last + 1 == f && b.valid[f][r] && SOURCES_TIE[dst] => r,
                    // A new run where both sources cost the same: the one that holds the longer
                    // run of what must be copied from here on, then the lower id.
                    _ if SOURCES_TIE[dst] => {
                        let ahead = |s: usize| {
                            (f..frags.end)
                                .take_while(|&g| !b.valid[g][dst] && !b.zero[g] && b.valid[g][s])
                                .count()
                        };
                        SOURCE_ORDER[dst]
                            .into_iter()
                            .filter(|&s| b.valid[f][s])
                            .max_by_key(|&s| (ahead(s), std::cmp::Reverse(s)))
                            .expect("a non-zero fragment is valid somewhere")
                    }
                    _ => best,
                };
                let entry = self.links.entry((src, dst)).or_default();
                if run != Some((src, f.wrapping_sub(1))) {
                    entry.0 += 1;
                }
                entry.1 += b.frag_bytes(f);
                b.valid[f][dst] = true;
                run = Some((src, f));
            }
        }
        if writes {
            for f in frags {
                b.valid[f] = [false; 3];
                b.valid[f][dst] = true;
                b.zero[f] = false;
            }
        }
    }
}

impl Model {
    /// A new fragment size of `frag_elems` elements. Merging groups whose fragments share no
    /// valid space (and are not all zero) first reads the whole buffer on the host; a merged
    /// fragment is valid where all its parts were and zero if all were; a split fragment's
    /// parts inherit its state.
    fn refragment(&mut self, buf: usize, frag_elems: usize) {
        let old = self.bufs[buf].frag_elems;
        if frag_elems > old {
            let factor = frag_elems / old;
            let b = &self.bufs[buf];
            let common = |g: &[[bool; 3]]| (0..3).any(|s| g.iter().all(|v| v[s]));
            let gather = b
                .valid
                .chunks(factor)
                .zip(b.zero.chunks(factor))
                .any(|(v, z)| !common(v) && !z.iter().all(|&z| z));
            if gather {
                let len = b.data.len();
                let gathered = self.access(buf, 0, len, 0, true, false);
                assert!(gathered, "the host always has room");
            }
        }
        let b = &mut self.bufs[buf];
        let count = b.data.len().div_ceil(frag_elems);
        // Fragment `f` of the new size covers elements from `f * frag_elems`: its old
        // fragments are those overlapping that range.
        let parts = |f: usize| {
            let start = f * frag_elems;
            let end = (start + frag_elems).min(b.data.len());
            start / old..end.div_ceil(old)
        };
        let valid = (0..count)
            .map(|f| std::array::from_fn(|s| b.valid[parts(f)].iter().all(|v| v[s])))
            .collect();
        let zero = (0..count)
            .map(|f| b.zero[parts(f)].iter().all(|&z| z))
            .collect();
        b.valid = valid;
        b.zero = zero;
        b.frag_elems = frag_elems;
    }
}

/// Whether a call ran, checked against the model: it ran where the model says, and failed
/// only for want of room (`DoesNotFit`) where the model says it finds none.
fn ran_as_modelled(outcome: rimms::Result<()>, modelled: bool) -> Result<bool, TestCaseError> {
    match outcome {
        Ok(()) => prop_assert!(modelled, "the call ran where the model finds no room"),
        Err(rimms::Error::DoesNotFit { .. }) => {
            prop_assert!(
                !modelled,
                "the call found no room where the model has it run"
            )
        }
        Err(other) => prop_assert!(false, "the call failed: {}", other),
    }
    Ok(modelled)
}

struct State {
    rt: Runtime,
    bufs: Vec<Option<HeteData<Complex32>>>,
    model: Model,
}

/// Buffer `i`, which the caller knows is live.
fn live(bufs: &[Option<HeteData<Complex32>>], i: usize) -> &HeteData<Complex32> {
    bufs[i].as_ref().expect("live")
}

impl State {
    /// Runs `call` with buffer `out` borrowed mutably beside the others borrowed shared: a
    /// kernel's output and its inputs, which the borrow checker needs apart.
    fn with_output<R>(
        &mut self,
        out: usize,
        call: impl FnOnce(&Runtime, &[Option<HeteData<Complex32>>], &mut HeteData<Complex32>) -> R,
    ) -> R {
        let mut output = self.bufs[out].take().expect("live");
        let result = call(&self.rt, &self.bufs, &mut output);
        self.bufs[out] = Some(output);
        result
    }

    fn live(&self, pick: usize) -> Option<usize> {
        let live: Vec<usize> = (0..self.bufs.len())
            .filter(|&i| self.bufs[i].is_some())
            .collect();
        (!live.is_empty()).then(|| live[pick % live.len()])
    }

    /// Any non-empty element range of buffer `i`.
    fn range(&self, i: usize, a: usize, b: usize) -> (usize, usize) {
        let len = self.model.bufs[i].data.len();
        let start = a % len;
        (start, 1 + b % (len - start))
    }

    /// A non-empty range of whole fragments (the last may end at the buffer's end).
    fn aligned(&self, i: usize, a: usize, b: usize) -> (usize, usize) {
        let m = &self.model.bufs[i];
        let frags = m.data.len().div_ceil(m.frag_elems);
        let first = a % frags;
        let count = 1 + b % (frags - first);
        let start = first * m.frag_elems;
        (
            start,
            ((first + count) * m.frag_elems).min(m.data.len()) - start,
        )
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Alloc { len, frag_log2 } => {
                let mut data = HeteData::<Complex32>::alloc(&self.rt, len).expect("alloc");
                data.fragment(1 << frag_log2).expect("fragment");
                let frag_elems = (1usize << frag_log2) / 8;
                let frags = len.div_ceil(frag_elems);
                self.bufs.push(Some(data));
                self.model.bufs.push(ModelBuf {
                    data: vec![Complex32::new(0.0, 0.0); len],
                    frag_elems,
                    valid: vec![[false; 3]; frags],
                    zero: vec![true; frags],
                    home: None,
                    block: [None; 3],
                    stamp: [0; 3],
                    live: true,
                });
            }
            Op::HostRead { buf, a, b } => {
                let Some(i) = self.live(buf) else {
                    return Ok(());
                };
                let (start, len) = self.range(i, a, b);
                let data = self.bufs[i].as_ref().expect("live");
                let got = data
                    .slice(start..start + len)
                    .expect("slice")
                    .host()
                    .expect("host");
                let ran = self.model.access_by(i, start, len, 0, true, false);
                prop_assert!(ran, "the host always has room");
                prop_assert_eq!(got, &self.model.bufs[i].data[start..start + len]);
            }
            Op::HostWrite {
                buf,
                a,
                b,
                discard,
                seed,
            } => {
                let Some(i) = self.live(buf) else {
                    return Ok(());
                };
                let (start, len) = self.aligned(i, a, b);
                let data = self.bufs[i].as_mut().expect("live");
                let mut view = data.slice_mut(start..start + len).expect("aligned view");
                let host = if discard {
                    view.host_write()
                } else {
                    view.host_mut()
                }
                .expect("host");
                let model = &mut self.model.bufs[i].data[start..start + len];
                for (k, (h, m)) in host.iter_mut().zip(model.iter_mut()).enumerate() {
                    let v = if discard {
                        Complex32::new((seed + k as i32 % 7) as f32, (k % 5) as f32)
                    } else {
                        *m + Complex32::new(seed as f32, 1.0)
                    };
                    *h = if discard {
                        v
                    } else {
                        *h + Complex32::new(seed as f32, 1.0)
                    };
                    *m = v;
                }
                let ran = self.model.access_by(i, start, len, 0, !discard, true);
                prop_assert!(ran, "the host always has room");
            }
            Op::Scale {
                buf,
                a,
                b,
                dev,
                factor,
            } => {
                let Some(i) = self.live(buf) else {
                    return Ok(());
                };
                let (start, len) = self.aligned(i, a, b);
                let f = [
                    Complex32::new(2.0, 0.0),
                    Complex32::new(-1.0, 0.0),
                    Complex32::new(0.0, 1.0),
                ][factor];
                let data = self.bufs[i].as_mut().expect("live");
                let mut view = data.slice_mut(start..start + len).expect("aligned view");
                let outcome = self.rt.scale(DEVICES[dev], f, &mut view);
                let ran = self.model.access_by(i, start, len, dev, true, true);
                if ran_as_modelled(outcome, ran)? {
                    for v in &mut self.model.bufs[i].data[start..start + len] {
                        *v = Complex32::new(v.re * f.re - v.im * f.im, v.re * f.im + v.im * f.re);
                    }
                }
            }
            Op::Zip {
                x,
                y,
                out,
                a,
                b,
                c,
                dev,
                op,
            } => {
                let (Some(xi), Some(yi), Some(oi)) = (self.live(x), self.live(y), self.live(out))
                else {
                    return Ok(());
                };
                if oi == xi || oi == yi {
                    return Ok(());
                }
                let (ostart, olen) = self.aligned(oi, c, 0);
                let (xlen, ylen) = (
                    self.model.bufs[xi].data.len(),
                    self.model.bufs[yi].data.len(),
                );
                if xlen < olen || ylen < olen {
                    return Ok(());
                }
                let (xs, ys) = (a % (xlen - olen + 1), b % (ylen - olen + 1));
                let zop = [ZipOp::Add, ZipOp::Sub, ZipOp::Mul, ZipOp::MulConj][op];
                let outcome = self.with_output(oi, |rt, bufs, out| {
                    let xv = live(bufs, xi).slice(xs..xs + olen).expect("x");
                    let yv = live(bufs, yi).slice(ys..ys + olen).expect("y");
                    let mut ov = out.slice_mut(ostart..ostart + olen).expect("out");
                    rt.zip(DEVICES[dev], zop, &xv, &yv, &mut ov)
                });
                let result: Vec<Complex32> = (0..olen)
                    .map(|k| {
                        let (p, q) = (
                            self.model.bufs[xi].data[xs + k],
                            self.model.bufs[yi].data[ys + k],
                        );
                        match zop {
                            ZipOp::Add => Complex32::new(p.re + q.re, p.im + q.im),
                            ZipOp::Sub => Complex32::new(p.re - q.re, p.im - q.im),
                            ZipOp::Mul => {
                                Complex32::new(p.re * q.re - p.im * q.im, p.re * q.im + p.im * q.re)
                            }
                            _ => {
                                Complex32::new(p.re * q.re + p.im * q.im, p.im * q.re - p.re * q.im)
                            }
                        }
                    })
                    .collect();
                // Every argument's place is decided before any of them moves, as dispatch does.
                let (wx, wy, wo) = (
                    self.model.decide(xi, dev, false),
                    self.model.decide(yi, dev, false),
                    self.model.decide(oi, dev, true),
                );
                // Two views of one buffer acquired in the same space that touch are planned
                // as one range (one copy), as dispatch does.
                let touch = xs <= ys + olen && ys <= xs + olen;
                let out = (wo, oi, ostart, olen, false, true);
                let ran = if xi == yi && wx == wy && touch {
                    let (s, e) = (xs.min(ys), (xs + olen).max(ys + olen));
                    self.model
                        .call_pinned(vec![xi, xi, oi], &[(wx, xi, s, e - s, true, false), out])
                } else {
                    self.model.call(&[
                        (wx, xi, xs, olen, true, false),
                        (wy, yi, ys, olen, true, false),
                        out,
                    ])
                };
                if ran_as_modelled(outcome, ran)? {
                    self.model.bufs[oi].data[ostart..ostart + olen].copy_from_slice(&result);
                }
            }
            Op::Conj { x, out, a, b, dev } => {
                let (Some(xi), Some(oi)) = (self.live(x), self.live(out)) else {
                    return Ok(());
                };
                if xi == oi {
                    return Ok(());
                }
                let (ostart, olen) = self.aligned(oi, b, usize::MAX);
                let xlen = self.model.bufs[xi].data.len();
                if xlen < olen {
                    return Ok(());
                }
                let xs = a % (xlen - olen + 1);
                let outcome = self.with_output(oi, |rt, bufs, out| {
                    let xv = live(bufs, xi).slice(xs..xs + olen).expect("x");
                    let mut ov = out.slice_mut(ostart..ostart + olen).expect("out");
                    rt.conj(DEVICES[dev], &xv, &mut ov)
                });
                let (wx, wo) = (
                    self.model.decide(xi, dev, false),
                    self.model.decide(oi, dev, true),
                );
                let ran = self.model.call(&[
                    (wx, xi, xs, olen, true, false),
                    (wo, oi, ostart, olen, false, true),
                ]);
                if ran_as_modelled(outcome, ran)? {
                    for k in 0..olen {
                        let v = self.model.bufs[xi].data[xs + k];
                        self.model.bufs[oi].data[ostart + k] = Complex32::new(v.re, -v.im);
                    }
                }
            }
            Op::Prefetch { buf, dev } => {
                let Some(i) = self.live(buf) else {
                    return Ok(());
                };
                let outcome = self.bufs[i].as_ref().expect("live").prefetch(DEVICES[dev]);
                let len = self.model.bufs[i].data.len();
                let ran = self.model.access(i, 0, len, dev, true, false);
                ran_as_modelled(outcome, ran)?;
            }
            Op::Reset { buf } => {
                let Some(i) = self.live(buf) else {
                    return Ok(());
                };
                self.bufs[i].as_mut().expect("live").reset();
                let m = &mut self.model.bufs[i];
                m.data
                    .iter_mut()
                    .for_each(|v| *v = Complex32::new(0.0, 0.0));
                m.valid.iter_mut().for_each(|v| *v = [false; 3]);
                m.zero.iter_mut().for_each(|z| *z = true);
            }
            Op::Drop { buf } => {
                let Some(i) = self.live(buf) else {
                    return Ok(());
                };
                self.bufs[i] = None;
                self.model.bufs[i].live = false;
                for space in 0..3 {
                    if let Some(win) = self.model.bufs[i].block[space].take() {
                        self.model.release(space, win);
                    }
                }
            }
            Op::Refragment { buf, frag_log2 } => {
                let Some(i) = self.live(buf) else {
                    return Ok(());
                };
                let data = self.bufs[i].as_mut().expect("live");
                data.fragment(1 << frag_log2).expect("fragment");
                self.model.refragment(i, (1usize << frag_log2) / 8);
                let m = &self.model.bufs[i];
                prop_assert_eq!(data.fragment_count(), m.valid.len());
                for f in 0..m.valid.len() {
                    let state = data.fragment_state(f).expect("in range");
                    let valid: Vec<usize> = state.valid.iter().map(|s| s.index()).collect();
                    let expected: Vec<usize> = (0..3).filter(|&s| m.valid[f][s]).collect();
                    prop_assert_eq!(valid, expected, "valid spaces of fragment {}", f);
                    prop_assert_eq!(state.zero, m.zero[f], "zero mark of fragment {}", f);
                    // Data was written by someone: `None` means "never touched since reset".
                    prop_assert!(
                        state.zero || state.owner.is_some(),
                        "fragment {} holds data but has no owner",
                        f
                    );
                }
            }
        }
        Ok(())
    }
}

impl State {
    /// Every live buffer's fragment states as the model has them: the same valid spaces, the
    /// same zero marks, and every fragment with data valid somewhere (nothing lost).
    fn check_fragments(&self) -> Result<(), TestCaseError> {
        for (i, data) in self.bufs.iter().enumerate() {
            let Some(data) = data else { continue };
            let m = &self.model.bufs[i];
            for f in 0..m.valid.len() {
                let state = data.fragment_state(f).expect("in range");
                let valid: Vec<usize> = state.valid.iter().map(|s| s.index()).collect();
                let expected: Vec<usize> = (0..3).filter(|&s| m.valid[f][s]).collect();
                prop_assert_eq!(
                    valid,
                    expected,
                    "valid spaces of buffer {} fragment {}",
                    i,
                    f
                );
                prop_assert_eq!(
                    state.zero,
                    m.zero[f],
                    "zero mark of buffer {} fragment {}",
                    i,
                    f
                );
                prop_assert!(
                    state.zero || !state.valid.is_empty(),
                    "buffer {} fragment {} holds data valid nowhere: lost",
                    i,
                    f
                );
            }
        }
        Ok(())
    }
}

/// Runs `ops` on a runtime and on the models, and checks every host read (in `apply`), the
/// final contents, the copies and bytes of every link, and that every pool is empty after the
/// last drop. With `pools` (each sim's pool limited), also every buffer's fragment states
/// after every operation, every copy against the other copies (`validate`), which calls fail
/// for want of room, and the evictions, bytes dropped and bytes written back of each space;
/// returns those and the model's counts of windows.
pub fn check_program(
    ops: &[Op],
    host_mapped: bool,
    pools: Option<Pools>,
) -> Result<Totals, TestCaseError> {
    let rt = runtime(host_mapped, pools);
    let pool = |space: usize| match pools {
        Some(p) if space != 0 => PoolModel::new(p.granules),
        _ => PoolModel::default(),
    };
    let mut state = State {
        rt: rt.clone(),
        bufs: Vec::new(),
        model: Model {
            host_mapped,
            pools,
            pool: std::array::from_fn(pool),
            ..Model::default()
        },
    };
    for op in ops {
        state.apply(op)?;
        if pools.is_some() {
            state.check_fragments()?;
        }
    }
    if pools.is_some() {
        for data in state.bufs.iter().flatten() {
            data.validate()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
    // Every live buffer reads back as the host-only model says.
    for (i, data) in state.bufs.iter().enumerate() {
        if let Some(data) = data {
            prop_assert_eq!(data.host().expect("host"), &state.model.bufs[i].data[..]);
            let len = state.model.bufs[i].data.len();
            let ran = state.model.access_by(i, 0, len, 0, true, false);
            prop_assert!(ran, "the host always has room");
        }
    }
    let stats = rt.stats();
    for (space, name) in SPACES.iter().enumerate() {
        let s = stats.space(*name).expect("space");
        prop_assert_eq!(
            (s.evictions, s.dropped_bytes, s.written_back_bytes),
            state.model.totals.evictions[space],
            "evictions, bytes dropped, bytes written back of {}",
            name
        );
    }
    for (from, from_name) in SPACES.iter().enumerate() {
        for (to, to_name) in SPACES.iter().enumerate() {
            let (copies, bytes) = state
                .model
                .links
                .get(&(from, to))
                .copied()
                .unwrap_or_default();
            prop_assert_eq!(
                (
                    stats.copies(from_name, to_name).unwrap(),
                    stats.bytes(from_name, to_name).unwrap()
                ),
                (copies, bytes),
                "link {} -> {}",
                from_name,
                to_name
            );
        }
    }
    let totals = state.model.totals;
    drop(state);
    for space in rt.stats().spaces {
        prop_assert_eq!(
            space.in_use,
            0,
            "pool {} is not empty after the last drop",
            space.name
        );
        prop_assert_eq!(space.allocations, space.frees);
    }
    Ok(totals)
}

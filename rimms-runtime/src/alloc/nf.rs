//! The node–fragment (NF) allocator. The design and its refusal rule are described in the
//! [module documentation](super).

use super::bitset::{first_one_in, for_each_mask, longest_run, next_one, next_zero, run_start};
use super::classes::Runs;
use super::levels::Levels;
use super::{check_range, FreeError, UnitAllocator};

/// Units per node: one 64-byte cache line of free bits.
const NODE_UNITS: usize = 512;
const NODE_WORDS: usize = NODE_UNITS / 64;

/// A node's free map, set = free. Aligned to a cache line so that a node's whole map is one
/// line and no two nodes share one (no false sharing when the runtime later touches nodes
/// from different threads, and one miss at most per node inspected).
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct NodeMap([u64; NODE_WORDS]);

/// Per-node bookkeeping, kept apart from the maps so the searches that read many headers
/// (the last resort across node boundaries) do not pull in maps they will not use.
#[derive(Clone, Copy, Debug)]
struct NodeHeader {
    /// Free units in the node.
    free: u16,
    /// Units in the node: 512, except for a pool's partial last node.
    len: u16,
    /// Bit `w` set iff word `w` of the map has a free unit. A single-unit alloc reads it
    /// instead of testing the map's words in turn: that loop's exit depends on where the
    /// last frees landed, and the branch mispredicts as often as not.
    words: u8,
    /// The node's runs in the run index may be out of date: set by single-unit allocs and
    /// frees, which change the map without refiling (see [`NfAllocator::stale`]).
    stale: bool,
}

impl NodeHeader {
    fn new(len: u16) -> Self {
        let words = (usize::from(len).div_ceil(64) as u32).min(NODE_WORDS as u32);
        Self {
            free: len,
            len,
            // A mask of the low `words` bits; at most 8 of them.
            words: ((1u32 << words) - 1) as u8,
            stale: false,
        }
    }
}

/// Free units at the start of `map`.
#[inline]
fn head_len(map: &[u64; NODE_WORDS]) -> usize {
    let mut n = 0;
    for &w in map {
        if w != u64::MAX {
            return n + w.trailing_ones() as usize;
        }
        n += 64;
    }
    n
}

/// Free units at the end of `map` (0 for a partial node, whose bits past its end are clear).
#[inline]
fn tail_len(map: &[u64; NODE_WORDS]) -> usize {
    let mut n = 0;
    for &w in map.iter().rev() {
        if w != u64::MAX {
            return n + w.leading_ones() as usize;
        }
        n += 64;
    }
    n
}

/// Which words of `map` have a free unit.
#[inline]
fn word_mask(map: &[u64; NODE_WORDS]) -> u8 {
    map.iter()
        .enumerate()
        .fold(0u8, |m, (i, &w)| m | (u8::from(w != 0) << i))
}

/// Whether unit `off` (`< NODE_UNITS`) of `map` is free.
#[inline(always)]
fn is_free(map: &[u64; NODE_WORDS], off: usize) -> bool {
    map[off / 64] >> (off % 64) & 1 != 0
}

/// The offsets `lo..hi` of `old` and `new` (node maps) outside which every maximal free run
/// is the same in both: from one before the first changed bit to one after the last, so that
/// a run that merely borders a changed bit is included. `None` if the maps are equal.
fn changed_window(old: &[u64; NODE_WORDS], new: &[u64; NODE_WORDS]) -> Option<(usize, usize)> {
    let diff = |w: usize| old[w] ^ new[w];
    let first = (0..NODE_WORDS).find(|&w| diff(w) != 0)?;
    // Some word differs, so a last one does too.
    let last = (first..NODE_WORDS).rev().find(|&w| diff(w) != 0)?;
    let a = first * 64 + diff(first).trailing_zeros() as usize;
    let b = last * 64 + 63 - diff(last).leading_zeros() as usize;
    Some((a.saturating_sub(1), (b + 2).min(NODE_UNITS)))
}

/// Calls `f(start, len)` for every maximal free run of `map` that has a unit in `lo..hi`.
fn for_each_run_in(map: &[u64; NODE_WORDS], lo: usize, hi: usize, mut f: impl FnMut(usize, usize)) {
    // The run holding `lo` starts before it.
    let mut at = if is_free(map, lo) {
        run_start(map, lo)
    } else {
        lo
    };
    loop {
        let start = next_one(map, at, hi);
        if start >= hi {
            return;
        }
        let end = next_zero(map, start, NODE_UNITS);
        f(start, end - start);
        at = end;
    }
}

/// Node–fragment allocator: 512-unit cache-line nodes, a hierarchical summary of which nodes
/// have room or are fully free, an index of the free runs inside nodes by size class, and a
/// next-fit cursor for single units. See the [module docs](super).
#[derive(Clone)]
pub struct NfAllocator {
    capacity: usize,
    free: usize,
    maps: Vec<NodeMap>,
    headers: Vec<NodeHeader>,
    /// Nodes with at least one free unit.
    room: Levels,
    /// Nodes whose every unit is free.
    whole: Levels,
    /// The free runs of `2..512` units inside nodes, by size class: exact for every node
    /// not in `stale`.
    runs: Runs,
    /// Nodes whose runs in `runs` may be out of date. Single units do not refile runs: a
    /// frame loop of single-unit allocs and frees would pay the index's upkeep on every call
    /// (it made those pairs three to six times slower) for searches that may never come.
    /// They mark the node instead, once, and the next multi-unit request refiles the runs
    /// near the bits that changed (see [`NfAllocator::refile_stale`]) before it searches.
    stale: Levels,
    /// For each stale node, its map as the run index last saw it (the rest are unused).
    filed_maps: Vec<NodeMap>,
    /// Node of the last allocation; single units come from it while it has room.
    cursor: usize,
}

impl std::fmt::Debug for NfAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NfAllocator")
            .field("capacity", &self.capacity)
            .field("free_units", &self.free)
            .field("nodes", &self.headers.len())
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl NfAllocator {
    /// Books `n` units of `node` as taken (its bits and word mask already updated).
    #[inline(always)]
    fn take(&mut self, node: usize, n: usize) {
        let h = &mut self.headers[node];
        let was_whole = h.free == h.len;
        // `n <= free <= 512`: the bits were free, so the cast and subtraction are exact.
        h.free -= n as u16;
        if h.free == 0 {
            self.sync_summary(node);
        } else if was_whole {
            // Still has room: only `whole` changes.
            self.set_whole(node, false);
        }
        self.free -= n;
    }

    /// Books `n` units of `node` as given back (its bits and word mask already updated).
    #[inline(always)]
    fn give(&mut self, node: usize, n: usize) {
        let h = &mut self.headers[node];
        let was_empty = h.free == 0;
        // At most the node's 512 units.
        h.free += n as u16;
        if was_empty {
            self.sync_summary(node);
        } else if h.free == h.len {
            // It had room and keeps it: only `whole` changes.
            self.set_whole(node, true);
        }
        self.free += n;
    }

    /// Brings `room` and `whole` in line with `node`'s free count. Needed only when the count
    /// reaches or leaves 0, which in steady state is rare: kept out of line so the
    /// single-unit paths stay small.
    #[cold]
    #[inline(never)]
    fn sync_summary(&mut self, node: usize) {
        let h = self.headers[node];
        if h.free == 0 {
            self.room.remove(node);
        } else {
            self.room.insert(node);
        }
        if h.free == h.len {
            self.whole.insert(node);
        } else {
            self.whole.remove(node);
        }
    }

    /// Puts `node` in `whole` or takes it out. Out of line like `sync_summary`: inlined, it
    /// made the common single-unit paths (which never reach it) 15 % longer.
    #[cold]
    #[inline(never)]
    fn set_whole(&mut self, node: usize, whole: bool) {
        if whole {
            self.whole.insert(node);
        } else {
            self.whole.remove(node);
        }
    }

    /// Before `lo..hi` of `node`, all free, is taken: unfiles the run around it and files
    /// what is left of it on either side. The map still shows `lo..hi` free, so the run's
    /// ends are found from it (the node's map is its boundary tags).
    #[inline(never)]
    fn refile_for_take(&mut self, node: usize, lo: usize, hi: usize) {
        let map = &self.maps[node].0;
        let (s, e) = (run_start(map, lo), next_zero(map, hi, NODE_UNITS));
        let base = node * NODE_UNITS;
        self.runs.remove(base + s, e - s);
        self.runs.insert(base + s, lo - s);
        self.runs.insert(base + hi, e - hi);
    }

    /// Before `lo..hi` of `node`, all taken, is freed: unfiles the free runs that end at `lo`
    /// and start at `hi`, and files the run they make with `lo..hi`.
    #[inline(never)]
    fn refile_for_free(&mut self, node: usize, lo: usize, hi: usize) {
        let map = &self.maps[node].0;
        let (s, e) = (run_start(map, lo), next_zero(map, hi, NODE_UNITS));
        let base = node * NODE_UNITS;
        // The run before `lo` grows in place (often within its class); the one after joins it.
        self.runs.remove(base + hi, e - hi);
        self.runs.replace(base + s, lo - s, base + s, e - s);
    }

    /// Notes that `node`'s map changed without its runs being refiled, by one unit in word
    /// `w`, which was `old_word`: keeps a copy of the map as the index knows it (the map
    /// before the change), so that the refile later touches only the runs near the bits
    /// that changed. The caller changes the map first and passes the old word, which keeps
    /// the single-unit paths as short as before (taking the copy first cost them 19
    /// instructions a pair).
    #[cold]
    #[inline(never)]
    fn mark_stale(&mut self, node: usize, w: usize, old_word: u64) {
        self.headers[node].stale = true;
        self.stale.insert(node);
        self.filed_maps[node] = self.maps[node];
        self.filed_maps[node].0[w] = old_word;
    }

    /// Files the runs of every stale node again, so that the index is exact before a search
    /// uses it. A node is stale after single-unit calls; a multi-unit request pays for those
    /// since the last one. Only the runs that touch a changed bit are refiled: a run whose
    /// bits and bounding clear bits did not change is the same run in the old map and the
    /// new, so it is neither unfiled nor searched for.
    fn refile_stale(&mut self) {
        if self.stale.is_empty() {
            return;
        }
        while let Some(node) = self.stale.next_set(0) {
            let (old, new) = (&self.filed_maps[node].0, &self.maps[node].0);
            if let Some((lo, hi)) = changed_window(old, new) {
                let base = node * NODE_UNITS;
                // Every removal before any insertion: a run that did not change is taken out
                // and put back, never the other way round.
                for_each_run_in(old, lo, hi, |s, len| self.runs.remove(base + s, len));
                let new = &self.maps[node].0;
                for_each_run_in(new, lo, hi, |s, len| self.runs.insert(base + s, len));
            }
            self.headers[node].stale = false;
            self.stale.remove(node);
        }
    }

    #[inline(always)]
    fn alloc_one(&mut self) -> Option<usize> {
        // Next fit: the cursor's node usually still has room, and its header says so without
        // a look at the summary.
        match self.headers.get(self.cursor) {
            Some(h) if h.free != 0 => self.take_one(self.cursor),
            _ => self.alloc_one_elsewhere(),
        }
    }

    /// The cursor's node is full: the summary finds the next node with room, wrapping.
    #[inline(never)]
    fn alloc_one_elsewhere(&mut self) -> Option<usize> {
        let node = match self.room.next_set(self.cursor) {
            Some(node) => node,
            None => self.room.next_set(0)?,
        };
        self.cursor = node;
        self.take_one(node)
    }

    /// Takes the lowest free unit of `node`, which has room.
    #[inline(always)]
    fn take_one(&mut self, node: usize) -> Option<usize> {
        let map = &self.maps.get(node)?.0;
        // The node has room, so its word mask is non-zero and `w < NODE_WORDS`.
        let w = self.headers.get(node)?.words.trailing_zeros() as usize;
        let word = *map.get(w)?;
        let off = w * 64 + word.trailing_zeros() as usize;
        let rest = word & (word - 1);
        self.maps[node].0[w] = rest;
        let h = &mut self.headers[node];
        h.words &= !(u8::from(rest == 0) << w);
        if !h.stale {
            self.mark_stale(node, w, word);
        }
        self.take(node, 1);
        Some(node * NODE_UNITS + off)
    }

    /// Every request but a single unit: the node rule's fast searches first, then, only where
    /// they find nothing, a run across node boundaries.
    #[inline(never)]
    fn alloc_run(&mut self, units: usize) -> Option<usize> {
        match units {
            0 => None,
            1 => self.alloc_one(),
            u if u > self.free => None,
            u if u < NODE_UNITS => {
                self.refile_stale();
                self.alloc_in_node(u).or_else(|| self.alloc_spanning(u))
            }
            u => {
                self.refile_stale();
                self.alloc_nodes(u).or_else(|| self.alloc_spanning(u))
            }
        }
    }

    /// The first run of `units` free units that crosses a node boundary, called only when no
    /// node holds `units` inside itself (so it is the first run of `units` in the pool). Such
    /// a run is the free tail of one node, any fully free nodes, then the free head of the
    /// node after, so the search reads each node's header and, for a partly used node, the
    /// first and last words of its map that are not all free: never a node's inner runs.
    /// It runs only when the node searches failed: there refusing a request that fits would
    /// make the runtime evict or fail, which costs far more.
    #[cold]
    #[inline(never)]
    fn alloc_spanning(&mut self, units: usize) -> Option<usize> {
        // Free units that run up to the start of node `node`.
        let mut run = 0;
        for (node, (h, map)) in self.headers.iter().zip(&self.maps).enumerate() {
            let (base, len) = (node * NODE_UNITS, usize::from(h.len));
            let start = if h.free == h.len {
                run += len;
                (run >= units).then(|| base + len - run)
            } else {
                let found = (run + head_len(&map.0) >= units).then(|| base - run);
                run = tail_len(&map.0);
                found
            };
            if let Some(start) = start {
                self.take_range(start, units);
                return Some(start);
            }
        }
        None
    }

    /// `2..NODE_UNITS` units from a single node, from the run index: the lowest of the
    /// lowest filed run that surely fits (`Runs::first_fit`), the lowest whole node, and the
    /// first run of the request's own class that is long enough (that class also holds
    /// shorter runs, so each is measured on its map, and only up to the best start so far).
    /// First fit by address, for the reason `Runs::first_fit` gives: taking the own class's
    /// lowest run only, when it fits, refused 7 requests of the fragmenting workload where
    /// this refuses none.
    ///
    /// Every candidate is the start of a free run whose length is known here, so the take
    /// needs no search for the run's ends.
    fn alloc_in_node(&mut self, units: usize) -> Option<usize> {
        // (first unit, length of the free run it starts) of the best candidate so far.
        let mut best = (usize::MAX, 0);
        if let Some(start) = self.runs.first_fit(units) {
            best = (start, self.run_from(start));
        }
        // Only the pool's partial last node can be shorter than `units`, and no whole node
        // comes after it.
        if let Some(node) = self.whole.next_set(0) {
            let len = usize::from(self.headers[node].len);
            if len >= units && node * NODE_UNITS < best.0 {
                best = (node * NODE_UNITS, len);
            }
        }
        if !Runs::class_fits(units) {
            // The class's runs come by address: only those below the best so far matter.
            let mut from = 0;
            while let Some(start) = self.runs.in_class_of(units, from) {
                if start >= best.0 {
                    break;
                }
                let len = self.run_from(start);
                if len >= units {
                    best = (start, len);
                    break;
                }
                from = start + 1;
            }
        }
        let (start, len) = best;
        (start != usize::MAX).then(|| self.take_run_head(start, units, len))
    }

    /// Length of the free run that starts at unit `start`, up to its node's end.
    #[inline]
    fn run_from(&self, start: usize) -> usize {
        let off = start % NODE_UNITS;
        next_zero(&self.maps[start / NODE_UNITS].0, off, NODE_UNITS) - off
    }

    /// Takes the first `units` of the free run `start..start + run_len` inside one node (a
    /// run's first unit and exact length, as the search found them): the index loses that run
    /// and gains its rest, with no search for the run's ends; the node's word mask loses only
    /// the words this take emptied. The cursor moves to the node.
    #[inline(never)]
    fn take_run_head(&mut self, start: usize, units: usize, run_len: usize) -> usize {
        let (node, off) = (start / NODE_UNITS, start % NODE_UNITS);
        self.runs
            .replace(start, run_len, start + units, run_len - units);
        let map = &mut self.maps[node].0;
        let mut emptied = 0u8;
        for_each_mask(off, units, |w, m| {
            map[w] &= !m;
            emptied |= u8::from(map[w] == 0) << w;
        });
        self.headers[node].words &= !emptied;
        self.take(node, units);
        self.cursor = node;
        start
    }

    /// `NODE_UNITS` or more units: the first run of whole free nodes long enough, from a node
    /// boundary (first fit: packing towards node 0 leaves long runs of whole nodes at the end).
    fn alloc_nodes(&mut self, units: usize) -> Option<usize> {
        let k = units.div_ceil(NODE_UNITS);
        let mut p = 0;
        while let Some(s) = self.whole.next_set(p) {
            // `s < nodes`, so `s * NODE_UNITS < capacity`; a later start fits even less.
            if self.capacity - s * NODE_UNITS < units {
                break;
            }
            let run = self.whole.run_len(s, k);
            if run >= k {
                self.take_range(s * NODE_UNITS, units);
                return Some(s * NODE_UNITS);
            }
            // Node `s + run` is not fully free, so a search from it resumes after it
            // (skipping it explicitly would save one bit test and leave a `+ 1` that no
            // test can tell from `* 1`).
            p = s + run;
        }
        None
    }

    /// Marks `start..start + units`, all free, as taken, node by node, refiling the runs it
    /// cuts; the cursor moves to the last node it touched.
    fn take_range(&mut self, start: usize, units: usize) {
        let end = start + units;
        for node in start / NODE_UNITS..=(end - 1) / NODE_UNITS {
            let base = node * NODE_UNITS;
            let (lo, hi) = (start.max(base) - base, end.min(base + NODE_UNITS) - base);
            self.refile_for_take(node, lo, hi);
            let map = &mut self.maps[node].0;
            for_each_mask(lo, hi - lo, |w, m| map[w] &= !m);
            self.headers[node].words = word_mask(map);
            self.take(node, hi - lo);
            self.cursor = node;
        }
    }

    /// Frees `start..start + units`, `units >= 2`, inside one node: the common multi-unit
    /// free. The range's bits are checked and set a word at a time with the same masks, the
    /// runs it joins are found from the map (its boundary tags) and refiled as one, and the
    /// word mask gains exactly the words touched. Anything else (a range across nodes, out
    /// of bounds, or not wholly allocated) goes to [`NfAllocator::free_range`], which also
    /// words the errors.
    #[inline(never)]
    fn free_in_node(&mut self, start: usize, units: usize) -> Result<(), FreeError> {
        let (node, lo) = (start / NODE_UNITS, start % NODE_UNITS);
        // Checked in this order so that nothing overflows and the masks stay in the map.
        let in_node =
            units <= NODE_UNITS - lo && start < self.capacity && units <= self.capacity - start;
        let map = match self.maps.get(node) {
            Some(map) if in_node => &map.0,
            _ => return self.free_range(start, units),
        };
        let mut already_free = 0;
        for_each_mask(lo, units, |w, m| already_free |= map[w] & m);
        if already_free != 0 {
            return self.free_range(start, units);
        }
        let hi = lo + units;
        // A stale node is filed again from its map before the next search.
        if !self.headers[node].stale {
            self.refile_for_free(node, lo, hi);
        }
        let map = &mut self.maps[node].0;
        for_each_mask(lo, units, |w, m| map[w] |= m);
        // Words `lo / 64 ..= (hi - 1) / 64` now have a free unit; at most bits 0..8.
        let touched = (1u32 << ((hi - 1) / 64 + 1)) - (1u32 << (lo / 64));
        self.headers[node].words |= touched as u8;
        self.give(node, units);
        Ok(())
    }

    /// Frees any range: the general (and error) path of `free`.
    #[inline(never)]
    fn free_range(&mut self, start: usize, units: usize) -> Result<(), FreeError> {
        let end = check_range(start, units, self.capacity)?;
        let first = start / NODE_UNITS;
        let last = (end - 1) / NODE_UNITS;
        // The part of `start..end` inside `node`, as offsets in the node.
        let chunk = |node: usize| {
            let base = node * NODE_UNITS;
            (start.max(base) - base, end.min(base + NODE_UNITS) - base)
        };
        // Validate every node before touching any, so a refused free changes nothing.
        for node in first..=last {
            let (lo, hi) = chunk(node);
            if let Some(off) = first_one_in(&self.maps[node].0, lo, hi - lo) {
                return Err(FreeError::NotAllocated {
                    unit: node * NODE_UNITS + off,
                });
            }
        }
        for node in first..=last {
            let (lo, hi) = chunk(node);
            // A stale node is filed again from its map before the next search.
            if !self.headers[node].stale {
                self.refile_for_free(node, lo, hi);
            }
            let map = &mut self.maps[node].0;
            for_each_mask(lo, hi - lo, |w, m| map[w] |= m);
            self.headers[node].words = word_mask(map);
            self.give(node, hi - lo);
        }
        Ok(())
    }
}

impl UnitAllocator for NfAllocator {
    fn with_capacity(capacity: usize) -> Self {
        let nodes = capacity.div_ceil(NODE_UNITS);
        let mut maps = vec![NodeMap([u64::MAX; NODE_WORDS]); nodes];
        let mut headers = vec![NodeHeader::new(NODE_UNITS as u16); nodes];
        let mut runs = Runs::new(capacity);
        let tail = capacity % NODE_UNITS;
        if tail != 0 {
            // The partial last node: bits past `capacity` stay clear (not free) forever. Its
            // whole run is shorter than a node, so the index files it.
            if let (Some(map), Some(h)) = (maps.last_mut(), headers.last_mut()) {
                map.0 = [0; NODE_WORDS];
                for_each_mask(0, tail, |w, m| map.0[w] |= m);
                *h = NodeHeader::new(tail as u16);
                runs.insert(capacity - tail, tail);
            }
        }
        Self {
            capacity,
            free: capacity,
            maps,
            headers,
            room: Levels::new(nodes, true),
            whole: Levels::new(nodes, true),
            runs,
            stale: Levels::new(nodes, false),
            filed_maps: vec![NodeMap::default(); nodes],
            cursor: 0,
        }
    }

    #[inline]
    fn alloc(&mut self, units: usize) -> Option<usize> {
        // Single units are the hot path: small enough to inline into the caller. The rest is
        // out of line so its size does not weigh on it.
        if units == 1 {
            self.alloc_one()
        } else {
            self.alloc_run(units)
        }
    }

    #[inline]
    fn free(&mut self, start: usize, units: usize) -> Result<(), FreeError> {
        if units == 1 && start < self.capacity {
            // The hot path: one bit of one word.
            let (node, off) = (start / NODE_UNITS, start % NODE_UNITS);
            if let Some(map) = self.maps.get(node) {
                let map = &map.0;
                if is_free(map, off) {
                    return Err(FreeError::NotAllocated { unit: start });
                }
                let word = map[off / 64];
                self.maps[node].0[off / 64] = word | 1u64 << (off % 64);
                let h = &mut self.headers[node];
                h.words |= 1 << (off / 64);
                if !h.stale {
                    self.mark_stale(node, off / 64, word);
                }
                self.give(node, 1);
                return Ok(());
            }
        }
        if units >= 2 {
            return self.free_in_node(start, units);
        }
        self.free_range(start, units)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn free_units(&self) -> usize {
        self.free
    }

    fn largest_free_run(&self) -> usize {
        // Node maps laid end to end are exactly the pool's bitmap (the partial last node's
        // clear tail bits come last), so runs that cross node boundaries are counted whole.
        longest_run(self.maps.iter().flat_map(|m| m.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the summaries, headers and run index against the maps.
    fn check(a: &NfAllocator) {
        let mut total = 0;
        for (i, (m, h)) in a.maps.iter().zip(&a.headers).enumerate() {
            let free: u32 = m.0.iter().map(|w| w.count_ones()).sum();
            assert_eq!(free, u32::from(h.free), "node {i}");
            assert_eq!(a.room.contains(i), h.free > 0, "node {i}");
            assert_eq!(a.whole.contains(i), h.free == h.len, "node {i}");
            assert_eq!(h.words, word_mask(&m.0), "node {i}");
            total += free as usize;
        }
        assert_eq!(total, a.free);
        assert_eq!(
            a.stale.next_set(0).is_some(),
            a.headers.iter().any(|h| h.stale)
        );
        for (node, h) in a.headers.iter().enumerate() {
            assert_eq!(a.stale.contains(node), h.stale, "node {node}");
        }
        let fresh = |&(start, _): &(usize, usize)| !a.headers[start / NODE_UNITS].stale;
        let mut filed: Vec<_> = a.runs.all().into_iter().filter(fresh).collect();
        filed.sort_unstable();
        let scanned: Vec<_> = runs_by_scan(a).into_iter().filter(fresh).collect();
        assert_eq!(filed, scanned, "the run index against a scan of the maps");
        // Once the stale nodes are filed again, the whole index is exact.
        let mut b = a.clone();
        b.refile_stale();
        let mut filed = b.runs.all();
        filed.sort_unstable();
        assert_eq!(filed, runs_by_scan(&b), "the refiled index against a scan");
    }

    /// Every free run of `2..512` units inside a node, as (first unit, class), by address:
    /// what the run index must hold, found bit by bit.
    fn runs_by_scan(a: &NfAllocator) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        for (node, m) in a.maps.iter().enumerate() {
            let free = |off: usize| m.0[off / 64] >> (off % 64) & 1 == 1;
            let mut off = 0;
            while off < NODE_UNITS {
                let len = (off..NODE_UNITS).take_while(|&u| free(u)).count();
                if (2..NODE_UNITS).contains(&len) {
                    runs.push((
                        node * NODE_UNITS + off,
                        super::super::classes::class_of(len),
                    ));
                }
                off += len.max(1);
            }
        }
        runs
    }

    #[test]
    fn node_map_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<NodeMap>(), 64);
        assert_eq!(std::mem::align_of::<NodeMap>(), 64);
        assert!(std::mem::size_of::<NodeHeader>() <= 8);
    }

    /// A free that joins runs files the joined run in the index, in its (larger) class: the
    /// next request of that size finds it in the lower node instead of passing it by.
    #[test]
    fn a_free_that_joins_runs_files_the_joined_run_for_the_next_request() {
        let mut a = NfAllocator::with_capacity(1024);
        // Node 0 as four runs: 0..4, 4..8, 8..12, 12..512; node 1 untouched.
        let runs = [4, 4, 4, 500].map(|n| a.alloc(n).expect("fits"));
        assert_eq!(runs, [0, 4, 8, 12]);
        a.free(0, 4).expect("free");
        a.free(8, 4).expect("free");
        // Node 0 has 8 free units but no run of 8, so the run goes to node 1.
        assert_eq!(a.alloc(8), Some(512));
        check(&a);
        // Freeing 4..8 joins 0..12 into one run of 12.
        a.free(4, 4).expect("free");
        check(&a);
        // The lowest run that fits: node 0's run of 12, before node 1's free units.
        assert_eq!(a.alloc(12), Some(0));
        check(&a);
    }

    #[test]
    fn debug_shows_capacity_free_units_nodes_and_cursor() {
        let mut a = NfAllocator::with_capacity(700);
        // The first fit: node 0.
        assert_eq!(a.alloc(10), Some(0));
        assert_eq!(
            format!("{a:?}"),
            "NfAllocator { capacity: 700, free_units: 690, nodes: 2, cursor: 0, .. }"
        );
    }

    #[test]
    fn capacity_not_a_multiple_of_512() {
        let mut a = NfAllocator::with_capacity(700);
        check(&a);
        assert_eq!(a.largest_free_run(), 700);
        // 600 units would need node 0 and node 1 fully free and 0 + 600 <= 700: fine.
        assert_eq!(a.alloc(701), None);
        assert_eq!(a.alloc(600), Some(0));
        check(&a);
        assert_eq!(a.free_units(), 100);
        // The tail of node 1 (units 600..700) stays usable.
        assert_eq!(a.alloc(100), Some(600));
        assert_eq!(a.alloc(1), None);
        check(&a);
        assert_eq!(a.free(0, 600), Ok(()));
        assert_eq!(a.free(600, 100), Ok(()));
        check(&a);
        // All free: first fit puts 188 units in node 0, and 189 more in its rest; then 188
        // fit only in node 1, the partial node of exactly 188 units (its run is in the class
        // of 188, which also holds shorter lengths, so it is measured), and 135 in node 0.
        assert_eq!(a.alloc(188), Some(0));
        assert_eq!(a.alloc(189), Some(188));
        assert_eq!(a.alloc(188), Some(512));
        assert_eq!(a.alloc(136), None);
        assert_eq!(a.alloc(135), Some(377));
        check(&a);
    }

    #[test]
    fn exact_fill_then_reuse() {
        for cap in [1, 511, 512, 513, 1024, 1500] {
            let mut a = NfAllocator::with_capacity(cap);
            let got: Vec<usize> = (0..cap).map_while(|_| a.alloc(1)).collect();
            assert_eq!(got.len(), cap);
            assert_eq!(a.alloc(1), None);
            assert_eq!(a.free_units(), 0);
            assert_eq!(a.largest_free_run(), 0);
            check(&a);
            for u in got {
                a.free(u, 1).unwrap();
            }
            check(&a);
            assert_eq!(a.alloc(cap), Some(0));
            assert_eq!(a.free_units(), 0);
            a.free(0, cap).unwrap();
            assert_eq!(a.largest_free_run(), cap);
        }
    }

    #[test]
    fn runs_of_513_span_two_nodes() {
        let mut a = NfAllocator::with_capacity(2048);
        assert_eq!(a.alloc(513), Some(0));
        assert_eq!(a.alloc(513), Some(1024));
        // Node 1 has 511 free units; node 3 too. Nothing fits 513 now.
        assert_eq!(a.alloc(513), None);
        assert_eq!(a.alloc(511), Some(513));
        assert_eq!(a.alloc(511), Some(1024 + 513));
        assert_eq!(a.free_units(), 2048 - 2 * 1024);
        check(&a);
        a.free(0, 513).unwrap();
        check(&a);
        assert_eq!(a.free(0, 513), Err(FreeError::NotAllocated { unit: 0 }));
        assert_eq!(a.alloc(512), Some(0));
    }

    #[test]
    fn runs_cross_words_inside_a_node() {
        let mut a = NfAllocator::with_capacity(512);
        assert_eq!(a.alloc(60), Some(0));
        assert_eq!(a.alloc(10), Some(60));
        assert_eq!(a.alloc(200), Some(70));
        check(&a);
        a.free(60, 10).unwrap();
        assert_eq!(a.free(55, 10), Err(FreeError::NotAllocated { unit: 60 }));
        // 60..70 (10 units) is too short for 11; 270..512 is next.
        assert_eq!(a.alloc(11), Some(270));
        assert_eq!(a.alloc(10), Some(60));
        check(&a);
    }

    #[test]
    fn crosses_node_boundaries_only_when_no_node_fits() {
        let mut a = NfAllocator::with_capacity(1024);
        assert_eq!(a.alloc(500), Some(0));
        assert_eq!(a.alloc(12), Some(500));
        a.free(500, 12).unwrap();
        a.alloc(300).unwrap(); // node 1, 512..812
        a.free(512, 300).unwrap();
        // Node 1 is fully free, so 100 units go inside it, not across the boundary at 500.
        assert_eq!(a.alloc(100), Some(512));
        a.free(512, 100).unwrap();
        check(&a);
        // Free: 500..1024, one run of 524 across the boundary; no node holds 513 free units
        // and node 0 is not fully free, so only the last resort finds it: the first fit.
        assert_eq!(a.largest_free_run(), 524);
        assert_eq!(a.alloc(525), None);
        assert_eq!(a.alloc(513), Some(500));
        check(&a);
        assert_eq!(a.free_units(), 1024 - 500 - 513);
        assert_eq!(a.alloc(11), Some(1013));
        assert_eq!(a.alloc(1), None);
        a.free(500, 513).unwrap();
        check(&a);
        // 12 units fit inside node 0 (500..512) and node 1 (512..1013): first fit, inside
        // node 0.
        assert_eq!(a.alloc(12), Some(500));
        check(&a);
    }

    #[test]
    fn invalid_frees_change_nothing() {
        let mut a = NfAllocator::with_capacity(1100);
        let x = a.alloc(600).unwrap();
        // The first fit: node 1's rest, right after `x`.
        let y = a.alloc(3).unwrap();
        assert_eq!((x, y), (0, 600));
        assert_eq!(
            a.free(x + 590, 20),
            Err(FreeError::NotAllocated { unit: 603 })
        );
        assert_eq!(
            a.free(1099, 2),
            Err(FreeError::OutOfRange {
                start: 1099,
                units: 2,
                capacity: 1100
            })
        );
        assert_eq!(a.free(5, 0), Err(FreeError::ZeroUnits { start: 5 }));
        assert_eq!(a.free(1099, 1), Err(FreeError::NotAllocated { unit: 1099 }));
        assert_eq!(a.free_units(), 1100 - 603);
        check(&a);
        a.free(y, 3).unwrap();
        a.free(x, 600).unwrap();
        assert_eq!(a.free_units(), 1100);
        check(&a);
    }

    /// Frees of one unit at and just past the pool's end, for pools whose last node is whole
    /// and pools whose last node is partial (there the node's map has bits past the end, which
    /// must never become free). Expected results follow from the bounds alone.
    #[test]
    fn boundary_frees_at_the_pool_end() {
        for cap in [1, 200, 511, 512, 513, 700, 1024, 1100, 1536] {
            let out_of_range = |start, units| {
                Err(FreeError::OutOfRange {
                    start,
                    units,
                    capacity: cap,
                })
            };
            let mut a = NfAllocator::with_capacity(cap);
            // All free: the last unit is not allocated, the ones past the end do not exist.
            assert_eq!(
                a.free(cap - 1, 1),
                Err(FreeError::NotAllocated { unit: cap - 1 }),
                "cap {cap}"
            );
            assert_eq!(a.free(cap, 1), out_of_range(cap, 1), "cap {cap}");
            assert_eq!(a.free(cap + 1, 1), out_of_range(cap + 1, 1), "cap {cap}");
            assert_eq!(a.free(cap - 1, 2), out_of_range(cap - 1, 2), "cap {cap}");
            assert_eq!(a.free(cap, 2), out_of_range(cap, 2), "cap {cap}");
            assert_eq!(a.free_units(), cap, "cap {cap}");
            check(&a);

            // Full: the last unit frees, the ones past it still do not exist, and no refused
            // free left a unit behind that a later alloc could hand out.
            assert_eq!(a.alloc(cap), Some(0), "cap {cap}");
            assert_eq!(a.free(cap, 1), out_of_range(cap, 1), "cap {cap}");
            assert_eq!(a.free(cap + 1, 1), out_of_range(cap + 1, 1), "cap {cap}");
            // Multi-unit frees take their own path: past the end, and straddling it.
            assert_eq!(a.free(cap + 1, 2), out_of_range(cap + 1, 2), "cap {cap}");
            assert_eq!(a.free(cap - 1, 2), out_of_range(cap - 1, 2), "cap {cap}");
            assert_eq!(
                a.alloc(1),
                None,
                "cap {cap}: a unit past the end was handed out"
            );
            assert_eq!(a.free_units(), 0, "cap {cap}");
            assert_eq!(a.free(cap - 1, 1), Ok(()), "cap {cap}");
            assert_eq!(a.free_units(), 1, "cap {cap}");
            assert_eq!(a.alloc(1), Some(cap - 1), "cap {cap}");
            assert_eq!(a.alloc(1), None, "cap {cap}");
            check(&a);
            assert_eq!(a.free(0, cap), Ok(()), "cap {cap}");
            assert_eq!(a.largest_free_run(), cap, "cap {cap}");
            check(&a);
        }
    }

    /// Nodes 2..5 and 6..10 are fully free, node 5 is not: four nodes fit only from node 6, which the search reaches by resuming right after node 5 (a
    /// search that skips further, or restarts inside the run it just measured, misses it).
    #[test]
    fn whole_node_runs_past_a_shorter_run() {
        let mut a = NfAllocator::with_capacity(10 * NODE_UNITS);
        for node in 0..10 {
            assert_eq!(a.alloc(NODE_UNITS), Some(node * NODE_UNITS));
        }
        for node in [2, 3, 4, 6, 7, 8, 9] {
            a.free(node * NODE_UNITS, NODE_UNITS).unwrap();
        }
        check(&a);
        assert_eq!(a.alloc(4 * NODE_UNITS), Some(6 * NODE_UNITS));
        // Three nodes now fit only at 2..5.
        assert_eq!(a.alloc(3 * NODE_UNITS + 1), None);
        assert_eq!(a.alloc(3 * NODE_UNITS), Some(2 * NODE_UNITS));
        check(&a);
    }

    /// Every layout of fully free and partly taken nodes in pools of up to 10 nodes (the
    /// smallest where a search can skip a fitting run), every cursor position and every
    /// multi-node request size: the allocation lies in a run of whole nodes when the node
    /// rule says one fits, at the first free run of its size when only that fits, and is
    /// refused only when no run fits at all. The rules are evaluated here on the layout as
    /// built (unit by unit), not with the allocator's summaries.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "hundreds of thousands of allocations; the directed tests cover it"
    )]
    fn multi_node_requests_in_every_fragmented_layout() {
        for nodes in 1..=10usize {
            // A whole last node, and a partial one of 424 units.
            for cap in [nodes * NODE_UNITS, nodes * NODE_UNITS - 88] {
                let len = |node: usize| (cap - node * NODE_UNITS).min(NODE_UNITS);
                for cursor in 0..nodes {
                    let base = cursor_at(cap, cursor);
                    for mask in 0u32..1 << nodes {
                        let whole = |node: usize| mask & (1 << node) != 0;
                        let mut a = base.clone();
                        for node in 0..nodes {
                            // A node not in the mask keeps its last unit taken.
                            let n = if whole(node) {
                                len(node)
                            } else {
                                len(node) - 1
                            };
                            if n > 0 {
                                a.free(node * NODE_UNITS, n).unwrap();
                            }
                        }
                        // The free runs, as (start, length): a node not in the mask ends
                        // one after its free prefix; whole nodes carry it on.
                        let mut runs = Vec::new();
                        let mut run_start = 0;
                        for node in (0..nodes).filter(|&node| !whole(node)) {
                            let taken = node * NODE_UNITS + len(node) - 1;
                            runs.push((run_start, taken - run_start));
                            run_start = taken + 1;
                        }
                        runs.push((run_start, cap - run_start));
                        for units in (NODE_UNITS..=cap).step_by(NODE_UNITS / 2) {
                            let k = units.div_ceil(NODE_UNITS);
                            let fits_at =
                                |s: usize| s * NODE_UNITS + units <= cap && (s..s + k).all(whole);
                            let fits = (0..nodes).any(fits_at);
                            // The last resort's answer: the first run of `units` free units.
                            let first_fit =
                                runs.iter().find(|&&(_, n)| n >= units).map(|&(s, _)| s);
                            let mut b = a.clone();
                            let got = b.alloc(units);
                            let what = format!(
                                "cap {cap} mask {mask:b} cursor {cursor}: alloc({units}) = {got:?}"
                            );
                            match got {
                                Some(start) if fits => assert!(
                                    start % NODE_UNITS == 0 && fits_at(start / NODE_UNITS),
                                    "{what}"
                                ),
                                Some(start) => assert_eq!(Some(start), first_fit, "{what}"),
                                None => assert!(!fits && first_fit.is_none(), "{what}"),
                            }
                        }
                    }
                }
            }
        }
    }

    /// A full pool of `cap` units, taken node by node, whose cursor is on node `cursor`.
    fn cursor_at(cap: usize, cursor: usize) -> NfAllocator {
        let mut a = NfAllocator::with_capacity(cap);
        let nodes = cap.div_ceil(NODE_UNITS);
        for node in 0..nodes {
            let len = (cap - node * NODE_UNITS).min(NODE_UNITS);
            assert_eq!(a.alloc(len), Some(node * NODE_UNITS));
        }
        // Freeing and taking node `cursor` again leaves the cursor there.
        let len = (cap - cursor * NODE_UNITS).min(NODE_UNITS);
        a.free(cursor * NODE_UNITS, len).unwrap();
        assert_eq!(a.alloc(len), Some(cursor * NODE_UNITS));
        assert_eq!(a.cursor, cursor);
        a
    }

    /// Past 512 nodes a node index and a unit index overlap in range, so single-unit frees
    /// that confused them would land in the wrong node instead of failing a bounds check.
    #[test]
    #[cfg_attr(miri, ignore = "a pool of 600 nodes is slow under Miri")]
    fn single_unit_frees_in_a_pool_of_more_than_512_nodes() {
        let cap = 600 * NODE_UNITS;
        let mut a = NfAllocator::with_capacity(cap);
        let units: Vec<usize> = (0..3).map(|_| a.alloc(1).unwrap()).collect();
        assert_eq!(units, [0, 1, 2]);
        assert_eq!(a.free(1, 1), Ok(()));
        assert_eq!(a.free(1, 1), Err(FreeError::NotAllocated { unit: 1 }));
        assert_eq!(a.free_units(), cap - 2);
        check(&a);
        // The freed unit is the one handed out next, from node 0.
        assert_eq!(a.alloc(1), Some(1));
        assert_eq!(a.free(2, 1), Ok(()));
        assert_eq!(a.free(0, 1), Ok(()));
        assert_eq!(a.free(1, 1), Ok(()));
        assert_eq!(a.free_units(), cap);
        check(&a);
    }

    #[test]
    fn empty_pool() {
        let mut a = NfAllocator::with_capacity(0);
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.alloc(2), None);
        assert_eq!(a.alloc(600), None);
        assert_eq!(a.largest_free_run(), 0);
        assert!(a.free(0, 1).is_err());
    }

    /// The run index under random programs of allocs and frees against a plain model (one
    /// bool per unit): every grant lies in the pool, is free in the model and is disjoint from
    /// every live grant; every refusal is one the model agrees no run fits; and after each
    /// step `check` compares the index with a scan of the maps (fresh nodes at once, stale
    /// ones after refiling). Single units are drawn often, since they mark nodes stale, and
    /// so are sizes that fill, cut and merge runs inside nodes.
    mod run_index {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Step {
            Alloc(usize),
            /// Free the live grant at this index, modulo the number live.
            Free(usize),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                3 => Just(Step::Alloc(1)),
                3 => (2..=40usize).prop_map(Step::Alloc),
                2 => (2..NODE_UNITS).prop_map(Step::Alloc),
                1 => (NODE_UNITS..=3 * NODE_UNITS).prop_map(Step::Alloc),
                6 => any::<usize>().prop_map(Step::Free),
            ]
        }

        fn cases() -> u32 {
            std::env::var("RIMMS_PROPTEST_CASES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(if cfg!(miri) { 4 } else { 400 })
        }

        fn config() -> ProptestConfig {
            let mut config = ProptestConfig::with_cases(cases());
            if cfg!(miri) {
                // Miri's isolation has no files to keep failing cases in.
                config.failure_persistence = None;
            }
            config
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn grants_are_disjoint_in_bounds_and_the_index_matches_a_scan(
                cap in prop_oneof![1..=3000usize, (1..=6usize).prop_map(|k| k * NODE_UNITS)],
                steps in prop::collection::vec(step(), 1..120),
            ) {
                let mut a = NfAllocator::with_capacity(cap);
                let mut free = vec![true; cap];
                let mut live: Vec<(usize, usize)> = Vec::new();
                for step in steps {
                    match step {
                        Step::Alloc(n) => match a.alloc(n) {
                            Some(start) => {
                                prop_assert!(start + n <= cap, "{start}+{n} past {cap}");
                                prop_assert!(
                                    free[start..start + n].iter().all(|&f| f),
                                    "{start}+{n} overlaps a live grant"
                                );
                                free[start..start + n].fill(false);
                                live.push((start, n));
                            }
                            None => {
                                let fits = free
                                    .split(|&f| !f)
                                    .any(|run| run.len() >= n);
                                prop_assert!(!fits, "refused {n} units that fit");
                            }
                        },
                        Step::Free(i) if !live.is_empty() => {
                            let (start, n) = live.swap_remove(i % live.len());
                            prop_assert_eq!(a.free(start, n), Ok(()));
                            free[start..start + n].fill(true);
                        }
                        Step::Free(_) => {}
                    }
                    prop_assert_eq!(a.free_units(), free.iter().filter(|&&f| f).count());
                    check(&a);
                }
            }
        }
    }
}

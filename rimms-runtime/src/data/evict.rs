//! Eviction: making room in a full device pool by dropping (or writing back, then dropping)
//! the least recently used blocks of other buffers.
//!
//! A device's memory is smaller than the host's, and on the boards RIMMS targets a frame does
//! not fit in it at once; StarPU reclaims memory from its LRU lists and so does this. Each
//! evictable space (every space but the host) keeps a registry of the buffers that hold a
//! block there ((`space::Residents`)); each buffer stamps, per space, the runtime's logical clock
//! when a call uses it there (`RawBuffer::touch`: a relaxed load and a relaxed store on the
//! fast path; a slow-path acquire advances the clock). When an allocation does not fit,
//! [`alloc`] evicts in stamp order, oldest first (ties: the older buffer first), until it
//! does. What one eviction does is the coherence module's plan (`plan_evict`): fragments whose
//! only valid copy is in the block are written back (to the cheapest space with room, by the
//! same link costs the copy planner uses), the rest dropped for free; the plan is committed
//! only after every write-back copy succeeded, so a failed one loses nothing.
//!
//! # What is never evicted
//!
//! A buffer on which anyone holds a lease (a kernel call, a host writer whose write is not
//! recorded yet, a prefetch; `data::lease`, where the handshake that makes this hold for a
//! caller that never locks is argued) or whose host views may point into the space is passed
//! over. Evictors only `try_lock` other buffers, so two acquires that each hold their own
//! buffer's lock and evict from each other's never deadlock; a busy buffer is skipped like a
//! leased one.

use super::{BufferMemorySystem, RawBuffer};
use crate::hal::SpaceId;
use crate::hal::{Error, Result};
use crate::space::Block;
use std::sync::Arc;

/// Why a block was evicted, for the trace: the allocation that did not fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pressure {
    /// Bytes the allocation asked for.
    pub needed: usize,
}

/// A block of `bytes` in `space` for buffer `requester`, evicting other buffers' least
/// recently used blocks there when the pool is full. The host is never evicted: it is where
/// write-backs go. Fails, saying how much was needed and how much could have been freed, when
/// even evicting every block not in use would not make room.
pub(crate) fn alloc(
    memory: &BufferMemorySystem,
    space: SpaceId,
    bytes: usize,
    requester: u64,
) -> Result<Block> {
    let pool = memory.pool(space);
    let full = match pool.alloc(bytes) {
        Ok(block) => return Ok(block),
        Err(e) if space == SpaceId::HOST => return Err(e),
        Err(e) => e,
    };
    let Error::PoolExhausted {
        requested,
        free,
        largest_free,
        ..
    } = full
    else {
        return Err(full);
    };
    // Least recently used in `space` first.
    let candidates: Vec<Arc<RawBuffer>> = memory
        .residents(space)
        .by_stamp(|b| b.stamp(space))
        .into_iter()
        .filter(|b| b.id() != requester && !b.pinned_in(space))
        .collect();
    let evictable: usize = candidates.iter().map(|b| b.held_in(space)).sum();
    if free + evictable < requested {
        return Err(does_not_fit_with(
            memory,
            space,
            requested,
            (free, largest_free),
            evictable,
        ));
    }
    let why = Pressure { needed: requested };
    for buffer in candidates {
        if buffer.evict(space, why)?.is_some() {
            if let Ok(block) = pool.alloc(bytes) {
                return Ok(block);
            }
        }
    }
    // Only refusals remain: what is free now, as the pool itself says it.
    match pool.alloc(bytes) {
        Ok(block) => Ok(block),
        Err(Error::PoolExhausted {
            free, largest_free, ..
        }) => Err(does_not_fit_with(
            memory,
            space,
            requested,
            (free, largest_free),
            0,
        )),
        Err(other) => Err(other),
    }
}

/// The error for `needed` bytes that do not fit in `space` now; `evictable`: what evicting
/// could free on top of what is free.
pub(crate) fn does_not_fit(
    memory: &BufferMemorySystem,
    space: SpaceId,
    needed: usize,
    evictable: usize,
) -> Error {
    let free = memory.pool(space).free_bytes();
    does_not_fit_with(memory, space, needed, free, evictable)
}

/// `free`: the bytes free and the longest free run.
fn does_not_fit_with(
    memory: &BufferMemorySystem,
    space: SpaceId,
    needed: usize,
    free: (usize, usize),
    evictable: usize,
) -> Error {
    Error::DoesNotFit {
        space: memory.named(space),
        needed,
        free: free.0,
        largest_free: free.1,
        evictable,
        in_use: memory.pool(space).usage().in_use.saturating_sub(evictable),
    }
}

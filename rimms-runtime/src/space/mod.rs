//! Memory spaces: where bytes live, how they get from one space to another, and the pool each
//! space carves buffers from; `system.rs` puts a runtime's spaces together as its memory system
//! (the space table, the copy and fill engine, their counters and trace).
//!
//! A space is identified by a small integer so that the set of spaces holding a fragment fits in
//! one machine word ([`SpaceSet`]); this is what keeps the coherence fast path to a load, an AND
//! and a branch. The host is always space 0.

mod device_memory;
mod id;
mod link;
mod pool;
mod region;
mod system;

pub use device_memory::DeviceMemory;
pub(crate) use device_memory::SharedDeviceMemory;
pub use id::{SpaceId, SpaceName};
pub use link::LinkModel;
pub(crate) use link::{Occupancy, Pending};
pub(crate) use pool::{Block, Pool};
pub use region::MappedMemory;
pub(crate) use region::Region;
pub(crate) use system::{MemorySystem, SpaceEntry};

use std::fmt;

/// The most memory spaces one runtime can have. Two per-space masks and a flag fit in one
/// `u64` buffer summary, see `coherence`.
pub const MAX_SPACES: usize = 16;

/// A set of memory spaces, one bit each.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SpaceSet(pub(crate) u16);

impl SpaceSet {
    /// No space.
    pub const EMPTY: SpaceSet = SpaceSet(0);

    /// The set holding only `space`.
    pub fn only(space: SpaceId) -> SpaceSet {
        SpaceSet(space.bit())
    }

    /// Whether `space` is in the set.
    pub fn contains(self, space: SpaceId) -> bool {
        self.0 & space.bit() != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of spaces in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The set with `space` added.
    #[must_use]
    pub fn with(self, space: SpaceId) -> SpaceSet {
        SpaceSet(self.0 | space.bit())
    }

    /// The spaces in the set, lowest id first.
    pub fn iter(self) -> impl Iterator<Item = SpaceId> {
        (0..MAX_SPACES as u8)
            .map(SpaceId)
            .filter(move |s| self.contains(*s))
    }
}

impl fmt::Debug for SpaceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(|s| s.0)).finish()
    }
}

//! Memory spaces: where bytes live, how they get from one space to another, and the pool each
//! space carves buffers from; `system.rs` puts a runtime's spaces together as its memory system
//! (the space table, the copy and fill engine, their counters and trace).
//!
//! A space is identified by a small integer so that the set of spaces holding a fragment fits in
//! one machine word ([`SpaceSet`]); this is what keeps the coherence fast path to a load, an AND
//! and a branch. The host is always space 0.

mod link;
mod pool;
mod region;
mod system;

pub(crate) use crate::hal::DeviceMemoryRef;
pub use crate::hal::{DeviceMemory, MappedMemory, SpaceId, SpaceName, SpaceSet, MAX_SPACES};
pub use link::LinkModel;
pub(crate) use link::{Occupancy, Pending};
pub(crate) use pool::{Block, Pool};
pub(crate) use region::Region;
pub(crate) use system::{MemorySystem, SpaceEntry};

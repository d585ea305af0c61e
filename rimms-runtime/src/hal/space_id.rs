//! How a memory space is named: by its position in the runtime's space table ([`SpaceId`]),
//! and, where a person will read it, by that position together with its name
//! ([`SpaceName`]).
//!
//! Part of the vocabulary (`hal`), a leaf: errors name spaces with these types, and every
//! layer that fails may build an error, so nothing here may import the rest of the crate.

use std::fmt;
use std::sync::Arc;

/// One memory space of a runtime: host RAM, a simulated device's memory, a GPU's memory, a
/// u-dma-buf region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpaceId(pub(crate) u8);

impl SpaceId {
    /// Host RAM: the space that host views (`host()`, `host_mut()`) read and write.
    pub const HOST: SpaceId = SpaceId(0);

    /// Position of this space in the runtime's space table.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    pub(crate) fn bit(self) -> u16 {
        1 << self.0
    }
}

/// A memory space as errors report it: which space of the runtime it is, and the name the
/// runtime gave it (`host`, `sim0`, `gpu0`, `udmabuf0`), so that a message can say where
/// without the runtime at hand and a program can match on the id.
///
/// Cloning shares the name; it allocates nothing. It compares equal to a `&str` that is its
/// name, for code that names spaces the way `rt.stats()` does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpaceName {
    id: SpaceId,
    name: Arc<str>,
}

impl SpaceName {
    pub(crate) fn new(id: SpaceId, name: &str) -> SpaceName {
        SpaceName {
            id,
            name: Arc::from(name),
        }
    }

    /// Which space of its runtime this is.
    pub fn id(&self) -> SpaceId {
        self.id
    }

    /// Its name, as stats and traces print it.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for SpaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl PartialEq<str> for SpaceName {
    fn eq(&self, other: &str) -> bool {
        *self.name == *other
    }
}

impl PartialEq<&str> for SpaceName {
    fn eq(&self, other: &&str) -> bool {
        *self.name == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_space_name_prints_and_compares_as_its_name_and_keeps_its_id() {
        let sim = SpaceName::new(SpaceId(2), "sim1");
        assert_eq!(sim.to_string(), "sim1");
        assert_eq!(sim, "sim1");
        assert!(sim != "sim0");
        assert_eq!(sim.id().index(), 2);
        assert_ne!(sim, SpaceName::new(SpaceId(1), "sim1"));
    }
}

//! Sets of memory spaces, one bit each, so that the spaces holding a fragment fit in one
//! machine word: the coherence fast path is a load, an AND and a branch on one.

use super::space_id::SpaceId;
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
        // One step per member (a set is usually one to three of sixteen spaces), not one per
        // possible space.
        let mut rest = self.0;
        std::iter::from_fn(move || {
            let low = rest.trailing_zeros();
            rest &= rest.wrapping_sub(1);
            // At most 16 (an empty set), so it fits.
            (low < u16::BITS).then_some(SpaceId(low as u8))
        })
    }
}

impl fmt::Debug for SpaceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(|s| s.0)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every one of the 65,536 sets lists exactly its members, lowest first: the same as
    /// asking each possible space in turn.
    #[test]
    fn a_set_iterates_exactly_its_members_in_order() {
        for bits in 0..=u16::MAX {
            let set = SpaceSet(bits);
            let listed: Vec<u8> = set.iter().map(|s| s.0).collect();
            let asked: Vec<u8> = (0..MAX_SPACES as u8)
                .filter(|&i| bits & (1 << i) != 0)
                .collect();
            assert_eq!(listed, asked, "set {bits:#018b}");
            assert_eq!(listed.len(), set.len());
        }
    }
}

//! Fragment checksums: catching ghost writes (`RuntimeBuilder::checksums`,
//! `RIMMS_CHECK=checksums`).
//!
//! A ghost write is a write behind the runtime's API: a device writing past its output, legacy
//! code or another process writing a shared mapping (a u-dma-buf). The fragment table still
//! says the copy there is valid, so the bytes would be used. Comparing copies (`validate`)
//! cannot see it where a fragment has only one valid copy; a checksum can.
//!
//! With checksums on, each buffer keeps beside its fragment table (under the same lock; the
//! state machine stays in `coherence`) one entry per fragment: the xxh3 hash of its bytes as
//! last written, and who wrote them. The entry is
//!
//! - **recorded** when a write is marked: a kernel call's outputs after it succeeded, a host
//!   loop's after it finished; a host view's write is marked when the view is made, before
//!   the bytes are written, so its fragments are marked *pending* and hashed where the host
//!   wrote them at the next step that reads them (the view's borrow has ended by then: the
//!   buffer is borrowed again);
//! - **checked** when the fragment is next read, in the space it is read in or copied from
//!   (an acquire for a read, a host view for reading, a read-write call), and in every valid
//!   space at `validate()`. A mismatch is `Error::GhostWrite`; nothing is committed.
//! - **forgotten** where no hash can stand for the bytes: zero-marked fragments (fresh or
//!   reset, which cost nothing until written), a write that failed part-way, a change of the
//!   fragment size.
//!
//! The lock-free fast path reads only the summary word, which cannot check bytes; a
//! checksummed buffer therefore publishes a withdrawn summary ([`Inner`]'s `WithTable`), so
//! every access takes the locked path and its checks. With checksums off the fast path is
//! untouched: the check is the `Option` of the entries, read only under the lock.

use super::buffer::{Inner, RawBuffer};
use crate::coherence::{Access, AcquirePlan, FragmentSpan};
use crate::hal::{Device, Error, Result, SpaceId, SpaceSet};
use std::fmt;
use std::ops::Range;

/// Who last wrote a fragment, as a ghost-write error names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// Host code: a host view, a host loop, a reset of part of a fragment.
    Host,
    /// A kernel call of `api` on `device`.
    Call { api: &'static str, device: Device },
}

impl fmt::Display for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Writer::Host => f.write_str("host"),
            Writer::Call { api, device } => write!(f, "{api} on {device}"),
        }
    }
}

/// How a write is marked ([`RawBuffer::mark_written`]): finished, by whom, or still under way
/// in a host view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WrittenBy {
    /// The write is done: the bytes can be hashed now.
    Done(Writer),
    /// A host view was handed out and writes after the mark: hash at the next read.
    HostView,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sum {
    /// No hash stands for the bytes: zero-marked, never written, or forgotten.
    None,
    /// Written by a host view whose end the runtime has not seen.
    Pending,
    /// The xxh3 hash of the bytes as last written.
    Known(u64),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    sum: Sum,
    writer: Writer,
}

const NONE: Entry = Entry {
    sum: Sum::None,
    writer: Writer::Host,
};

/// One entry per fragment of a buffer, beside its fragment table.
#[derive(Clone, Debug)]
pub(crate) struct Checksums {
    entries: Vec<Entry>,
}

impl Checksums {
    pub(crate) fn new(count: usize) -> Checksums {
        Checksums {
            entries: vec![NONE; count],
        }
    }

    /// [`Self::new`], or `None` where `count` entries cannot be allocated (see
    /// `FragmentTable::try_new`).
    pub(crate) fn try_new(count: usize) -> Option<Checksums> {
        Some(Checksums {
            entries: crate::coherence::filled(count, NONE)?,
        })
    }

    /// The fragments no longer have a hash that stands for their bytes.
    pub(crate) fn forget(&mut self, frags: Range<usize>) {
        for e in &mut self.entries[frags] {
            *e = NONE;
        }
    }
}

/// The checksum of one fragment's bytes.
fn hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// A run of neighbouring fragments whose bytes in one space do not match.
struct Mismatch {
    frags: Range<usize>,
    space: SpaceId,
    writer: Writer,
}

impl RawBuffer {
    /// Records checksums for a write by `space` over `frags` that `mark_written` just put in
    /// the table (called under the lock, only for a checksummed buffer).
    pub(super) fn record_sums(
        &self,
        inner: &mut Inner,
        frags: Range<usize>,
        space: SpaceId,
        by: WrittenBy,
    ) {
        let writer = match by {
            WrittenBy::Done(writer) => writer,
            WrittenBy::HostView => Writer::Host,
        };
        for frag in frags {
            let sum = match by {
                WrittenBy::HostView => Sum::Pending,
                // A fragment whose bytes cannot be read back gets no hash rather than a wrong one.
                WrittenBy::Done(_) => self
                    .frag_hash(inner, frag, space)
                    .map_or(Sum::None, Sum::Known),
            };
            if let Some(sums) = inner.sums.as_mut() {
                sums.entries[frag] = Entry { sum, writer };
            }
        }
    }

    /// The hash of fragment `frag`'s bytes in `space`, if the buffer has a block there.
    fn frag_hash(&self, inner: &Inner, frag: usize, space: SpaceId) -> Option<u64> {
        // Where a secure buffer is ciphertext its tag, not a hash, stands for its bytes.
        if self.sealed_spaces().contains(space) {
            return None;
        }
        let window = inner.blocks[space.index()]?;
        let range = self.frag_range(frag);
        if !window.covers(&range) {
            return None;
        }
        self.read_back(space, window, range)
            .ok()
            .map(|bytes| hash(&bytes))
    }

    /// Hashes a fragment a host view wrote, where it is valid (its owner first): the view has
    /// ended, since whoever asks holds the buffer again.
    fn settle(&self, inner: &mut Inner, frag: usize) {
        let Some(state) = inner.table.get(frag) else {
            return;
        };
        let owner = state.owner.filter(|o| state.valid.contains(*o));
        let spaces = owner.into_iter().chain(state.valid.iter());
        let sum = spaces
            .filter_map(|s| self.frag_hash(inner, frag, s))
            .next()
            .map_or(Sum::None, Sum::Known);
        if let Some(sums) = inner.sums.as_mut() {
            sums.entries[frag].sum = sum;
        }
    }

    /// Checks the fragments an `access` over `span` in `plan.dst` reads, after the plan's
    /// copies and fills ran and before it is committed: each in `dst`, where it was valid
    /// already or has just been copied to (then a mismatch is the source's). Only for a
    /// checksummed buffer; a pending fragment is hashed first.
    pub(super) fn check_read(
        &self,
        inner: &mut Inner,
        span: &FragmentSpan,
        plan: &AcquirePlan,
        access: Access,
    ) -> Result<()> {
        // Ciphertext of a secure buffer (a prefetch or write-back into an untrusted space):
        // its tags are checked when it is opened.
        if self.sealed_spaces().contains(plan.dst) {
            return Ok(());
        }
        let mut bad: Option<Mismatch> = None;
        for frag in span.frags.clone() {
            let partial = (frag == span.frags.start && span.first_partial)
                || (frag + 1 == span.frags.end && span.last_partial);
            if access == Access::Write && !partial {
                continue;
            }
            let Some(entry) = inner.sums.as_ref().map(|s| s.entries[frag]) else {
                return Ok(());
            };
            let expected = match entry.sum {
                Sum::None => continue,
                Sum::Pending => {
                    self.settle(inner, frag);
                    continue;
                }
                Sum::Known(h) => h,
            };
            let moved = plan.moves.iter().find(|m| m.frags.contains(&frag));
            if moved.is_none()
                && !inner
                    .table
                    .get(frag)
                    .is_some_and(|s| s.valid.contains(plan.dst))
            {
                continue;
            }
            if self.frag_hash(inner, frag, plan.dst) == Some(expected) {
                continue;
            }
            let space = moved.map_or(plan.dst, |m| m.src);
            match bad.as_mut() {
                Some(run) if run.frags.end == frag && run.space == space => run.frags.end += 1,
                Some(_) => break,
                None => {
                    bad = Some(Mismatch {
                        frags: frag..frag + 1,
                        space,
                        writer: entry.writer,
                    })
                }
            }
        }
        bad.map_or(Ok(()), |m| Err(self.ghost(m)))
    }

    /// Hashes every fragment host views wrote, where the caller knows no view of the buffer
    /// is alive (`HeteData::from_slice`, once its copy is in). Takes the lock only for a
    /// checksummed buffer.
    pub(crate) fn settle_host_writes(&self) {
        if !self.memory().checksums() {
            return;
        }
        let mut inner = self.lock();
        for frag in 0..inner.table.len() {
            let pending = inner
                .sums
                .as_ref()
                .is_some_and(|s| s.entries[frag].sum == Sum::Pending);
            if pending {
                self.settle(&mut inner, frag);
            }
        }
    }

    /// At `validate()`: every fragment with a hash, checked in every space that holds it.
    pub(super) fn check_all(&self, inner: &mut Inner) -> Result<()> {
        let count = inner.table.len();
        for frag in 0..count {
            let Some(entry) = inner.sums.as_ref().map(|s| s.entries[frag]) else {
                return Ok(());
            };
            let expected = match entry.sum {
                Sum::None => continue,
                Sum::Pending => {
                    self.settle(inner, frag);
                    continue;
                }
                Sum::Known(h) => h,
            };
            let valid = inner.table.get(frag).map_or(SpaceSet::EMPTY, |s| s.valid);
            for space in valid.iter() {
                match self.frag_hash(inner, frag, space) {
                    Some(h) if h != expected => {
                        return Err(self.ghost(Mismatch {
                            frags: frag..frag + 1,
                            space,
                            writer: entry.writer,
                        }))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn ghost(&self, m: Mismatch) -> Error {
        let start = self.frag_range(m.frags.start).start;
        let end = self.frag_range(m.frags.end - 1).end;
        Error::GhostWrite {
            buffer: self.id(),
            fragments: m.frags,
            start,
            end,
            space: self.memory().named(m.space),
            writer: m.writer.to_string(),
        }
    }

    /// The space an access by a device whose space is `own` (and which reaches `reach`) uses:
    /// where the access is resident, judged from the table rather than the published summary
    /// (which a checksummed buffer withdraws), else [`RawBuffer::target`]. What the fast path's
    /// `resident` / `resident_in` decide when checksums are off. Never inlined: its callers
    /// (a call's slow path, the data-aware scheduler's estimate) sit beside the fast path,
    /// which must not grow.
    #[inline(never)]
    pub(crate) fn target_for(&self, own: SpaceId, reach: SpaceSet, access: Access) -> SpaceId {
        if self.memory().checksums() {
            let summary = self.lock_summary();
            let found = std::iter::once(own)
                .chain(reach.iter())
                .find(|&s| crate::coherence::resident(summary, s, access));
            if let Some(space) = found {
                return space;
            }
        }
        self.target(own, reach)
    }

    /// Whether an access by `space` is resident by the table itself, also for a checksummed
    /// buffer (whose published summary is withdrawn).
    pub(crate) fn resident_exact(&self, space: SpaceId, access: Access) -> bool {
        if self.memory().checksums() {
            crate::coherence::resident(self.lock_summary(), space, access)
        } else {
            self.resident(space, access)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::data::HeteData;
    use crate::hal::{Error, SpaceId};
    use crate::Runtime;

    /// A host view's write is hashed at the next step that reads it (here `validate`); a byte
    /// changed after that is a ghost write with checksums on, and read as it is with them off.
    /// Under Miri in CI (`data::`).
    #[test]
    fn a_byte_changed_after_a_host_write_is_a_ghost_write_only_with_checksums_on() {
        for on in [true, false] {
            let rt = Runtime::builder()
                .host_pool(1 << 20)
                .checksums(on)
                .build()
                .expect("runtime");
            let mut x = HeteData::<u32>::alloc(&rt, 2048).expect("x");
            x.host_mut().expect("host").fill(5);
            x.validate().expect("the view's write, hashed now");
            // SAFETY: the host block holds the whole 8 KiB buffer, and no view of it is alive.
            unsafe { *x.raw.ptr_in(SpaceId::HOST, 4096 + 3) ^= 0xff };
            let second = x.slice(1024..).expect("fragment 1");
            match second.host() {
                Err(Error::GhostWrite {
                    fragments,
                    start,
                    end,
                    space,
                    writer,
                    ..
                }) => {
                    assert!(on, "a ghost write reported with checksums off");
                    assert_eq!((fragments, start, end), (1..2, 4096, 8192));
                    assert_eq!((space.as_str(), writer.as_str()), ("host", "host"));
                }
                Ok(read) => {
                    assert!(!on, "the ghost write went unseen with checksums on");
                    assert_ne!(read[0], 5, "the changed bytes, used silently");
                }
                Err(e) => panic!("{e}"),
            }
            // The fragment next to it is intact and reads.
            assert_eq!(
                x.slice(..1024).expect("fragment 0").host().expect("read")[0],
                5
            );
            // A reset fragment needs no checksum: it reads as zeros again.
            x.reset();
            assert!(x.host().expect("zeros").iter().all(|&v| v == 0));
        }
    }
}

//! `validate()`: a buffer's valid copies compared with each other and, where checksums are on,
//! with the checksums recorded when they were written; and reading a fragment's bytes back
//! from any space.

use super::buffer::RawBuffer;
use super::window::Window;
use crate::hal::{During, Error, Result, SpaceId};
use std::borrow::Cow;
use std::ops::Range;

impl RawBuffer {
    /// Compares every valid copy of every fragment and names the first that differs.
    pub(crate) fn validate(&self) -> Result<()> {
        let mut inner = self.lock();
        // Checksums first: they see a ghost write where only one copy is valid.
        if inner.sums.is_some() {
            self.check_all(&mut inner)?;
        }
        let shift = self.shift();
        for frag in 0..inner.table.len() {
            let Some(state) = inner.table.get(frag) else {
                break;
            };
            let range = self.frag_bytes(frag..frag + 1, shift);
            let mut reference: Option<(SpaceId, Cow<'_, [u8]>)> = None;
            for space in state.valid.iter() {
                let Some(window) = inner.blocks[space.index()] else {
                    continue;
                };
                let bytes = self.read_back(space, window, range.clone())?;
                // A secure buffer's ciphertext is compared in the clear, once authenticated.
                let bytes = self.in_clear(&inner, space, frag, bytes)?;
                let differs_from = if state.zero {
                    bytes.iter().any(|&b| b != 0).then_some(None)
                } else if let Some((first, expected)) = &reference {
                    (bytes != *expected).then(|| Some(self.memory().named(*first)))
                } else {
                    reference = Some((space, bytes));
                    None
                };
                if let Some(first) = differs_from {
                    return Err(Error::Diverged {
                        fragment: frag,
                        start: range.start,
                        end: range.end,
                        first,
                        second: self.memory().named(space),
                    });
                }
            }
        }
        Ok(())
    }
}

impl RawBuffer {
    /// The bytes `range` of this buffer's block in `space`: borrowed in place where the CPU
    /// addresses the space, read back through the backend where it does not.
    pub(super) fn read_back(
        &self,
        space: SpaceId,
        window: Window,
        range: Range<usize>,
    ) -> Result<Cow<'_, [u8]>> {
        // The range is a fragment valid in `space`, so it lies inside the window there.
        let at = range.start - window.origin;
        match self.memory().device_memory(space) {
            // SAFETY: the range is one fragment valid in `space`, inside the window the block
            // holds, and the buffer's lock (held by both callers, `validate` and a read's
            // checksum check in `acquire`) keeps the block from being freed or moved. No write
            // can race the read: `validate(&self)` excludes every mutable view of the buffer,
            // and an acquire reads only fragments of its own view, which no other live view
            // shares (views that live together are split on fragment boundaries).
            None => Ok(Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(window.block.ptr().add(at), range.len())
            })),
            Some(device) => {
                let mut bytes = vec![0u8; range.len()];
                device
                    .copy_out(window.block.ptr().addr() + at, &mut bytes)
                    .map_err(|source| {
                        Error::from_backend(
                            During::Transfer {
                                from: self.memory().named(space),
                                to: self.memory().named(SpaceId::HOST),
                                bytes: range.len(),
                            },
                            source,
                        )
                    })?;
                Ok(Cow::Owned(bytes))
            }
        }
    }
}

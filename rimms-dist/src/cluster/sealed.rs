//! What a secure distributed buffer's bytes look like on the network: AES-256-GCM ciphertext
//! followed by each fragment's seal, so that the wire never carries plaintext and a byte
//! changed on the way is caught before it lands.
//!
//! The runtime's `SecureKey::seal_run` / `open_run` do the cryptography; this module decides
//! what the seals bind and how they travel. A seal binds, besides the fragment's index and
//! size, an id hashed from what moves the bytes (a fetch or a corner turn), the buffer's
//! allocation id (the same on every rank) and its write epoch: a message recorded in one
//! exchange does not open as part of another.

use super::{DefaultHasher, Hash, Hasher};
use crate::Packed;
use rimms_runtime::{Seal, SecureKey};

/// Bytes of one fragment's seal on the wire: the nonce, then the tag.
pub const SEAL_BYTES: usize = 28;

/// The id a run's seals bind: `what` moves it (`"fetch"`, `"corner turn"`), in buffer
/// `buffer` at write epoch `epoch`.
pub(super) fn sealing_id(what: &str, buffer: u64, epoch: u64) -> u64 {
    let mut hasher = DefaultHasher::new();
    ("rimms-dist sealed run", what, buffer, epoch).hash(&mut hasher);
    hasher.finish()
}

/// `plain` sealed under `key` as fragments `first..` of `id`: the ciphertext, then one seal
/// per fragment.
pub(super) fn seal_message(
    key: &SecureKey,
    id: u64,
    first: usize,
    frag_bytes: usize,
    plain: &[u8],
) -> rimms_runtime::Result<Vec<u8>> {
    let mut message = plain.to_vec();
    let seals = key.seal_run(id, first, frag_bytes, &mut message)?;
    for seal in seals {
        message.extend_from_slice(&seal.nonce);
        message.extend_from_slice(&seal.tag);
    }
    Ok(message)
}

/// Opens into `room` a message [`seal_message`] made: as many bytes of ciphertext as `room`
/// holds, then the seals. On a failure `room` is left as it was.
pub(super) fn open_message(
    key: &SecureKey,
    id: u64,
    first: usize,
    frag_bytes: usize,
    message: &mut [u8],
    room: &mut [u8],
) -> rimms_runtime::Result<()> {
    let (text, tail) = message.split_at_mut(room.len());
    let seals: Vec<Seal> = tail.chunks_exact(SEAL_BYTES).map(seal_of).collect();
    key.open_run(id, first, frag_bytes, text, &seals)?;
    room.copy_from_slice(text);
    Ok(())
}

fn seal_of(bytes: &[u8]) -> Seal {
    let (nonce, tag) = bytes.split_at(12);
    Seal {
        // `bytes` is one SEAL_BYTES chunk, split at 12: 12 and 16 bytes, so the fallbacks
        // never run.
        nonce: nonce.try_into().unwrap_or_default(),
        tag: tag.try_into().unwrap_or_default(),
    }
}

/// Room for a seal at the end of a packed block of elements of `size` bytes: a whole number
/// of elements, so the blocks after it stay aligned for them.
pub(super) fn seal_slot(size: usize) -> usize {
    SEAL_BYTES.next_multiple_of(size.max(1))
}

/// Seals in place each block of `packed` this rank sends (not its own, not an empty one):
/// its first `plain[to]` bytes as one fragment, numbered `me · ranks + to`, with the seal in
/// the slot after them.
pub(super) fn seal_blocks(
    key: &SecureKey,
    id: u64,
    packed: &mut Packed,
    plain: &[usize],
    me: usize,
) -> rimms_runtime::Result<()> {
    let ranks = plain.len();
    for (to, &len) in plain
        .iter()
        .enumerate()
        .filter(|&(to, &len)| to != me && len > 0)
    {
        let at = packed.offset(to);
        let block = &mut packed.bytes_mut()[at..at + len + SEAL_BYTES];
        let (text, slot) = block.split_at_mut(len);
        let seals = key.seal_run(id, me * ranks + to, len, text)?;
        for seal in seals {
            slot[..12].copy_from_slice(&seal.nonce);
            slot[12..SEAL_BYTES].copy_from_slice(&seal.tag);
        }
    }
    Ok(())
}

/// Authenticates and decrypts in place each block of `packed` this rank received (numbered as
/// [`seal_blocks`] numbered them on their senders): an error names the first that fails.
pub(super) fn open_blocks(
    key: &SecureKey,
    id: u64,
    packed: &mut Packed,
    plain: &[usize],
    me: usize,
) -> rimms_runtime::Result<()> {
    let ranks = plain.len();
    for (from, &len) in plain
        .iter()
        .enumerate()
        .filter(|&(from, &len)| from != me && len > 0)
    {
        let at = packed.offset(from);
        let block = &mut packed.bytes_mut()[at..at + len + SEAL_BYTES];
        let (text, slot) = block.split_at_mut(len);
        key.open_run(id, from * ranks + me, len, text, &[seal_of(slot)])?;
    }
    Ok(())
}

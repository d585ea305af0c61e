//! Secure buffers: fragments encrypted with AES-256-GCM wherever they leave the trusted spaces
//! (`HeteData::alloc_secure`, `RuntimeBuilder::trust`; RIMMS: `hete_Malloc_Secure`).
//!
//! A runtime's spaces are trusted or not (`MemorySystem::untrusted`): the host always is, a
//! host-mapped device space (a u-dma-buf, a shared mapping another process or device can
//! reach) is not unless the builder marks it trusted, and any other space can be marked
//! untrusted. A secure buffer's bytes are plaintext in trusted spaces and ciphertext in
//! untrusted ones, with the same layout: each fragment is sealed on its own, in place, so a
//! fragment's ciphertext lies exactly where its plaintext would.
//!
//! - **Sealed** on every copy from a trusted space into an untrusted one (a prefetch there, a
//!   write-back of an evicted block there), and for a zero fragment filled there: the bytes
//!   are staged on the host, encrypted there, and only ciphertext is written into the space.
//! - **Opened** on every copy from an untrusted space into a trusted one: the ciphertext is
//!   staged on the host and authenticated before a byte is decrypted or written into the
//!   destination; a fragment that fails is [`Error::Tampered`], naming the buffer, the
//!   fragment and the space, and the acquire changes nothing.
//! - Copied as it is between two untrusted spaces (the seals go with it).
//!
//! The seal of a fragment (its nonce and tag, 28 bytes) is kept per untrusted space beside the
//! fragment table, in host memory, under the buffer's lock; the untrusted space holds only
//! ciphertext. **Nonces** are the key's random 32-bit prefix followed by a 64-bit counter the
//! key (shared by every buffer that uses it: [`SecureKey`] is a handle) advances on every
//! seal, so a nonce never repeats under one `SecureKey`; the counter refuses to wrap. **AAD**
//! binds each fragment to its buffer id, its index and the fragment size, so a fragment moved
//! to another index or buffer, or read back at another fragment size, fails to open.
//!
//! Kernels and host views see plaintext only in trusted spaces: the published summary of a
//! secure buffer never says "every fragment is here" for an untrusted space (so the fast path
//! never hands out an address there), the placement never picks one, and an acquire there
//! for anything but a prefetch or a write-back is [`Error::Untrusted`]. Freed blocks of a
//! secure buffer, in every space, and the host staging copies are zeroised; the key's
//! expanded schedule is wiped when the last handle drops (the `zeroize` features of `aes` and
//! `ghash`), and no `Debug`, stat or trace prints it.

use super::buffer::{Inner, RawBuffer};
use crate::hal::{Error, Result, SpaceId, SpaceSet, MAX_SPACES};
use crate::space::{Block, Pending};
use crate::stats::Reason;
use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::{AeadInPlace, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce, Tag};
use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use zeroize::{Zeroize, Zeroizing};

/// Bytes of an AES-256 key.
pub const SECURE_KEY_BYTES: usize = 32;

/// Domain separation of the AAD: a fragment sealed by this scheme, this version.
const AAD_TAG: &[u8; 24] = b"rimms secure fragment v1";

/// An AES-256-GCM key for secure buffers, and the nonce counter that goes with it.
///
/// A handle: clones share the key and its counter, so every buffer sealed under one
/// `SecureKey` (and its clones) draws nonces from one counter and none repeats. Two
/// `SecureKey`s made from the same key bytes have independent random 32-bit prefixes; use one
/// handle (cloned) per key to avoid relying on them. The key bytes are never printed, and the
/// expanded key is wiped when the last handle drops.
#[derive(Clone)]
pub struct SecureKey {
    inner: Arc<KeyInner>,
}

struct KeyInner {
    cipher: Aes256Gcm,
    /// The first 4 bytes of every nonce: random per handle.
    prefix: [u8; 4],
    /// The last 8 bytes of the next nonce.
    next: AtomicU64,
}

/// A fragment's nonce and authentication tag: what opening its ciphertext needs besides the
/// key. Neither is secret; both may travel or rest in the clear beside the ciphertext.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seal {
    /// The GCM nonce, used for this fragment's sealing only.
    pub nonce: [u8; 12],
    /// The GCM tag over the ciphertext and the AAD.
    pub tag: [u8; 16],
}

impl fmt::Debug for SecureKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecureKey")
            .field("key", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl SecureKey {
    /// A key from its 32 bytes; the copy passed in is wiped once the cipher is keyed (the
    /// caller's own copies are theirs to wipe).
    pub fn new(mut key: [u8; SECURE_KEY_BYTES]) -> SecureKey {
        let cipher = Aes256Gcm::new(&key.into());
        key.zeroize();
        let mut prefix = [0u8; 4];
        OsRng.fill_bytes(&mut prefix);
        SecureKey {
            inner: Arc::new(KeyInner {
                cipher,
                prefix,
                next: AtomicU64::new(0),
            }),
        }
    }

    /// A key from a slice of 32 bytes; another length is [`Error::SecureKey`].
    pub fn from_slice(bytes: &[u8]) -> Result<SecureKey> {
        let mut key: [u8; SECURE_KEY_BYTES] = bytes.try_into().map_err(|_| {
            Error::SecureKey(format!(
                "an AES-256 key is {SECURE_KEY_BYTES} bytes, got {}",
                bytes.len()
            ))
        })?;
        let made = SecureKey::new(key);
        key.zeroize();
        Ok(made)
    }

    /// A fresh random key from the operating system's generator.
    pub fn generate() -> SecureKey {
        let mut key = Zeroizing::new([0u8; SECURE_KEY_BYTES]);
        OsRng.fill_bytes(&mut key[..]);
        SecureKey::new(*key)
    }

    /// A nonce never handed out before under this key handle.
    fn next_nonce(&self) -> Result<[u8; 12]> {
        let n = self
            .inner
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .map_err(|_| {
                Error::SecureKey(
                    "this key has sealed 2^64 fragments and has no nonce left; seal with a new key"
                        .to_string(),
                )
            })?;
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&self.inner.prefix);
        nonce[4..].copy_from_slice(&n.to_be_bytes());
        Ok(nonce)
    }

    /// Encrypts `bytes` in place, one fragment of `fragment_bytes` after another (the last may
    /// be shorter), as fragments `first_fragment..` of buffer `buffer`, and returns one seal
    /// per fragment. What the runtime does to a fragment leaving the trusted spaces, for a
    /// caller that moves a secure buffer's run itself (the network layer): both ends must
    /// agree on `buffer`, the fragment indices and `fragment_bytes`, which the AAD binds.
    pub fn seal_run(
        &self,
        buffer: u64,
        first_fragment: usize,
        fragment_bytes: usize,
        bytes: &mut [u8],
    ) -> Result<Vec<Seal>> {
        check_run(first_fragment, fragment_bytes, bytes.len())?;
        bytes
            .chunks_mut(fragment_bytes)
            .enumerate()
            .map(|(i, chunk)| self.seal(buffer, first_fragment + i, fragment_bytes, chunk))
            .collect()
    }

    /// Authenticates and decrypts in place a run [`Self::seal_run`] sealed. Every fragment is
    /// authenticated before it is decrypted; on an error ([`Error::Tampered`] naming the
    /// first fragment that failed, with `held_in` `"transport"`) the whole of `bytes` is
    /// zeroed, so no plaintext of a run that did not authenticate is left to use.
    pub fn open_run(
        &self,
        buffer: u64,
        first_fragment: usize,
        fragment_bytes: usize,
        bytes: &mut [u8],
        seals: &[Seal],
    ) -> Result<()> {
        check_run(first_fragment, fragment_bytes, bytes.len())?;
        let count = bytes.len().div_ceil(fragment_bytes);
        if count != seals.len() {
            return Err(Error::SecureKey(format!(
                "a run of {} bytes in fragments of {fragment_bytes} has {count} fragments, but {} seals came with it",
                bytes.len(),
                seals.len()
            )));
        }
        let mut failed = None;
        for (i, (chunk, seal)) in bytes.chunks_mut(fragment_bytes).zip(seals).enumerate() {
            let fragment = first_fragment + i;
            if !self.open(buffer, fragment, fragment_bytes, chunk, seal) {
                failed = Some(fragment);
                break;
            }
        }
        match failed {
            None => Ok(()),
            Some(fragment) => {
                bytes.zeroize();
                let start = (fragment - first_fragment) * fragment_bytes;
                Err(Error::Tampered {
                    buffer,
                    fragment,
                    start,
                    end: (start + fragment_bytes).min(bytes.len()),
                    held_in: "transport".to_string(),
                })
            }
        }
    }

    /// Seals one fragment in place under a fresh nonce.
    fn seal(
        &self,
        buffer: u64,
        fragment: usize,
        fragment_bytes: usize,
        bytes: &mut [u8],
    ) -> Result<Seal> {
        let nonce = self.next_nonce()?;
        let tag = self
            .inner
            .cipher
            .encrypt_in_place_detached(
                Nonce::from_slice(&nonce),
                &aad(buffer, fragment, fragment_bytes),
                bytes,
            )
            .map_err(|_| {
                Error::SecureKey(format!(
                    "a fragment of {} bytes is longer than AES-GCM seals at once",
                    bytes.len()
                ))
            })?;
        Ok(Seal {
            nonce,
            tag: tag.into(),
        })
    }

    /// Authenticates one fragment and, only if it is authentic, decrypts it in place.
    fn open(
        &self,
        buffer: u64,
        fragment: usize,
        fragment_bytes: usize,
        bytes: &mut [u8],
        seal: &Seal,
    ) -> bool {
        self.inner
            .cipher
            .decrypt_in_place_detached(
                Nonce::from_slice(&seal.nonce),
                &aad(buffer, fragment, fragment_bytes),
                bytes,
                Tag::from_slice(&seal.tag),
            )
            .is_ok()
    }
}

/// Refuses a run whose fragments cannot be numbered: a zero fragment size, or indices past
/// `usize::MAX`.
fn check_run(first_fragment: usize, fragment_bytes: usize, len: usize) -> Result<()> {
    if fragment_bytes == 0 {
        return Err(Error::SecureKey(
            "a run's fragment size must not be zero".to_string(),
        ));
    }
    if first_fragment
        .checked_add(len.div_ceil(fragment_bytes))
        .is_none()
    {
        return Err(Error::SecureKey(format!(
            "a run from fragment {first_fragment} of {len} bytes numbers its fragments past the largest index"
        )));
    }
    Ok(())
}

/// What a fragment's tag binds besides its ciphertext: the scheme, the buffer, the fragment's
/// index and the fragment size.
fn aad(buffer: u64, fragment: usize, fragment_bytes: usize) -> [u8; 48] {
    let mut aad = [0u8; 48];
    aad[..24].copy_from_slice(AAD_TAG);
    aad[24..32].copy_from_slice(&buffer.to_le_bytes());
    aad[32..40].copy_from_slice(&(fragment as u64).to_le_bytes());
    aad[40..48].copy_from_slice(&(fragment_bytes as u64).to_le_bytes());
    aad
}

/// Per untrusted space, the seal of each fragment sealed there (meaningful where the fragment
/// table says the fragment is valid there). Host memory, under the buffer's lock.
pub(super) struct Seals {
    by_space: [Vec<Option<Seal>>; MAX_SPACES],
}

impl Seals {
    pub(super) fn new() -> Seals {
        Seals {
            by_space: std::array::from_fn(|_| Vec::new()),
        }
    }

    fn get(&self, space: SpaceId, frag: usize) -> Option<Seal> {
        self.by_space[space.index()].get(frag).copied().flatten()
    }

    fn set(&mut self, space: SpaceId, frag: usize, seal: Option<Seal>) {
        let seals = &mut self.by_space[space.index()];
        if seals.len() <= frag {
            seals.resize(frag + 1, None);
        }
        seals[frag] = seal;
    }

    /// Forgets every seal: no untrusted copy is valid any more (a change of fragment size).
    pub(super) fn clear(&mut self) {
        self.by_space.iter_mut().for_each(Vec::clear);
    }
}

/// Which way a copy of a secure buffer's bytes crosses the trust boundary.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Crossing {
    /// Both ends trusted, or a plain buffer: the bytes move as they are.
    None,
    /// Trusted to untrusted: sealed on the way.
    Out,
    /// Untrusted to trusted: opened on the way.
    In,
    /// Between two untrusted spaces: ciphertext moves as it is, and its seals with it.
    Between,
}

impl RawBuffer {
    /// Whether the buffer is secure.
    pub(crate) fn is_secure(&self) -> bool {
        self.key().is_some()
    }

    /// The spaces where this buffer's bytes are ciphertext: the runtime's untrusted spaces
    /// for a secure buffer, none for a plain one.
    pub(crate) fn sealed_spaces(&self) -> SpaceSet {
        match self.key() {
            Some(_) => self.memory().untrusted(),
            None => SpaceSet::EMPTY,
        }
    }

    fn crossing(&self, from: SpaceId, to: SpaceId) -> Crossing {
        let sealed = self.sealed_spaces();
        match (sealed.contains(from), sealed.contains(to)) {
            (false, false) => Crossing::None,
            (false, true) => Crossing::Out,
            (true, false) => Crossing::In,
            (true, true) => Crossing::Between,
        }
    }

    /// Refuses an acquire in `space` that would put this buffer's plaintext there: a secure
    /// buffer in an untrusted space, for anything but a prefetch or a write-back (which keep
    /// ciphertext there). Inline, as every locked acquire asks it of a plain buffer, which has
    /// no sealed space; the error is built out of line.
    #[inline]
    pub(crate) fn refuse_plaintext(&self, space: SpaceId, reason: &Reason) -> Result<()> {
        if !self.sealed_spaces().contains(space)
            || matches!(reason, Reason::Prefetch | Reason::WriteBack { .. })
        {
            return Ok(());
        }
        Err(self.untrusted(space, reason))
    }

    /// The error [`Self::refuse_plaintext`] gives.
    #[cold]
    #[inline(never)]
    fn untrusted(&self, space: SpaceId, reason: &Reason) -> Error {
        Error::Untrusted {
            buffer: self.id(),
            space: self.memory().named(space),
            why: reason.to_string(),
        }
    }

    /// Copies fragments `frags` of this buffer from its block in `from` (based at `src`) to
    /// its block in `to` (at `dst`), counted and traced as one copy: sealed, opened or moved
    /// as they are as the two spaces' trust says. An opened fragment that fails is
    /// [`Error::Tampered`], and nothing is written to `to`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_run(
        &self,
        inner: &mut Inner,
        from: SpaceId,
        to: SpaceId,
        src: *mut u8,
        dst: *mut u8,
        frags: Range<usize>,
        reason: &Reason,
    ) -> Result<Pending> {
        let shift = self.shift();
        let bytes = self.frag_bytes(frags.clone(), shift);
        let crossing = self.crossing(from, to);
        let (Some(key), Some(seals)) = (self.key(), inner.seals.as_mut()) else {
            return self
                .memory()
                .copy(from, to, src, dst, bytes, &frags, reason);
        };
        let id = self.id();
        let fragment_bytes = 1usize << shift;
        let origin = bytes.start;
        let each = |stage: &mut [u8], f: &mut dyn FnMut(usize, &mut [u8]) -> Result<()>| {
            for frag in frags.clone() {
                let range = self.frag_bytes(frag..frag + 1, shift);
                f(frag, &mut stage[range.start - origin..range.end - origin])?;
            }
            Ok(())
        };
        match crossing {
            Crossing::None => self
                .memory()
                .copy(from, to, src, dst, bytes, &frags, reason),
            Crossing::Between => {
                for frag in frags.clone() {
                    seals.set(to, frag, seals.get(from, frag));
                }
                self.memory()
                    .copy(from, to, src, dst, bytes, &frags, reason)
            }
            Crossing::Out => {
                let mut seal = |stage: &mut [u8]| {
                    each(stage, &mut |frag, chunk| {
                        let sealed = key.seal(id, frag, fragment_bytes, chunk)?;
                        seals.set(to, frag, Some(sealed));
                        Ok(())
                    })
                };
                self.memory()
                    .copy_through(from, to, src, dst, bytes, &frags, reason, &mut seal)
            }
            Crossing::In => {
                let held_in = self.memory().named(from);
                let mut open = |stage: &mut [u8]| {
                    each(stage, &mut |frag, chunk| {
                        let opened = seals
                            .get(from, frag)
                            .is_some_and(|seal| key.open(id, frag, fragment_bytes, chunk, &seal));
                        if opened {
                            return Ok(());
                        }
                        let range = self.frag_bytes(frag..frag + 1, shift);
                        Err(Error::Tampered {
                            buffer: id,
                            fragment: frag,
                            start: range.start,
                            end: range.end,
                            held_in: held_in.to_string(),
                        })
                    })
                };
                self.memory()
                    .copy_through(from, to, src, dst, bytes, &frags, reason, &mut open)
            }
        }
    }

    /// Materialises zero fragments `frags` in `space`'s block (at `base`): zeros where the
    /// space is trusted, and sealed zeros where it holds this buffer's ciphertext.
    pub(super) fn fill_run(
        &self,
        inner: &mut Inner,
        space: SpaceId,
        base: *mut u8,
        frags: Range<usize>,
    ) -> Result<()> {
        let shift = self.shift();
        let bytes = self.frag_bytes(frags.clone(), shift);
        let (Some(key), Some(seals), true) = (
            self.key(),
            inner.seals.as_mut(),
            self.sealed_spaces().contains(space),
        ) else {
            return self.memory().fill_zero(space, base, bytes);
        };
        let (id, fragment_bytes, origin) = (self.id(), 1usize << shift, bytes.start);
        let mut seal = |stage: &mut [u8]| {
            for frag in frags.clone() {
                let range = self.frag_bytes(frag..frag + 1, shift);
                let chunk = &mut stage[range.start - origin..range.end - origin];
                seals.set(
                    space,
                    frag,
                    Some(key.seal(id, frag, fragment_bytes, chunk)?),
                );
            }
            Ok(())
        };
        self.memory().fill_through(space, base, bytes, &mut seal)
    }

    /// Fragment `frag`'s bytes as read back from `space` (`bytes`), in the clear: opened
    /// where `space` holds this buffer's ciphertext, as they are elsewhere. For `validate`.
    pub(super) fn in_clear<'b>(
        &self,
        inner: &Inner,
        space: SpaceId,
        frag: usize,
        bytes: Cow<'b, [u8]>,
    ) -> Result<Cow<'b, [u8]>> {
        let (Some(key), Some(seals), true) = (
            self.key(),
            inner.seals.as_ref(),
            self.sealed_spaces().contains(space),
        ) else {
            return Ok(bytes);
        };
        let mut clear = bytes.into_owned();
        let opened = seals.get(space, frag).is_some_and(|seal| {
            key.open(self.id(), frag, self.fragment_bytes(), &mut clear, &seal)
        });
        if opened {
            return Ok(Cow::Owned(clear));
        }
        let range = self.frag_range(frag);
        Err(Error::Tampered {
            buffer: self.id(),
            fragment: frag,
            start: range.start,
            end: range.end,
            held_in: self.memory().named(space).to_string(),
        })
    }

    /// Gives `block` back to `space`'s pool, zeroised first where this buffer is secure. A
    /// wipe that fails (a device's fill) is logged, and the block is freed all the same: it
    /// cannot be kept from a pool whose buffer is going.
    pub(super) fn free_block(&self, space: SpaceId, block: Block) {
        let pool = self.memory().pool(space);
        if self.is_secure() {
            if let Err(e) = self.memory().wipe(space, block.ptr(), pool.held(&block)) {
                tracing::error!(space = %self.memory().named(space), error = %e, "a secure buffer's freed block could not be zeroised");
            }
        }
        pool.free(block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::SimConfig;
    use crate::data::evict::Pressure;
    use crate::data::HeteData;
    use crate::hal::Device;
    use crate::{FftDirection, Runtime};
    use aes_gcm::aead::{AeadInPlace, KeyInit};
    use num_complex::Complex32;

    const KEY: [u8; 32] = [
        0xa7, 0x3c, 0x91, 0x5e, 0x0d, 0xf2, 0x48, 0xb6, 0x21, 0x7f, 0xc4, 0x19, 0xe8, 0x53, 0x9a,
        0x06, 0x6b, 0xd0, 0x35, 0x8e, 0xf9, 0x12, 0x77, 0xac, 0x40, 0xcb, 0x2e, 0x95, 0x5a, 0xe3,
        0x0f, 0x84,
    ];

    /// A host and one sim device (sim0), which `trusted` says whether to trust.
    fn runtime(trusted: bool, checksums: bool) -> Runtime {
        Runtime::builder()
            .host_pool(1 << 20)
            .sim(SimConfig::default())
            .trust("sim0", trusted)
            .checksums(checksums)
            .build()
            .expect("runtime")
    }

    fn values() -> Vec<u32> {
        (0..3000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x5a5a)
            .collect()
    }

    /// The bytes of `x`'s block in `space`, read behind the runtime's back.
    fn bytes_in(x: &HeteData<u32>, space: SpaceId) -> Vec<u8> {
        let len = x.raw.bytes();
        // SAFETY: the caller made sure `space` holds a block for the whole buffer
        // (host-addressable: sim0 has no device memory), and no view or call of `x` is alive.
        unsafe { std::slice::from_raw_parts(x.raw.ptr_in(space, 0), len).to_vec() }
    }

    /// Independent of `SecureKey`: opens a fragment with the aes-gcm crate directly, with the
    /// documented AAD layout, the key bytes and the seal the runtime kept.
    fn open_with_aes_gcm(buffer: u64, frag: usize, cipher: &[u8], seal: Seal) -> Option<Vec<u8>> {
        let aead = Aes256Gcm::new(&KEY.into());
        let mut aad = b"rimms secure fragment v1".to_vec();
        aad.extend_from_slice(&buffer.to_le_bytes());
        aad.extend_from_slice(&(frag as u64).to_le_bytes());
        aad.extend_from_slice(&4096u64.to_le_bytes());
        let mut bytes = cipher.to_vec();
        aead.decrypt_in_place_detached(
            Nonce::from_slice(&seal.nonce),
            &aad,
            &mut bytes,
            Tag::from_slice(&seal.tag),
        )
        .ok()?;
        Some(bytes)
    }

    /// A prefetch into an untrusted space leaves only ciphertext there (with checksums on and
    /// off: their check must not read ciphertext as a ghost write); aes-gcm itself opens it to
    /// the plaintext; `validate` compares the copies in the clear. A plain buffer, or the same
    /// space trusted, holds the plaintext: what the check tells apart.
    #[test]
    fn an_untrusted_space_holds_only_ciphertext_that_aes_gcm_opens_to_the_values() {
        let values = values();
        let plain: Vec<u8> = bytemuck::cast_slice(&values).to_vec();
        for checksums in [false, true] {
            for (trusted, secure) in [(false, true), (false, false), (true, true)] {
                let rt = runtime(trusted, checksums);
                let key = SecureKey::new(KEY);
                let x = if secure {
                    HeteData::from_slice_secure(&rt, &values, &key)
                } else {
                    HeteData::from_slice(&rt, &values)
                }
                .expect("x");
                x.prefetch(Device::Sim(0)).expect("prefetch");
                let sim = rt.space_of(Device::Sim(0)).expect("sim0");
                let at_rest = bytes_in(&x, sim);
                x.validate().expect("the copies agree in the clear");
                if trusted || !secure {
                    assert_eq!(at_rest, plain, "trusted {trusted}, secure {secure}");
                    continue;
                }
                let inner = x.raw.lock();
                let seals = inner.seals.as_ref().expect("a secure buffer's seals");
                for (frag, (cipher, clear)) in
                    at_rest.chunks(4096).zip(plain.chunks(4096)).enumerate()
                {
                    let same = cipher.iter().zip(clear).filter(|(a, b)| a == b).count();
                    assert!(
                        same < cipher.len() / 32,
                        "fragment {frag}: {same} bytes in the clear"
                    );
                    let seal = seals.get(sim, frag).expect("sealed");
                    let opened = open_with_aes_gcm(x.raw.id(), frag, cipher, seal);
                    assert_eq!(opened.as_deref(), Some(clear), "fragment {frag}");
                }
            }
        }
    }

    /// The host's block evicted (its last copies written back into the untrusted sim0, as a
    /// full device pool's are): sim0 holds the only copy, as ciphertext; the freed host block
    /// reads zero; reading the buffer back opens it to the values.
    #[test]
    fn a_round_trip_through_an_untrusted_space_reads_the_values_back() {
        let values = values();
        let rt = runtime(false, false);
        let key = SecureKey::new(KEY);
        let x = HeteData::from_slice_secure(&rt, &values, &key).expect("x");
        let sim = rt.space_of(Device::Sim(0)).expect("sim0");
        let (host_ptr, host_len) = {
            let inner = x.raw.lock();
            let block = inner.blocks[SpaceId::HOST.index()]
                .expect("host block")
                .block;
            (
                block.ptr(),
                rt.shared().memory().pool(SpaceId::HOST).held(&block),
            )
        };
        let freed = x
            .raw
            .evict(SpaceId::HOST, Pressure { needed: 0 })
            .expect("evict");
        assert!(freed.is_some(), "the host block went");
        for frag in 0..x.fragment_count() {
            let state = x.fragment_state(frag).expect("fragment");
            assert_eq!(state.valid, SpaceSet::only(sim), "fragment {frag}");
        }
        // SAFETY: the host pool's region outlives the runtime's buffers and nothing else was
        // allocated since the block was freed (one thread), so these bytes are still mapped
        // and unused.
        let freed_bytes = unsafe { std::slice::from_raw_parts(host_ptr, host_len) };
        assert!(
            freed_bytes.iter().all(|&b| b == 0),
            "the freed block was not zeroised"
        );
        let plain: Vec<u8> = bytemuck::cast_slice(&values).to_vec();
        assert_ne!(bytes_in(&x, sim), plain);
        assert_eq!(x.to_vec().expect("read back"), values);
    }

    /// Zeros materialised in an untrusted space are sealed too: what rests there is not
    /// zeros, and it opens to zeros.
    #[test]
    fn zeros_filled_in_an_untrusted_space_are_sealed() {
        let rt = runtime(false, false);
        let x = HeteData::<u32>::alloc_secure(&rt, 3000, &SecureKey::new(KEY)).expect("x");
        x.prefetch(Device::Sim(0)).expect("prefetch");
        let sim = rt.space_of(Device::Sim(0)).expect("sim0");
        let at_rest = bytes_in(&x, sim);
        let zeros = at_rest.iter().filter(|&&b| b == 0).count();
        assert!(zeros < at_rest.len() / 32, "{zeros} zero bytes at rest");
        x.validate().expect("opens to zeros");
        x.raw
            .evict(SpaceId::HOST, Pressure { needed: 0 })
            .expect("evict");
        assert!(x.to_vec().expect("read").iter().all(|&v| v == 0));
    }

    /// Device memory the CPU cannot address (a discrete GPU's stand-in), marked untrusted: the
    /// staged copies go through the backend both ways, the freed blocks are wiped with the
    /// device's fill, and the values come back.
    #[test]
    fn a_round_trip_through_untrusted_device_memory_reads_the_values_back() {
        let values = values();
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .sim(SimConfig {
                device_memory: true,
                ..SimConfig::default()
            })
            .trust("sim0", false)
            .build()
            .expect("runtime");
        let x = HeteData::from_slice_secure(&rt, &values, &SecureKey::new(KEY)).expect("x");
        x.raw
            .evict(SpaceId::HOST, Pressure { needed: 0 })
            .expect("evict");
        let sim = rt.space_of(Device::Sim(0)).expect("sim0");
        assert_eq!(x.fragment_state(2).expect("2").valid, SpaceSet::only(sim));
        x.validate().expect("opens in the clear");
        assert_eq!(x.to_vec().expect("read back"), values);
    }

    /// A byte flipped in the untrusted copy, or two fragments swapped there, is an error
    /// naming the buffer, the fragment and the space; nothing is used or changed, and the
    /// fragments around it still read.
    #[test]
    fn a_tampered_or_swapped_fragment_is_an_error_naming_it() {
        let values = values();
        let plain = plain_copy(&values);
        for swap in [false, true] {
            let rt = runtime(false, false);
            let x = HeteData::from_slice_secure(&rt, &values, &SecureKey::new(KEY)).expect("x");
            let sim = rt.space_of(Device::Sim(0)).expect("sim0");
            x.raw
                .evict(SpaceId::HOST, Pressure { needed: 0 })
                .expect("evict");
            // SAFETY: sim0 holds the whole 12000-byte buffer and nothing of `x` is in use.
            unsafe {
                let base = x.raw.ptr_in(sim, 0);
                if swap {
                    std::ptr::swap_nonoverlapping(base, base.add(4096), 4096);
                } else {
                    *base.add(4096 + 17) ^= 0x01;
                }
            }
            let err = x.host().expect_err("tampered");
            match err {
                Error::Tampered {
                    buffer,
                    fragment,
                    start,
                    end,
                    held_in,
                } => {
                    assert_eq!(buffer, x.raw.id());
                    let first = if swap { 0 } else { 1 };
                    assert_eq!(
                        (fragment, start, end),
                        (first, first * 4096, first * 4096 + 4096)
                    );
                    assert_eq!(held_in, "sim0");
                }
                other => panic!("{other}"),
            }
            assert_eq!(x.fragment_state(1).expect("1").valid, SpaceSet::only(sim));
            // Fragment 2 was left alone and still opens.
            let third = x.slice(2048..).expect("fragment 2").host().expect("intact");
            assert_eq!(bytemuck::cast_slice::<u32, u8>(third), &plain[8192..]);
        }
    }

    fn plain_copy(values: &[u32]) -> Vec<u8> {
        bytemuck::cast_slice(values).to_vec()
    }

    /// A kernel on a device whose space is untrusted is refused with the reason, before
    /// anything moved; on a trusted device the same call runs and is right (the FFT of an
    /// impulse is all ones).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a 1024-point FFT and its plan are slow under Miri; the unsafe code of secure buffers runs in the other tests"
    )]
    fn a_kernel_in_an_untrusted_space_is_refused_and_runs_where_trusted() {
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .sim(SimConfig::default())
            .trust("sim0", false)
            .build()
            .expect("runtime");
        let key = SecureKey::generate();
        let n = 1024;
        let mut impulse = vec![Complex32::new(0.0, 0.0); n];
        impulse[0] = Complex32::new(1.0, 0.0);
        let x = HeteData::from_slice_secure(&rt, &impulse, &key).expect("x");
        let mut y = HeteData::<Complex32>::alloc_secure(&rt, n, &key).expect("y");
        let err = rt
            .fft(Device::Sim(0), FftDirection::Forward, n, &x, &mut y)
            .expect_err("refused");
        match &err {
            Error::Untrusted { space, why, .. } => {
                assert_eq!(space, "sim0");
                assert!(why.contains("fft"), "{why}");
            }
            other => panic!("{other}"),
        }
        let sim0 = rt.space_of(Device::Sim(0)).expect("sim0");
        assert!(!x.fragment_state(0).expect("0").valid.contains(sim0));
        assert_eq!(rt.stats().links.iter().map(|l| l.bytes).sum::<u64>(), 0);
        rt.fft(Device::Sim(1), FftDirection::Forward, n, &x, &mut y)
            .expect("trusted sim1");
        for (i, v) in y.host().expect("y").iter().enumerate() {
            assert!(
                (v.re - 1.0).abs() < 1e-5 && v.im.abs() < 1e-5,
                "bin {i}: {v}"
            );
        }
    }

    /// Host code never writes a secure buffer in place in an untrusted host-mapped space (a
    /// u-dma-buf's stand-in), even where it is the buffer's home; a plain buffer is written
    /// there.
    #[test]
    fn host_views_of_a_secure_buffer_stay_out_of_an_untrusted_shared_mapping() {
        for secure in [true, false] {
            let rt = Runtime::builder()
                .sim(SimConfig {
                    host_mapped: true,
                    ..SimConfig::default()
                })
                .build()
                .expect("runtime");
            let sim = rt.space_of(Device::Sim(0)).expect("sim0");
            let mut x = if secure {
                HeteData::<u32>::alloc_secure(&rt, 1024, &SecureKey::generate())
            } else {
                HeteData::<u32>::alloc(&rt, 1024)
            }
            .expect("x");
            x.set_home(Device::Sim(0)).expect("home");
            x.host_mut().expect("host view").fill(9);
            let valid = x.fragment_state(0).expect("0").valid;
            let want = if secure { SpaceId::HOST } else { sim };
            assert_eq!(valid, SpaceSet::only(want), "secure {secure}");
        }
    }

    /// Dropping a secure buffer zeroes its blocks in every space before they go back; a plain
    /// buffer's bytes stay where they were (what the check tells apart).
    #[test]
    fn a_freed_block_of_a_secure_buffer_reads_zero() {
        let values = values();
        for secure in [true, false] {
            let rt = runtime(false, false);
            let key = SecureKey::new(KEY);
            let x = if secure {
                HeteData::from_slice_secure(&rt, &values, &key)
            } else {
                HeteData::from_slice(&rt, &values)
            }
            .expect("x");
            x.prefetch(Device::Sim(0)).expect("prefetch");
            let blocks: Vec<(*mut u8, usize)> = {
                let inner = x.raw.lock();
                let memory = rt.shared().memory();
                (0..memory.space_count())
                    .filter_map(|i| {
                        let w = inner.blocks[i]?;
                        Some((w.block.ptr(), memory.pool(SpaceId(i as u8)).held(&w.block)))
                    })
                    .collect()
            };
            assert_eq!(blocks.len(), 2);
            drop(x);
            for (ptr, len) in blocks {
                // SAFETY: the pools' regions live as long as `rt`, and nothing was allocated
                // since the blocks were freed (one thread): the bytes are mapped and unused.
                let freed = unsafe { std::slice::from_raw_parts(ptr, len) };
                assert_eq!(freed.iter().all(|&b| b == 0), secure, "secure {secure}");
            }
        }
    }

    /// Changing the fragment size of a secure buffer whose only copy is ciphertext opens it
    /// on the host first: the values survive, and what is sealed afterwards opens at the new
    /// size.
    #[test]
    fn refragmenting_a_secure_buffer_keeps_its_values() {
        let values = values();
        let rt = runtime(false, true);
        let mut x = HeteData::from_slice_secure(&rt, &values, &SecureKey::new(KEY)).expect("x");
        x.raw
            .evict(SpaceId::HOST, Pressure { needed: 0 })
            .expect("evict");
        x.fragment(8192).expect("refragment");
        assert_eq!(x.to_vec().expect("read"), values);
        x.prefetch(Device::Sim(0)).expect("prefetch");
        x.validate().expect("the sealed copy opens at 8 KiB");
    }

    /// The key's bytes appear in no `Debug` output: the key's, the buffer's, the runtime's,
    /// nor an error's.
    #[test]
    fn no_debug_output_shows_the_key() {
        let rt = runtime(false, false);
        let key = SecureKey::new(KEY);
        let x = HeteData::from_slice_secure(&rt, &values(), &key).expect("x");
        x.prefetch(Device::Sim(0)).expect("prefetch");
        let seal = key.seal_run(1, 0, 4096, &mut [0u8; 64]).expect("seal");
        let err = key
            .open_run(2, 0, 4096, &mut [0u8; 64], &seal)
            .expect_err("wrong buffer id");
        let shown = format!(
            "{key:?} {x:?} {rt:?} {err:?} {err} {seal:?} {:?}",
            x.raw.key()
        );
        for needle in key_spellings(&KEY) {
            assert!(!shown.contains(&needle), "{needle} in {shown}");
        }
        assert!(shown.contains("redacted"), "{shown}");
    }

    /// Ways the key could be spelled in text: hex either case, its `Debug` as an array, and
    /// any 4 of its bytes in a row as such an array prints them.
    fn key_spellings(key: &[u8; 32]) -> Vec<String> {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let mut spellings = vec![hex.clone(), hex.to_uppercase(), format!("{key:?}")];
        for w in key.windows(4) {
            spellings.push(format!("{}, {}, {}, {}", w[0], w[1], w[2], w[3]));
            spellings.push(w.iter().map(|b| format!("{b:02x}")).collect());
        }
        spellings
    }

    /// The run API the network layer uses: a run opens to its bytes; a flipped bit, a wrong
    /// buffer id, a wrong fragment index, a wrong key or swapped seals fail and leave zeros;
    /// no nonce repeats between two seals of the same bytes.
    #[test]
    fn a_sealed_run_opens_only_as_sealed() {
        let key = SecureKey::new(KEY);
        let clear: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut run = clear.clone();
        let seals = key.seal_run(7, 3, 4096, &mut run).expect("seal");
        assert_eq!(seals.len(), 3);
        let mut again = clear.clone();
        let seals_again = key.seal_run(7, 3, 4096, &mut again).expect("seal");
        assert_ne!(run, again, "the same bytes sealed twice under one nonce");
        let nonces: std::collections::HashSet<_> =
            seals.iter().chain(&seals_again).map(|s| s.nonce).collect();
        assert_eq!(nonces.len(), 6);
        // Runs that cannot be numbered are refused, not a panic.
        for (first, size) in [(usize::MAX, 4096), (0, 0)] {
            let err = key
                .seal_run(7, first, size, &mut clear.clone())
                .expect_err("refused");
            assert!(matches!(err, Error::SecureKey(_)), "{err}");
        }
        let mut opened = run.clone();
        key.open_run(7, 3, 4096, &mut opened, &seals).expect("open");
        assert_eq!(opened, clear);
        let mut swapped = seals.clone();
        swapped.swap(0, 1);
        let other = SecureKey::generate();
        // (key, buffer id, first fragment, seals, a byte to flip)
        type Case<'a> = (&'a SecureKey, u64, usize, &'a [Seal], Option<usize>);
        let cases: [Case<'_>; 5] = [
            (&key, 7, 3, &seals, Some(4096 + 5)),
            (&key, 8, 3, &seals, None),
            (&key, 7, 4, &seals, None),
            (&other, 7, 3, &seals, None),
            (&key, 7, 3, &swapped, None),
        ];
        for (i, (k, buffer, first, seals, flip)) in cases.into_iter().enumerate() {
            let mut bytes = run.clone();
            if let Some(at) = flip {
                bytes[at] ^= 0x80;
            }
            let err = k
                .open_run(buffer, first, 4096, &mut bytes, seals)
                .expect_err("must not open");
            let want = if flip.is_some() { first + 1 } else { first };
            assert!(
                matches!(err, Error::Tampered { fragment, .. } if fragment == want),
                "case {i}: {err}"
            );
            assert!(bytes.iter().all(|&b| b == 0), "case {i}: bytes left");
        }
    }
}

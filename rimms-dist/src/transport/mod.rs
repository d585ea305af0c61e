//! How ranks exchange bytes: the [`Transport`] trait, [`InProcess`] (threads as ranks) and,
//! with the feature `mpi`, `Mpi` (processes under `mpirun`).
//!
//! The runtime's network space carries out a [`RankTable`](crate::RankTable)'s plans over a
//! transport. MPI is what real runs use (behind a feature, next step); `InProcess` is the test
//! double, as StarPU's FAKE_RANK is: each rank is a thread with a channel, so plain `cargo test`
//! exercises the whole protocol (point-to-point sends matched by envelope, early arrivals, the
//! all-to-all of a corner turn, drift detection) on a machine without MPI.
//!
//! Every wait is bounded ([`InProcess::with_timeout`]): a rank that never sends what another
//! waits for is an error naming what was awaited, never a hang.

mod in_process;
#[cfg(feature = "mpi")]
mod mpi;

pub use in_process::InProcess;
#[cfg(feature = "mpi")]
pub use mpi::Mpi;

use crate::table::Exchange;
use crate::Rank;
use std::fmt;
use std::ops::Range;

/// What identifies a point-to-point message, so that a receive matches it whenever it arrives:
/// the buffer, the fragments and the buffer's write epoch when the send was planned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// The distributed buffer's id (the same on every rank: allocation order).
    pub buffer: u64,
    /// The fragments the message carries.
    pub frags: Range<usize>,
    /// How many writes the buffer had seen when the send was planned.
    pub epoch: u64,
}

/// What went wrong between ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// A peer's message did not come in time.
    Timeout {
        /// What was awaited.
        awaited: String,
    },
    /// A peer is gone (its end of the transport was dropped).
    PeerGone {
        /// The rank.
        rank: Rank,
    },
    /// Ranks hold different tables after the same call: they ran different calls.
    Drift {
        /// The call after which the tables differ.
        call: String,
        /// The ranks whose table differs from the lowest rank's.
        ranks: Vec<Rank>,
    },
    /// A block of an all-to-all of another length than the rank expects.
    BlockLength {
        /// The rank that sent it.
        from: Rank,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// A message of another length than the receive expects.
    Length {
        /// What was received.
        envelope: Envelope,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Timeout { awaited } => write!(f, "no message came for {awaited}"),
            TransportError::PeerGone { rank } => write!(f, "{rank} is gone"),
            TransportError::Drift { call, ranks } => {
                let names: Vec<String> = ranks.iter().map(Rank::to_string).collect();
                write!(
                    f,
                    "ranks drifted apart at `{call}`: the distributed state of {} differs from rank 0's (calls on distributed buffers ran in another order there)",
                    names.join(", ")
                )
            }
            TransportError::BlockLength {
                from,
                expected,
                got,
            } => write!(
                f,
                "{from}'s block of an all-to-all has {got} bytes, not the {expected} its distribution gives"
            ),
            TransportError::Length {
                envelope,
                expected,
                got,
            } => write!(
                f,
                "a message for buffer {} fragments {:?} has {got} bytes, not {expected}",
                envelope.buffer, envelope.frags
            ),
        }
    }
}

impl std::error::Error for TransportError {}

/// How ranks exchange bytes.
pub trait Transport {
    /// This rank.
    fn rank(&self) -> Rank;
    /// Ranks in the job.
    fn ranks(&self) -> usize;
    /// Sends `bytes` to `to` without waiting for the receive.
    fn send(&self, to: Rank, envelope: Envelope, bytes: &[u8]) -> Result<(), TransportError>;
    /// Receives the message `envelope` from `from` into `into`; it may have arrived first.
    fn recv(&self, from: Rank, envelope: &Envelope, into: &mut [u8]) -> Result<(), TransportError>;
    /// One all-to-all: block `i` of `send` goes to rank `i` (one's own block stays home), and
    /// rank `j`'s block lands in block `j` of `recv`, whose counts say what every rank sends
    /// this one: every rank knows that from the distribution, so no sizes are exchanged first,
    /// and a block of another size is an error. Both buffers come back, for the next one.
    fn all_to_all(&self, send: Packed, recv: Packed) -> Result<(Packed, Packed), TransportError> {
        self.all_to_all_overlapped(send, recv, &mut || {})
    }
    /// [`Self::all_to_all`], running `meanwhile` on this thread while the blocks are in flight
    /// (a corner turn transposes its own diagonal block then).
    fn all_to_all_overlapped(
        &self,
        send: Packed,
        recv: Packed,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(Packed, Packed), TransportError>;
    /// Checks that every rank holds the same `digest` after `call`: the same error on every
    /// rank where one differs.
    fn agree(&self, digest: u64, call: &str) -> Result<(), TransportError>;
    /// Every rank's `word`, in rank order, once every rank has reached the same `call` (a
    /// `Drift` naming the ranks at another call otherwise): the agreement's own collective,
    /// one word per rank, with the words handed back instead of compared. A corner turn's
    /// ranks vote with it before the all-to-all, so that a rank that cannot take part says so
    /// and no rank enters the exchange without the others. Not counted as data.
    fn vote(&self, word: u64, call: &str) -> Result<Vec<u64>, TransportError>;
    /// Data bytes this rank has sent each peer, point-to-point and all-to-all (agreements,
    /// a check, are not counted).
    fn sent_bytes(&self) -> Vec<u64>;
    /// Data messages this rank has sent each peer, where the transport counts them (what a
    /// modelled link charges its latency for); empty where it does not.
    fn sent_messages(&self) -> Vec<u64> {
        Vec::new()
    }
    /// A [`crate::Cluster`] joins this end of the transport: how many joined it before. Every
    /// rank's programs join their ends in the same order, so the count is the same on every
    /// rank, and a cluster marks its envelopes with it: a message an earlier program on the
    /// same transport left untaken (a drift or a failed call leaves one) then never matches a
    /// later program's receive of the same buffer id, fragments and epoch, which would
    /// otherwise take the stale bytes as its own. A transport that does not count returns 0
    /// (envelopes as before).
    fn join(&self) -> u64 {
        0
    }
}

/// One rank's side of an all-to-all: a block per rank, back to back in rank order, in a buffer
/// aligned for elements of up to 8 bytes, so that a corner turn packs its elements straight
/// into it and unpacks them straight out of what it receives, with no copy through bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    words: Vec<u64>,
    counts: Vec<usize>,
    len: usize,
}

impl Packed {
    /// Zeroed blocks of `counts[i]` bytes.
    pub fn zeroed(counts: Vec<usize>) -> Packed {
        let len: usize = counts.iter().sum();
        Packed {
            words: vec![0; len.div_ceil(8)],
            counts,
            len,
        }
    }

    /// The same buffer with blocks of `counts[i]` bytes, its storage kept (so a buffer used
    /// again costs no allocation and no first touch of fresh pages); what it held before is
    /// left in it, not cleared.
    pub fn reshape(mut self, counts: Vec<usize>) -> Packed {
        self.len = counts.iter().sum();
        self.words.resize(self.len.div_ceil(8), 0);
        self.counts = counts;
        self
    }

    /// The blocks' sizes, bytes, in rank order.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// Where block `rank` starts, bytes.
    pub fn offset(&self, rank: usize) -> usize {
        self.counts[..rank.min(self.counts.len())].iter().sum()
    }

    /// All blocks, as bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// All blocks, as bytes to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// All blocks as elements of `T`; `None` where `T` needs an alignment over 8 bytes or the
    /// bytes are no whole number of elements.
    pub fn elements<T: bytemuck::Pod>(&self) -> Option<&[T]> {
        bytemuck::try_cast_slice(self.bytes()).ok()
    }

    /// All blocks as elements of `T` to write; `None` as for [`Self::elements`].
    pub fn elements_mut<T: bytemuck::Pod>(&mut self) -> Option<&mut [T]> {
        bytemuck::try_cast_slice_mut(self.bytes_mut()).ok()
    }

    /// Each block as its own bytes.
    pub fn blocks(&self) -> impl Iterator<Item = &[u8]> {
        let bytes = self.bytes();
        self.counts.iter().scan(0, move |at, &n| {
            let block = &bytes[*at..*at + n];
            *at += n;
            Some(block)
        })
    }
}

/// A borrowed transport is one: a [`crate::Cluster`] per program on one MPI handle.
impl<T: Transport + ?Sized> Transport for &T {
    fn rank(&self) -> Rank {
        (**self).rank()
    }
    fn ranks(&self) -> usize {
        (**self).ranks()
    }
    fn send(&self, to: Rank, envelope: Envelope, bytes: &[u8]) -> Result<(), TransportError> {
        (**self).send(to, envelope, bytes)
    }
    fn recv(&self, from: Rank, envelope: &Envelope, into: &mut [u8]) -> Result<(), TransportError> {
        (**self).recv(from, envelope, into)
    }
    fn all_to_all_overlapped(
        &self,
        send: Packed,
        recv: Packed,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(Packed, Packed), TransportError> {
        (**self).all_to_all_overlapped(send, recv, meanwhile)
    }
    fn agree(&self, digest: u64, call: &str) -> Result<(), TransportError> {
        (**self).agree(digest, call)
    }
    fn vote(&self, word: u64, call: &str) -> Result<Vec<u64>, TransportError> {
        (**self).vote(word, call)
    }
    fn sent_bytes(&self) -> Vec<u64> {
        (**self).sent_bytes()
    }
    fn sent_messages(&self) -> Vec<u64> {
        (**self).sent_messages()
    }
    fn join(&self) -> u64 {
        (**self).join()
    }
}

/// The outcome of an agreement after `call`, from what every rank reported (its digest and its
/// call), in rank order: the ranks whose report differs from rank 0's drifted. Every rank
/// compares with rank 0's, so every rank names the same ranks.
pub(crate) fn verdict<T: PartialEq>(call: &str, reports: &[T]) -> Result<(), TransportError> {
    let drifted: Vec<Rank> = reports
        .iter()
        .enumerate()
        .filter(|(_, report)| Some(*report) != reports.first())
        .map(|(i, _)| Rank(i as u16))
        .collect();
    if drifted.is_empty() {
        Ok(())
    } else {
        Err(TransportError::Drift {
            call: call.to_string(),
            ranks: drifted,
        })
    }
}

/// Where this rank keeps the bytes of a buffer's fragments, for [`execute_on`].
pub trait Fragments {
    /// What reaching the bytes can fail with, the transport's errors included.
    type Error: From<TransportError>;
    /// Calls `send` with the bytes of the run `frags`.
    fn read(
        &mut self,
        frags: Range<usize>,
        send: impl FnOnce(&[u8]) -> Result<(), TransportError>,
    ) -> Result<(), Self::Error>;
    /// Calls `recv` with room for the bytes of the run `frags`, which then hold what it left.
    fn write(
        &mut self,
        frags: Range<usize>,
        recv: impl FnOnce(&mut [u8]) -> Result<(), TransportError>,
    ) -> Result<(), Self::Error>;
}

/// A buffer's fragments in one block of bytes, `frag_bytes` each (the last may be short).
struct Contiguous<'a> {
    block: &'a mut [u8],
    frag_bytes: usize,
}

impl Contiguous<'_> {
    fn bytes_of(&self, frags: &Range<usize>) -> Range<usize> {
        let len = self.block.len();
        (frags.start * self.frag_bytes).min(len)..(frags.end * self.frag_bytes).min(len)
    }
}

impl Fragments for Contiguous<'_> {
    type Error = TransportError;
    fn read(
        &mut self,
        frags: Range<usize>,
        send: impl FnOnce(&[u8]) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        send(&self.block[self.bytes_of(&frags)])
    }
    fn write(
        &mut self,
        frags: Range<usize>,
        recv: impl FnOnce(&mut [u8]) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        let range = self.bytes_of(&frags);
        recv(&mut self.block[range])
    }
}

/// Carries out `exchange` on this rank: posts the sends it is the source of (reading each run
/// of fragments from `block`), then receives the runs it reads into `block`. `frag_bytes` is the
/// fragment size; a buffer's last fragment may be short.
pub fn execute(
    transport: &dyn Transport,
    exchange: &Exchange,
    buffer: u64,
    epoch: u64,
    frag_bytes: usize,
    block: &mut [u8],
) -> Result<(), TransportError> {
    let mut store = Contiguous { block, frag_bytes };
    execute_on(transport, exchange, buffer, epoch, &mut store)
}

/// [`execute`] over fragments kept wherever `store` keeps them.
pub fn execute_on<F: Fragments>(
    transport: &dyn Transport,
    exchange: &Exchange,
    buffer: u64,
    epoch: u64,
    store: &mut F,
) -> Result<(), F::Error> {
    let me = transport.rank();
    let envelope = |frags: &Range<usize>| Envelope {
        buffer,
        frags: frags.clone(),
        epoch,
    };
    for send in exchange.sends.iter().filter(|s| s.from == me) {
        store.read(send.frags.clone(), |bytes| {
            transport.send(send.to, envelope(&send.frags), bytes)
        })?;
    }
    for send in exchange.sends.iter().filter(|s| s.to == me) {
        store.write(send.frags.clone(), |room| {
            transport.recv(send.from, &envelope(&send.frags), room)
        })?;
    }
    Ok(())
}

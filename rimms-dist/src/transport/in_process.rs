//! [`InProcess`]: a job whose ranks are threads of this process, each with a channel.

use super::{Envelope, Packed, Transport, TransportError};
use crate::Rank;
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

enum Kind {
    PointToPoint(Envelope),
    /// The `n`-th all-to-all of the job.
    AllToAll(u64),
    /// The `n`-th agreement, and the call it follows.
    Agree(u64, String),
}

struct Message {
    from: Rank,
    kind: Kind,
    bytes: Vec<u8>,
}

/// Messages that arrived before their receive was posted (StarPU-MPI's early requests).
#[derive(Default)]
struct Early {
    /// A queue per sender and envelope, oldest first: one envelope may carry several messages
    /// in flight at once (two fetches of the same rows with only a flush or a call on another
    /// buffer between them, drift checks off), and each is received once, in the order sent,
    /// as MPI matches messages of one source and tag. One slot per key would let the second
    /// overwrite the first, and the second receive would then wait for a message it had
    /// swallowed.
    point: HashMap<(Rank, Envelope), VecDeque<Vec<u8>>>,
    collective: HashMap<(Rank, u64, bool), (Vec<u8>, String)>,
}

/// One rank of a job whose ranks are threads of this process.
pub struct InProcess {
    rank: Rank,
    peers: Vec<Sender<Message>>,
    inbox: Mutex<Receiver<Message>>,
    early: Mutex<Early>,
    /// Collectives this rank has entered: all-to-alls, agreements.
    collectives: Mutex<(u64, u64)>,
    sent: Mutex<Vec<u64>>,
    /// Data messages this rank has sent each peer (what a link's latency is paid for).
    messages: Mutex<Vec<u64>>,
    /// Clusters that joined this end ([`Transport::join`]).
    joins: Mutex<u64>,
    timeout: Duration,
}

impl InProcess {
    /// The `ranks` ends of a new job, rank `i` at index `i`; each goes to its own thread.
    pub fn world(ranks: usize) -> Vec<InProcess> {
        let (senders, inboxes): (Vec<_>, Vec<_>) = (0..ranks).map(|_| channel()).unzip();
        inboxes
            .into_iter()
            .enumerate()
            .map(|(i, inbox)| InProcess {
                rank: Rank(i as u16),
                peers: senders.clone(),
                inbox: Mutex::new(inbox),
                early: Mutex::default(),
                collectives: Mutex::new((0, 0)),
                sent: Mutex::new(vec![0; ranks]),
                messages: Mutex::new(vec![0; ranks]),
                joins: Mutex::new(0),
                timeout: Duration::from_secs(30),
            })
            .collect()
    }

    /// The longest any receive waits before it is an error (30 s by default).
    pub fn with_timeout(mut self, timeout: Duration) -> InProcess {
        self.timeout = timeout;
        self
    }

    fn post(&self, to: Rank, kind: Kind, bytes: Vec<u8>) -> Result<(), TransportError> {
        let peer = self
            .peers
            .get(usize::from(to.0))
            .ok_or(TransportError::PeerGone { rank: to })?;
        // Agreements are a check, not data: `sent_bytes` is what the plans move.
        let len = match kind {
            Kind::Agree(..) => 0,
            _ => bytes.len() as u64,
        };
        peer.send(Message {
            from: self.rank,
            kind,
            bytes,
        })
        .map_err(|_| TransportError::PeerGone { rank: to })?;
        if to != self.rank && len > 0 {
            let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
            sent[usize::from(to.0)] += len;
            let mut messages = self.messages.lock().unwrap_or_else(|e| e.into_inner());
            messages[usize::from(to.0)] += 1;
        }
        Ok(())
    }

    /// Waits until `take` finds what it wants among the early arrivals, filing every message
    /// that comes meanwhile there first.
    fn wait_for<T>(
        &self,
        awaited: impl Fn() -> String,
        take: impl FnMut(&mut Early) -> Option<T>,
    ) -> Result<T, TransportError> {
        self.wait_within(self.timeout, awaited, take)
    }

    /// [`Self::wait_for`], for at most `patience`.
    fn wait_within<T>(
        &self,
        patience: Duration,
        awaited: impl Fn() -> String,
        mut take: impl FnMut(&mut Early) -> Option<T>,
    ) -> Result<T, TransportError> {
        // A timeout too long to add (`Duration::MAX`) waits as long as an instant reaches.
        let now = Instant::now();
        let deadline = now
            .checked_add(patience)
            .or_else(|| now.checked_add(Duration::from_secs(u64::from(u32::MAX))))
            .unwrap_or(now);
        loop {
            if let Some(found) = take(&mut self.early.lock().unwrap_or_else(|e| e.into_inner())) {
                return Ok(found);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self
                .inbox
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .recv_timeout(left)
            {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(TransportError::Timeout { awaited: awaited() })
                }
                // Every rank holds a sender to every inbox, its own included.
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TransportError::PeerGone { rank: self.rank })
                }
            };
            let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
            match message.kind {
                Kind::PointToPoint(envelope) => {
                    early
                        .point
                        .entry((message.from, envelope))
                        .or_default()
                        .push_back(message.bytes);
                }
                Kind::AllToAll(n) => {
                    early
                        .collective
                        .insert((message.from, n, true), (message.bytes, String::new()));
                }
                Kind::Agree(n, call) => {
                    early
                        .collective
                        .insert((message.from, n, false), (message.bytes, call));
                }
            }
        }
    }

    fn next_collective(&self, all_to_all: bool) -> u64 {
        let mut counts = self.collectives.lock().unwrap_or_else(|e| e.into_inner());
        let count = if all_to_all {
            &mut counts.0
        } else {
            &mut counts.1
        };
        *count += 1;
        *count
    }

    /// Sends `blocks[i]` to every other rank `i` as collective `n`, and gathers theirs, each
    /// waited for at most `patience`.
    fn exchange_all(
        &self,
        n: u64,
        all_to_all: bool,
        call: &str,
        mut blocks: Vec<Vec<u8>>,
        patience: Duration,
    ) -> Result<Vec<(Vec<u8>, String)>, TransportError> {
        let me = usize::from(self.rank.0);
        let mut received: Vec<(Vec<u8>, String)> = vec![(Vec::new(), String::new()); self.ranks()];
        for (to, block) in blocks.iter_mut().enumerate() {
            if to == me {
                received[me] = (std::mem::take(block), call.to_string());
                continue;
            }
            let kind = if all_to_all {
                Kind::AllToAll(n)
            } else {
                Kind::Agree(n, call.to_string())
            };
            self.post(Rank(to as u16), kind, std::mem::take(block))?;
        }
        for (from, slot) in received.iter_mut().enumerate() {
            if from == me {
                continue;
            }
            let key = (Rank(from as u16), n, all_to_all);
            *slot = self.wait_within(
                patience,
                || format!("collective {n} from {}", Rank(from as u16)),
                |early| early.collective.remove(&key),
            )?;
        }
        Ok(received)
    }
}

impl InProcess {
    /// The next agreement: every rank's word and the call it gave, in rank order, each
    /// waited for at most `patience`.
    fn gather_words(
        &self,
        word: u64,
        call: &str,
        patience: Duration,
    ) -> Result<Vec<(u64, String)>, TransportError> {
        let n = self.next_collective(false);
        let blocks = vec![word.to_le_bytes().to_vec(); self.ranks()];
        let received = self.exchange_all(n, false, call, blocks, patience)?;
        let word_of = |bytes: &[u8]| {
            let mut word = [0u8; 8];
            let len = 8.min(bytes.len());
            word[..len].copy_from_slice(&bytes[..len]);
            u64::from_le_bytes(word)
        };
        Ok(received
            .into_iter()
            .map(|(bytes, peer_call)| (word_of(&bytes), peer_call))
            .collect())
    }
}

impl Transport for InProcess {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.peers.len()
    }

    fn send(&self, to: Rank, envelope: Envelope, bytes: &[u8]) -> Result<(), TransportError> {
        self.post(to, Kind::PointToPoint(envelope), bytes.to_vec())
    }

    fn recv(&self, from: Rank, envelope: &Envelope, into: &mut [u8]) -> Result<(), TransportError> {
        let key = (from, envelope.clone());
        let bytes = self.wait_for(
            || {
                format!(
                    "buffer {} fragments {:?} from {from}",
                    envelope.buffer, envelope.frags
                )
            },
            |early| {
                let queue = early.point.get_mut(&key)?;
                let bytes = queue.pop_front();
                if queue.is_empty() {
                    early.point.remove(&key);
                }
                bytes
            },
        )?;
        if bytes.len() != into.len() {
            return Err(TransportError::Length {
                envelope: envelope.clone(),
                expected: into.len(),
                got: bytes.len(),
            });
        }
        into.copy_from_slice(&bytes);
        Ok(())
    }

    fn all_to_all_overlapped(
        &self,
        send: Packed,
        mut recv: Packed,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(Packed, Packed), TransportError> {
        let n = self.next_collective(true);
        let blocks = send.blocks().map(<[u8]>::to_vec).collect();
        // Threads: the blocks are posted to the peers' channels at once; this thread's own
        // work overlaps with the peers taking them.
        meanwhile();
        let received = self.exchange_all(n, true, "", blocks, self.timeout)?;
        for (from, (bytes, _)) in received.iter().enumerate() {
            // A receive buffer with no block for a rank (counts for fewer ranks than the job)
            // is an error naming that rank, not an index out of bounds.
            let slot = recv.counts().get(from).copied();
            let (at, expected) = (recv.offset(from), slot.unwrap_or(0));
            if slot.is_none() || bytes.len() != expected {
                return Err(TransportError::BlockLength {
                    from: Rank(from as u16),
                    expected,
                    got: bytes.len(),
                });
            }
            recv.bytes_mut()[at..at + expected].copy_from_slice(bytes);
        }
        Ok((send, recv))
    }

    fn agree(&self, digest: u64, call: &str) -> Result<(), TransportError> {
        let seen = self.gather_words(digest, call, self.timeout)?;
        super::verdict(call, &seen)
    }

    fn vote(&self, word: u64, call: &str) -> Result<Vec<u64>, TransportError> {
        // A rank may come to the vote only after a wait of its own ran out (its fetch
        // before it): the vote outwaits one.
        let seen = self.gather_words(word, call, self.timeout.saturating_mul(2))?;
        let calls: Vec<&str> = seen
            .iter()
            .map(|(_, peer_call)| peer_call.as_str())
            .collect();
        super::verdict(call, &calls)?;
        Ok(seen.into_iter().map(|(word, _)| word).collect())
    }

    fn sent_bytes(&self) -> Vec<u64> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A point-to-point message or a non-empty all-to-all block is one.
    fn sent_messages(&self) -> Vec<u64> {
        self.messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn join(&self) -> u64 {
        let mut joins = self.joins.lock().unwrap_or_else(|e| e.into_inner());
        *joins += 1;
        *joins - 1
    }
}

//! [`Mpi`]: ranks as processes under `mpirun`, over rsmpi.
//!
//! One thread owns MPI: it initialises it (at FUNNELED: only it calls MPI), and every
//! operation is a command sent to it. Open MPI here does no progress of its own ("progress:
//! no"), so the thread drives it: between commands it wakes about every millisecond, and while
//! a send or a collective is in flight it keeps testing it, taking every point-to-point message
//! that has arrived meanwhile into the early-arrival map. Two ranks that send each other large
//! messages at once therefore both complete: each drains the other's.
//!
//! Point-to-point messages carry their [`Envelope`] in a 32-byte header, so a receive matches a
//! message whenever it arrived. A collective cannot be cancelled: a rank whose collective does
//! not complete in time aborts the job (MPI's own answer to a lost rank), after printing what it
//! waited for.

use super::{Envelope, Packed, Transport, TransportError};
use crate::Rank;
use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{Partition, PartitionMut};
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::{Request, Scope};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tag of every point-to-point message: envelopes, not tags, tell messages apart.
const TAG: i32 = 28;
const HEADER: usize = 32;

type Reply<T> = Sender<Result<T, TransportError>>;

/// Messages that arrived before their receive was posted, a queue per sender and envelope,
/// oldest first: one envelope may carry several messages at once (two fetches of the same rows
/// with no write between them), and each is received once, in the order sent. One slot per
/// key let the second overwrite the first (the in-process transport had the same defect).
type Early = HashMap<(Rank, Envelope), VecDeque<Vec<u8>>>;

enum Command {
    Send {
        to: Rank,
        envelope: Envelope,
        bytes: Vec<u8>,
        done: Reply<()>,
    },
    Recv {
        from: Rank,
        envelope: Envelope,
        done: Reply<Vec<u8>>,
    },
    AllToAll {
        send: Packed,
        recv: Packed,
        done: Reply<(Packed, Packed)>,
    },
    /// An agreement or a vote: every rank's two words.
    Agree {
        /// The digest (or the vote) and a hash of the call's name.
        words: [u64; 2],
        /// How many timeouts it may wait: a vote outwaits a rank whose fetch before it ran
        /// out of time first.
        patience: u32,
        done: Reply<Vec<[u64; 2]>>,
    },
}

/// This process's rank of an MPI job.
pub struct Mpi {
    rank: Rank,
    ranks: usize,
    /// `None` once dropped: the MPI thread then finalises MPI and ends.
    commands: Mutex<Option<Sender<Command>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    sent: Arc<Mutex<Vec<u64>>>,
    /// Clusters that joined this rank's end ([`Transport::join`]).
    joins: Mutex<u64>,
    timeout: Duration,
}

impl Mpi {
    /// Starts the thread that owns MPI and initialises it there. Without `mpirun` this is a
    /// job of one rank (a singleton), as MPI allows. Fails where MPI was initialised already in
    /// this process (once per process) or cannot give FUNNELED.
    pub fn start() -> Result<Mpi, TransportError> {
        let (commands, inbox) = channel::<Command>();
        let (started, first) = channel::<Result<(Rank, usize), TransportError>>();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let counters = Arc::clone(&sent);
        let thread = std::thread::Builder::new()
            .name("rimms-mpi".into())
            .spawn(move || comm_thread(inbox, started, counters))
            .map_err(|e| TransportError::Timeout {
                awaited: format!("the MPI thread (it could not start: {e})"),
            })?;
        let (rank, ranks) = first
            .recv()
            .map_err(|_| TransportError::PeerGone { rank: Rank(0) })??;
        Ok(Mpi {
            rank,
            ranks,
            commands: Mutex::new(Some(commands)),
            thread: Some(thread),
            sent,
            joins: Mutex::new(0),
            timeout: Duration::from_secs(30),
        })
    }

    /// The longest a receive or collective waits (30 s by default).
    pub fn with_timeout(mut self, timeout: Duration) -> Mpi {
        self.timeout = timeout;
        self
    }

    fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, TransportError> {
        let reply = self.post(make)?;
        self.answer(reply, 2)
    }

    /// Hands the MPI thread a command; its answer comes on the returned channel.
    fn post<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<Receiver<Result<T, TransportError>>, TransportError> {
        let (done, reply) = channel();
        let commands = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        commands
            .as_ref()
            .ok_or(TransportError::PeerGone { rank: self.rank })?
            .send(make(done))
            .map_err(|_| TransportError::PeerGone { rank: self.rank })?;
        Ok(reply)
    }

    /// Waits for the MPI thread's answer to a posted command.
    fn answer<T>(
        &self,
        reply: Receiver<Result<T, TransportError>>,
        timeouts: u32,
    ) -> Result<T, TransportError> {
        // The MPI thread answers every command; a generous bound over its own deadline.
        match reply.recv_timeout(self.timeout.saturating_mul(timeouts)) {
            Ok(result) => result,
            Err(_) => Err(TransportError::Timeout {
                awaited: "the MPI thread's answer".into(),
            }),
        }
    }
}

impl Drop for Mpi {
    /// MPI must be finalised before the process exits, on the thread that initialised it: the
    /// MPI thread does so once its commands end, and this waits for it.
    fn drop(&mut self) {
        self.commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Transport for Mpi {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn send(&self, to: Rank, envelope: Envelope, bytes: &[u8]) -> Result<(), TransportError> {
        let bytes = bytes.to_vec();
        self.ask(|done| Command::Send {
            to,
            envelope,
            bytes,
            done,
        })
    }

    fn recv(&self, from: Rank, envelope: &Envelope, into: &mut [u8]) -> Result<(), TransportError> {
        let envelope = envelope.clone();
        let bytes = self.ask(|done| Command::Recv {
            from,
            envelope: envelope.clone(),
            done,
        })?;
        if bytes.len() != into.len() {
            return Err(TransportError::Length {
                envelope,
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
        recv: Packed,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(Packed, Packed), TransportError> {
        let reply = self.post(|done| Command::AllToAll { send, recv, done })?;
        // The MPI thread drives the collective while this one works.
        meanwhile();
        self.answer(reply, 2)
    }

    fn agree(&self, digest: u64, call: &str) -> Result<(), TransportError> {
        let words = [digest, name_hash(call)];
        let all = self.ask(|done| Command::Agree {
            words,
            patience: 1,
            done,
        })?;
        super::verdict(call, &all)
    }

    fn vote(&self, word: u64, call: &str) -> Result<Vec<u64>, TransportError> {
        let words = [word, name_hash(call)];
        let reply = self.post(|done| Command::Agree {
            words,
            patience: 2,
            done,
        })?;
        let all = self.answer(reply, 3)?;
        let calls: Vec<u64> = all.iter().map(|w| w[1]).collect();
        super::verdict(call, &calls)?;
        Ok(all.iter().map(|w| w[0]).collect())
    }

    fn sent_bytes(&self) -> Vec<u64> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn join(&self) -> u64 {
        let mut joins = self.joins.lock().unwrap_or_else(|e| e.into_inner());
        *joins += 1;
        *joins - 1
    }
}

/// A hash of a call's name that every rank computes alike (same binary, fixed keys).
fn name_hash(call: &str) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    call.hash(&mut hasher);
    hasher.finish()
}

fn header(envelope: &Envelope) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    let words = [
        envelope.buffer,
        envelope.frags.start as u64,
        envelope.frags.end as u64,
        envelope.epoch,
    ];
    for (chunk, word) in h.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    h
}

fn envelope_of(message: &[u8]) -> Option<Envelope> {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(message.get(i * 8..i * 8 + 8)?);
        Some(u64::from_le_bytes(w))
    };
    Some(Envelope {
        buffer: word(0)?,
        frags: word(1)? as usize..word(2)? as usize,
        epoch: word(3)?,
    })
}

/// Takes every point-to-point message that has arrived into the early-arrival map.
fn drain(world: &SimpleCommunicator, early: &mut Early) {
    while let Some(probed) = world.any_process().immediate_matched_probe_with_tag(TAG) {
        let (bytes, status) = probed.matched_receive_vec::<u8>();
        let from = Rank(status.source_rank() as u16);
        if let Some(envelope) = envelope_of(&bytes) {
            early
                .entry((from, envelope))
                .or_default()
                .push_back(bytes[HEADER..].to_vec());
        }
    }
}

/// The state the MPI thread keeps between commands.
struct Comm {
    world: SimpleCommunicator,
    early: Early,
    sent: Arc<Mutex<Vec<u64>>>,
}

impl Comm {
    fn drain(&mut self) {
        drain(&self.world, &mut self.early);
    }

    fn count(&self, to: usize, bytes: usize) {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        sent[to] += bytes as u64;
    }

    fn send(&mut self, to: Rank, envelope: &Envelope, bytes: &[u8]) {
        let mut message = header(envelope).to_vec();
        message.extend_from_slice(bytes);
        let (world, early) = (&self.world, &mut self.early);
        mpi::request::scope(|scope| {
            let request = world
                .process_at_rank(i32::from(to.0))
                .immediate_send_with_tag(scope, &message[..], TAG);
            complete(request, world, early, None);
        });
        self.count(usize::from(to.0), bytes.len());
    }

    fn all_to_all(
        &mut self,
        send: Packed,
        mut received: Packed,
        deadline: Instant,
    ) -> Result<(Packed, Packed), TransportError> {
        // MPI counts blocks in `int`s: a block of 2 GiB or more is refused, not truncated.
        let ints = |counts: &[usize]| -> Result<Vec<i32>, TransportError> {
            counts
                .iter()
                .map(|&n| {
                    i32::try_from(n).map_err(|_| TransportError::BlockLength {
                        from: Rank(self.world.rank() as u16),
                        expected: i32::MAX as usize,
                        got: n,
                    })
                })
                .collect()
        };
        let displs = |c: &[i32]| -> Vec<i32> {
            c.iter()
                .scan(0, |at, &n| {
                    let here = *at;
                    *at += n;
                    Some(here)
                })
                .collect()
        };
        let (counts, their_counts) = (ints(send.counts())?, ints(received.counts())?);
        let (send_displs, recv_displs) = (displs(&counts), displs(&their_counts));
        let (world, early) = (&self.world, &mut self.early);
        {
            let partition = Partition::new(send.bytes(), &counts[..], &send_displs[..]);
            let mut into =
                PartitionMut::new(received.bytes_mut(), &their_counts[..], &recv_displs[..]);
            mpi::request::scope(|scope| {
                let request =
                    world.immediate_all_to_all_varcount_into(scope, &partition, &mut into);
                complete(request, world, early, Some((deadline, "an all-to-all")));
            });
        }
        let me = self.world.rank() as usize;
        for (to, &n) in send.counts().iter().enumerate() {
            if to != me {
                self.count(to, n);
            }
        }
        Ok((send, received))
    }

    fn agree(&mut self, words: [u64; 2], deadline: Instant) -> Vec<[u64; 2]> {
        let ranks = self.world.size() as usize;
        let mut all = vec![0u64; 2 * ranks];
        let (world, early) = (&self.world, &mut self.early);
        mpi::request::scope(|scope| {
            let request = world.immediate_all_gather_into(scope, &words[..], &mut all[..]);
            let what = "an agreement of the ranks (tables compared, or a vote)";
            complete(request, world, early, Some((deadline, what)));
        });
        all.chunks_exact(2).map(|w| [w[0], w[1]]).collect()
    }
}

/// Drives `request` to completion, taking every point-to-point message that arrives meanwhile
/// (so a peer sending to this rank at the same time completes too). A collective has a
/// `deadline`, and what it is, for the abort that ends a wait no one will answer.
fn complete<'a, D: ?Sized, S: Scope<'a>>(
    mut request: Request<'a, D, S>,
    world: &SimpleCommunicator,
    early: &mut Early,
    deadline: Option<(Instant, &str)>,
) {
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
        if let Some((until, what)) = deadline {
            if Instant::now() >= until {
                abort(world, what);
            }
        }
        drain(world, early);
        std::thread::yield_now();
    }
}

/// A collective that never completes cannot be cancelled: the job ends, saying why.
fn abort(world: &SimpleCommunicator, what: &str) -> ! {
    eprintln!(
        "rimms: rank {} waited too long for {what}: another rank is stuck or ran other calls; aborting the job",
        world.rank()
    );
    world.abort(3)
}

fn comm_thread(
    inbox: Receiver<Command>,
    started: Sender<Result<(Rank, usize), TransportError>>,
    sent: Arc<Mutex<Vec<u64>>>,
) {
    let Some((universe, _level)) = mpi::initialize_with_threading(Threading::Funneled) else {
        let _ = started.send(Err(TransportError::Timeout {
            awaited: "MPI's initialisation (MPI was initialised already in this process)".into(),
        }));
        return;
    };
    let world = universe.world();
    let (rank, ranks) = (Rank(world.rank() as u16), world.size() as usize);
    *sent.lock().unwrap_or_else(|e| e.into_inner()) = vec![0; ranks];
    let mut comm = Comm {
        world,
        early: HashMap::new(),
        sent,
    };
    if started.send(Ok((rank, ranks))).is_err() {
        return;
    }
    let timeout = Duration::from_secs(30);
    let mut waiting: Vec<(Rank, Envelope, Reply<Vec<u8>>, Instant)> = Vec::new();
    loop {
        comm.drain();
        waiting.retain(|(from, envelope, done, deadline)| {
            let key = (*from, envelope.clone());
            if let Some(queue) = comm.early.get_mut(&key) {
                let bytes = queue.pop_front();
                if queue.is_empty() {
                    comm.early.remove(&key);
                }
                if let Some(bytes) = bytes {
                    let _ = done.send(Ok(bytes));
                    return false;
                }
            }
            if Instant::now() >= *deadline {
                let _ = done.send(Err(TransportError::Timeout {
                    awaited: format!(
                        "buffer {} fragments {:?} from {from}",
                        envelope.buffer, envelope.frags
                    ),
                }));
                return false;
            }
            true
        });
        let command = match inbox.recv_timeout(Duration::from_millis(1)) {
            Ok(command) => command,
            Err(RecvTimeoutError::Timeout) => continue,
            // The handle is gone: `universe` finalises MPI as it drops.
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match command {
            Command::Send {
                to,
                envelope,
                bytes,
                done,
            } => {
                comm.send(to, &envelope, &bytes);
                let _ = done.send(Ok(()));
            }
            Command::Recv {
                from,
                envelope,
                done,
            } => waiting.push((from, envelope, done, Instant::now() + timeout)),
            Command::AllToAll { send, recv, done } => {
                let _ = done.send(comm.all_to_all(send, recv, Instant::now() + timeout));
            }
            Command::Agree {
                words,
                patience,
                done,
            } => {
                let deadline = Instant::now() + timeout * patience;
                let _ = done.send(Ok(comm.agree(words, deadline)));
            }
        }
    }
    drop(comm);
    drop(universe);
}

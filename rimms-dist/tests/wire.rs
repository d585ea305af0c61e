//! Secure distributed buffers as an attacker on the network meets them: a two-rank job whose
//! transport is a double that records every byte rank 0 sends and can alter it on the way.
//! The rows cross as ciphertext; a flipped bit, an altered corner-turn block or a run replayed
//! from an earlier write is an error on the reader, never bytes, and changes nothing.

use rimms_dist::{Cluster, ClusterError, DistData, Distribution, Envelope, InProcess, Packed};
use rimms_dist::{Rank, Transport, TransportError};
use rimms_runtime::{Error, Runtime, SecureKey};
use std::sync::Mutex;
use std::time::Duration;

/// What the network does to the bytes on it.
#[derive(Clone, Copy, Default)]
struct Attack {
    /// Flip the byte at this offset of each message.
    flip: Option<usize>,
    /// Flip the first byte of each block an all-to-all sends.
    flip_blocks: bool,
    /// Send the first message again in place of each later one of its length.
    replay: bool,
}

/// The network as an attacker on it sees and changes it: every message a rank sends is
/// recorded (`seen`), after the attack.
struct OnTheWire {
    inner: InProcess,
    seen: Mutex<Vec<u8>>,
    attack: Attack,
}

impl Transport for OnTheWire {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn ranks(&self) -> usize {
        self.inner.ranks()
    }
    fn send(&self, to: Rank, envelope: Envelope, bytes: &[u8]) -> Result<(), TransportError> {
        let mut bytes = bytes.to_vec();
        if let Some(at) = self.attack.flip.filter(|&at| at < bytes.len()) {
            bytes[at] ^= 1;
        }
        let mut seen = self.seen.lock().expect("not poisoned");
        let len = bytes.len();
        if self.attack.replay && seen.len() >= len {
            bytes.copy_from_slice(&seen[..len]);
        }
        seen.extend_from_slice(&bytes);
        drop(seen);
        self.inner.send(to, envelope, &bytes)
    }
    fn recv(&self, from: Rank, envelope: &Envelope, into: &mut [u8]) -> Result<(), TransportError> {
        self.inner.recv(from, envelope, into)
    }
    fn all_to_all_overlapped(
        &self,
        mut send: Packed,
        recv: Packed,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(Packed, Packed), TransportError> {
        if self.attack.flip_blocks {
            let starts: Vec<usize> = (0..self.ranks())
                .filter(|&to| send.counts()[to] > 0)
                .map(|to| send.offset(to))
                .collect();
            for at in starts {
                send.bytes_mut()[at] ^= 1;
            }
        }
        self.inner.all_to_all_overlapped(send, recv, meanwhile)
    }
    fn agree(&self, digest: u64, call: &str) -> Result<(), TransportError> {
        self.inner.agree(digest, call)
    }
    fn vote(&self, word: u64, call: &str) -> Result<Vec<u64>, TransportError> {
        self.inner.vote(word, call)
    }
    fn sent_bytes(&self) -> Vec<u64> {
        self.inner.sent_bytes()
    }
}

/// Runs `work` as both ranks of a two-thread job on a network doing `attack`, each rank with
/// its own runtime and drift checks off (a rank that fails must not wait for the others'
/// agreement); returns each rank's result and the bytes it sent.
fn on_the_wire<T: Send>(
    attack: Attack,
    work: impl Fn(&Cluster<'_>) -> T + Sync,
) -> Vec<(T, Vec<u8>)> {
    std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = InProcess::world(2)
            .into_iter()
            .map(|inner| {
                s.spawn(move || {
                    let wire = OnTheWire {
                        inner: inner.with_timeout(Duration::from_secs(30)),
                        seen: Mutex::default(),
                        attack,
                    };
                    let cl = Cluster::new(Runtime::new().expect("runtime"), &wire);
                    cl.check_drift(false);
                    let out = work(&cl);
                    drop(cl);
                    let seen = wire.seen.into_inner().expect("not poisoned");
                    (out, seen)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect()
    })
}

/// `rows` rows of 256 `f32`s on rank 0 (one 1024-byte fragment a row), secure under `key`,
/// every value `v`.
fn on_rank_0(cl: &Cluster<'_>, rows: usize, key: &SecureKey, v: f32) -> DistData<f32> {
    let on_0 = Distribution::OnRank(Rank(0));
    let mut a = cl.alloc_secure::<f32>(rows, 256, on_0, key).expect("alloc");
    write(cl, &mut a, v).expect("fill");
    a
}

fn write(cl: &Cluster<'_>, a: &mut DistData<f32>, v: f32) -> Result<(), ClusterError> {
    let rows = a.rows();
    cl.compute(a, 0..rows, true, "write", |_, _, mut view| {
        view.host_write()?.fill(v);
        Ok(())
    })
}

/// The fragment a `Tampered` error names, or a panic saying what came instead.
fn tampered<T: std::fmt::Debug>(outcome: &Result<T, ClusterError>) -> usize {
    match outcome {
        Err(ClusterError::Runtime { source, .. }) => match **source {
            Error::Tampered { fragment, .. } => fragment,
            ref other => panic!("not Tampered: {other}"),
        },
        other => panic!("an altered message was taken: {other:?}"),
    }
}

/// A secure buffer's rows cross the network as ciphertext (a marker repeated through the
/// plaintext appears nowhere in what rank 0 sent), and a bit flipped on the way is an error on
/// the reader naming the fragment, with the rows still not there.
#[test]
fn secure_rows_cross_as_ciphertext_and_a_flipped_bit_is_an_error_not_bytes() {
    let rows = 4;
    let marker = f32::from_bits(0x5EC2_E7A1);
    for flip in [None, Some(1500)] {
        let attack = Attack {
            flip,
            ..Attack::default()
        };
        let outcomes = on_the_wire(attack, |cl| {
            let mut a = on_rank_0(cl, rows, &SecureKey::new([3u8; 32]), marker);
            let fetched = cl.fetch(&mut a, |_| 0..rows);
            (fetched, cl.read(&a, 0..rows))
        });
        let sent = &outcomes[0].1;
        assert!(sent.len() > rows * 1024, "{flip:?}: rank 0 sent the rows");
        let pattern = marker.to_le_bytes();
        assert!(
            !sent.windows(4).any(|w| w == pattern),
            "{flip:?}: plaintext on the wire"
        );
        let (fetched, read) = &outcomes[1].0;
        match flip {
            None => {
                fetched.as_ref().expect("the fetch");
                let values = read.as_ref().expect("the rows");
                assert!(values.iter().all(|&v| v == marker));
            }
            Some(at) => {
                // Byte 1500 lies in the second 1024-byte fragment.
                assert_eq!(tampered(fetched), at / 1024);
                assert!(
                    matches!(read, Err(ClusterError::NotHere { .. })),
                    "{read:?}"
                );
            }
        }
    }
}

/// A corner turn of secure buffers whose blocks are altered on the way fails on the ranks
/// that receive them, naming the altered block, and leaves their rows of the transpose as
/// they were: the diagonal waits until every block has opened.
#[test]
fn a_sealed_corner_turn_altered_on_the_way_fails_and_changes_nothing() {
    let attack = Attack {
        flip_blocks: true,
        ..Attack::default()
    };
    let outcomes = on_the_wire(attack, |cl| {
        let key = SecureKey::new([5u8; 32]);
        let block = Distribution::BlockRows;
        let mut a = cl.alloc_secure::<f32>(4, 256, block, &key).expect("a");
        let mut t = cl.alloc_secure::<f32>(256, 4, block, &key).expect("t");
        write(cl, &mut t, -1.0).expect("fill t");
        let turned = cl.corner_turn(&mut a, &mut t);
        let mine = if cl.rank() == Rank(0) {
            0..128
        } else {
            128..256
        };
        let kept = cl.read(&t, mine).expect("own rows");
        (turned, kept)
    });
    for (rank, ((turned, kept), _)) in outcomes.into_iter().enumerate() {
        // Rank `from`'s block to `to` is numbered from · ranks + to.
        assert_eq!(tampered(&turned), (1 - rank) * 2 + rank, "rank {rank}");
        assert!(
            kept.iter().all(|&v| v == -1.0),
            "rank {rank}: its rows changed"
        );
    }
}

/// A sealed run recorded in one exchange and sent again in a later one (after the rows were
/// written anew) does not open: the seals bind the buffer's write epoch, so the reader gets an
/// error, never the old values.
#[test]
fn a_sealed_run_replayed_from_an_earlier_write_is_an_error_not_old_values() {
    let attack = Attack {
        replay: true,
        ..Attack::default()
    };
    let outcomes = on_the_wire(attack, |cl| {
        let mut a = on_rank_0(cl, 2, &SecureKey::new([9u8; 32]), 1.0);
        cl.fetch(&mut a, |_| 0..2).expect("first fetch");
        write(cl, &mut a, 2.0).expect("second write");
        let again = cl.fetch(&mut a, |_| 0..2);
        (again, cl.read(&a, 0..2))
    });
    let (again, read) = &outcomes[1].0;
    tampered(again);
    assert!(
        matches!(read, Err(ClusterError::NotHere { .. })),
        "{read:?}"
    );
}

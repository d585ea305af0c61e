//! Eight threads, a thousand random calls each, on one runtime with the CPU and two sim devices:
//! every thread works on its own rows of two shared buffers (disjoint fragment views) and all
//! of them read one shared buffer on every device. The results must equal a host-only model,
//! and the bytes per link must equal what a model of the protocol predicts — which, for the
//! shared buffer, is one copy of each fragment into each device that read it, however many
//! threads read it at once.
//!
//! `RIMMS_STRESS_CALLS` changes the calls per thread (1,000 by default).

use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use rimms::{Complex32, Device, HeteData, HeteSliceMut, LinkModel, Runtime, SimConfig, ZipOp};
use std::time::Duration;

const THREADS: usize = 8;
/// Elements per row; a row is two fragments.
const ROW: usize = 1024;
const FRAG: usize = ROW / 2;
const FRAG_BYTES: u64 = (FRAG * 8) as u64;
const DEVICES: [Device; 3] = [Device::Cpu, Device::Sim(0), Device::Sim(1)];
/// The space each device computes in: host, sim0, sim1.
const SPACE_OF_DEVICE: [usize; 3] = [0, 1, 2];
const SPACES: [&str; 3] = ["host", "sim0", "sim1"];
/// Best source first for a copy into each space. Both sims sit on the same link, so into the
/// host sim0 wins the tie, and into a sim the host does (lower space id) — except that every
/// pair of sources ties here, so the planner keeps a run of neighbouring fragments on the
/// source it started with where that source holds the next one too, and starts a run from the
/// source that holds more of what follows.
const SOURCE_ORDER: [[usize; 2]; 3] = [[1, 2], [0, 2], [0, 1]];

fn calls_per_thread() -> usize {
    std::env::var("RIMMS_STRESS_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// A seeded generator per thread, so every thread's program is reproducible.
struct Rng(TestRng);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        Rng(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }

    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }
}

/// Which spaces hold a valid copy of one fragment, as a bit set.
type Valid = u8;

/// The protocol as the thread's calls drive it: per fragment its valid spaces, and the bytes
/// each link carried.
#[derive(Default)]
struct Protocol {
    bytes: [[u64; 3]; 3],
}

impl Protocol {
    /// A read of fragment `f` of `frags` in `space`, one fragment of an access ending at
    /// fragment `end`: one copy from the best valid source if it is not there. `run` is the
    /// source the previous fragment of the same access came from, if it was copied; a new run
    /// starts from the source holding more of the fragments still to copy (every pair of
    /// sources ties here), then the best.
    fn read(
        &mut self,
        frags: &mut [Valid],
        f: usize,
        end: usize,
        space: usize,
        run: &mut Option<usize>,
    ) {
        if frags[f] & (1 << space) != 0 {
            *run = None;
            return;
        }
        let ahead = |s: usize| {
            (f..end)
                .take_while(|&g| frags[g] & (1 << space) == 0 && frags[g] & (1 << s) != 0)
                .count()
        };
        let src = match *run {
            Some(r) if frags[f] & (1 << r) != 0 => r,
            _ => SOURCE_ORDER[space]
                .into_iter()
                .filter(|s| frags[f] & (1 << s) != 0)
                .max_by_key(|&s| (ahead(s), std::cmp::Reverse(s)))
                .expect("some space holds every fragment"),
        };
        *run = Some(src);
        self.bytes[src][space] += FRAG_BYTES;
        frags[f] |= 1 << space;
    }

    /// A write of the whole fragment in `space`: every other copy becomes stale.
    fn write(frag: &mut Valid, space: usize) {
        *frag = 1 << space;
    }
}

/// What one thread's rows should hold, and the protocol state of their fragments.
struct ThreadModel {
    x: Vec<Complex32>,
    y: Vec<Complex32>,
    x_frags: [Valid; 2],
    y_frags: [Valid; 2],
    protocol: Protocol,
    /// Spaces in which this thread read the shared buffer, per fragment.
    shared_reads: [Valid; 2],
}

fn shared_values() -> Vec<Complex32> {
    // ±1 and ±i: sums and products stay exact in f32.
    (0..ROW)
        .map(|i| match i % 4 {
            0 => Complex32::new(1.0, 0.0),
            1 => Complex32::new(0.0, 1.0),
            2 => Complex32::new(-1.0, 0.0),
            _ => Complex32::new(0.0, -1.0),
        })
        .collect()
}

/// One thread's program, run against its rows and checked against its model as it goes.
fn run_thread(
    rt: &Runtime,
    seed: u64,
    shared: &HeteData<Complex32>,
    mut x: HeteSliceMut<'_, Complex32>,
    mut y: HeteSliceMut<'_, Complex32>,
) -> ThreadModel {
    let r = shared_values();
    let mut m = ThreadModel {
        x: vec![Complex32::new(seed as f32, 1.0); ROW],
        y: vec![Complex32::new(0.0, 0.0); ROW],
        x_frags: [1; 2],
        y_frags: [1; 2],
        protocol: Protocol::default(),
        shared_reads: [0; 2],
    };
    x.host_write().unwrap().copy_from_slice(&m.x);
    y.host_write().unwrap().copy_from_slice(&m.y);
    let mut rng = Rng::new(seed);
    for call in 0..calls_per_thread() {
        // The whole row, or one of its two fragments.
        let (frags, range) = match rng.below(3) {
            0 => (0..2, 0..ROW),
            1 => (0..1, 0..FRAG),
            _ => (1..2, FRAG..ROW),
        };
        let d = rng.below(3);
        let (device, space) = (DEVICES[d], SPACE_OF_DEVICE[d]);
        let context = format!("seed {seed}, call {call}, {device}");
        match rng.below(5) {
            // y = x + shared
            0 => {
                let xs = x.as_slice().slice(range.clone()).unwrap();
                let rs = shared.slice(range.clone()).unwrap();
                let mut ys = y.slice_mut(range.clone()).unwrap();
                rt.zip(device, ZipOp::Add, &xs, &rs, &mut ys)
                    .expect(&context);
                for i in range.clone() {
                    m.y[i] = m.x[i] + r[i];
                }
                let mut run = None;
                let end = frags.end;
                for f in frags {
                    m.protocol.read(&mut m.x_frags, f, end, space, &mut run);
                    m.shared_reads[f] |= 1 << space;
                    Protocol::write(&mut m.y_frags[f], space);
                }
            }
            // x = y · shared
            1 => {
                let ys = y.as_slice().slice(range.clone()).unwrap();
                let rs = shared.slice(range.clone()).unwrap();
                let mut xs = x.slice_mut(range.clone()).unwrap();
                rt.zip(device, ZipOp::Mul, &ys, &rs, &mut xs)
                    .expect(&context);
                for i in range.clone() {
                    m.x[i] = m.y[i] * r[i];
                }
                let mut run = None;
                let end = frags.end;
                for f in frags {
                    m.protocol.read(&mut m.y_frags, f, end, space, &mut run);
                    m.shared_reads[f] |= 1 << space;
                    Protocol::write(&mut m.x_frags[f], space);
                }
            }
            // x *= i, in place
            2 => {
                let mut xs = x.slice_mut(range.clone()).unwrap();
                rt.scale(device, Complex32::new(0.0, 1.0), &mut xs)
                    .expect(&context);
                for v in &mut m.x[range.clone()] {
                    *v *= Complex32::new(0.0, 1.0);
                }
                let mut run = None;
                let end = frags.end;
                for f in frags {
                    m.protocol.read(&mut m.x_frags, f, end, space, &mut run);
                    Protocol::write(&mut m.x_frags[f], space);
                }
            }
            // The host reads y and checks it.
            3 => {
                let ys = y.as_slice().slice(range.clone()).unwrap();
                assert_eq!(ys.host().unwrap(), &m.y[range.clone()], "{context}");
                let mut run = None;
                let end = frags.end;
                for f in frags {
                    m.protocol.read(&mut m.y_frags, f, end, 0, &mut run);
                }
            }
            // The host overwrites x.
            _ => {
                let value = Complex32::new(call as f32, -(seed as f32));
                x.slice_mut(range.clone())
                    .unwrap()
                    .host_write()
                    .unwrap()
                    .fill(value);
                m.x[range.clone()].fill(value);
                for f in frags {
                    Protocol::write(&mut m.x_frags[f], 0);
                }
            }
        }
    }
    assert_eq!(x.as_slice().host().unwrap(), &m.x[..], "seed {seed}: x");
    assert_eq!(y.as_slice().host().unwrap(), &m.y[..], "seed {seed}: y");
    let (mut x_run, mut y_run) = (None, None);
    for f in 0..2 {
        m.protocol.read(&mut m.x_frags, f, 2, 0, &mut x_run);
        m.protocol.read(&mut m.y_frags, f, 2, 0, &mut y_run);
    }
    m
}

#[test]
fn eight_threads_of_random_calls_match_both_models() {
    let link = LinkModel {
        latency: Duration::from_micros(2),
        bytes_per_second: 10e9,
    };
    let sim = SimConfig {
        link,
        pool_bytes: 16 << 20,
        ..SimConfig::default()
    };
    let rt = Runtime::builder()
        .host_pool(64 << 20)
        .sim(sim.clone())
        .sim(sim)
        .build()
        .unwrap();
    let shared = HeteData::from_slice(&rt, &shared_values()).unwrap();
    let mut x = HeteData::<Complex32>::alloc(&rt, THREADS * ROW).unwrap();
    let mut y = HeteData::<Complex32>::alloc(&rt, THREADS * ROW).unwrap();
    for buf in [&mut x, &mut y] {
        buf.fragment(FRAG * 8).unwrap();
    }
    let mut shared_frag = shared;
    shared_frag.fragment(FRAG * 8).unwrap();
    let shared = shared_frag;
    let models: Vec<ThreadModel> = std::thread::scope(|s| {
        let handles: Vec<_> = x
            .rows_mut(ROW)
            .unwrap()
            .into_iter()
            .zip(y.rows_mut(ROW).unwrap())
            .enumerate()
            .map(|(t, (xr, yr))| {
                let (rt, shared) = (&rt, &shared);
                s.spawn(move || run_thread(rt, 1000 + t as u64, shared, xr, yr))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut want = [[0u64; 3]; 3];
    for m in &models {
        for (from, row) in m.protocol.bytes.iter().enumerate() {
            for (to, b) in row.iter().enumerate() {
                want[from][to] += b;
            }
        }
    }
    // The shared buffer, valid only on the host: one copy per fragment into each sim that
    // read it, from the host, whichever thread got there first.
    for f in 0..2 {
        let readers = models.iter().fold(0, |acc, m| acc | m.shared_reads[f]);
        for space in [1, 2] {
            if readers & (1 << space) != 0 {
                want[0][space] += FRAG_BYTES;
            }
        }
    }
    let stats = rt.stats();
    for from in 0..3 {
        for to in 0..3 {
            assert_eq!(
                stats.bytes(SPACES[from], SPACES[to]).unwrap(),
                want[from][to],
                "bytes {} → {}",
                SPACES[from],
                SPACES[to]
            );
        }
    }
    assert!(stats.total_bytes() > 0);
    x.validate().unwrap();
    y.validate().unwrap();
}

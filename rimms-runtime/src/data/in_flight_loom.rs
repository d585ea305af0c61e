//! Loom model of copies in flight (`data::in_flight`): the real [`InFlight`] record and the real
//! buffer state behind the real [`Published`] lock and summary (so the summary a reader sees is
//! `Inner`'s own, with the in-flight mask taken out), against a copy whose link writes the
//! destination block on its own thread, as a copy engine or a GPU copy stream would. Loom
//! reports any interleaving in which a reader, a writer or an evictor touches the destination
//! (or the source) without ordering against the link's access, and the asserts catch stale
//! values: a reader seeing bytes that have not landed, the copy's bytes landing over a write.
//!
//! Two things differ from the running code, on purpose:
//! - The sim backends move a copy's bytes at once, under the buffer's lock, and only its modelled
//!   link time is in flight. Here the bytes themselves are in flight, which is the stronger case:
//!   a protocol that is right when the bytes move late is right when only the time does.
//! - `Pending` is a deadline on the wall clock, and `Instant` cannot be scheduled by loom. So the
//!   landing is an explicit event, the link's release store of `landed`, and the model's clock
//!   ([`Link::now`]) reads "the deadline has passed" exactly when that event is seen. Waiting on
//!   a `Pending` is waiting for the event. The deadlines, the mask, `before`, `settle_ahead`,
//!   `settle` and the summary are the real code's.
//!
//! The calls follow the borrow rules: a write runs alone among the calls on its bytes (but not
//! alone with the link). Run with `RUSTFLAGS="--cfg loom" cargo test -p rimms-runtime
//! --no-default-features --lib loom_model --release` (CI does).

use super::buffer::Inner;
use super::in_flight::InFlight;
use super::lease::{Held, Lease, Leases};
use super::lease_loom::{get, set};
use crate::coherence::{resident, Access, FragmentSpan, FragmentTable, Published};
use crate::hal::{SpaceId, MAX_SPACES};
use crate::space::Pending;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use std::ops::Range;
use std::time::{Duration, Instant};

const HOST: SpaceId = SpaceId::HOST;
const SIM0: SpaceId = SpaceId(1);
/// The buffer's one fragment, one byte long.
const BYTES: Range<usize> = 0..1;
/// What a freed block holds once another buffer takes its memory.
const REUSED: u32 = 0xdead;

/// The link of the one copy in flight: when it lands, and whether it has (a flag the clock
/// reads, and the same under a lock with a condition variable to wait on: a spinning waiter
/// would make loom's paths too long).
struct Link {
    issued: Instant,
    lands: Instant,
    landed: AtomicBool,
    done: Mutex<bool>,
    signal: Condvar,
}

impl Link {
    fn new() -> Link {
        let issued = Instant::now();
        Link {
            issued,
            lands: issued + Duration::from_secs(1),
            landed: AtomicBool::new(false),
            done: Mutex::new(false),
            signal: Condvar::new(),
        }
    }

    /// The model's clock: past the copy's deadline once its landing has been seen.
    fn now(&self) -> Instant {
        if self.landed.load(Ordering::Acquire) {
            self.lands
        } else {
            self.issued
        }
    }

    /// `Pending::wait`: here the only deadline is the copy's, so it waits for the landing.
    fn wait(&self, pending: Pending) {
        if pending.deadline().is_some() {
            let mut done = self.done.lock().unwrap();
            while !*done {
                done = self.signal.wait(done).unwrap();
            }
        }
    }

    /// The copy's last byte is written: it lands.
    fn land(&self) {
        let mut done = self.done.lock().unwrap();
        *done = true;
        self.landed.store(true, Ordering::Release);
        self.signal.notify_all();
    }
}

/// A buffer of one fragment with a block on the host and one on sim0, the fragment valid on
/// the host.
struct Buffer {
    leases: Leases,
    state: Published<Inner>,
    host: UnsafeCell<u32>,
    sim0: UnsafeCell<u32>,
    link: Link,
}

impl Buffer {
    fn on_host(value: u32) -> Buffer {
        let mut table = FragmentTable::new(1);
        table.mark_written(0..1, HOST);
        Buffer {
            leases: Leases::new(),
            state: Published::new(Inner {
                table,
                blocks: [None; MAX_SPACES],
                sums: None,
                seals: None,
                hidden: 0,
                in_flight: InFlight::default(),
            }),
            host: UnsafeCell::new(value),
            sim0: UnsafeCell::new(0),
            link: Link::new(),
        }
    }

    /// `prefetch_async` to sim0: plans and commits the copy under the lock and records it in
    /// flight, made ahead of its use; the link is started by the caller.
    fn prefetch_to_sim0(&self) {
        let mut inner = self.state.lock();
        let span = FragmentSpan::of(BYTES, 0, 1);
        let plan = inner
            .table
            .plan_acquire(&span, SIM0, Access::Read, |_, _| 1);
        assert_eq!(plan.moves.len(), 1, "the fragment is on the host alone");
        inner
            .in_flight
            .record(SIM0, BYTES, Pending::until(self.link.lands), true);
        inner.table.commit_acquire(&plan);
    }

    /// The link carrying the copy: reads the source, writes the destination, lands.
    fn run_link(&self) {
        set(&self.sim0, get(&self.host));
        self.link.land();
    }

    /// `RawBuffer::acquire` for `access` in `space`: the lock-free check, else plan, wait for
    /// what is in flight (outside the lock) and give the spaces' bits back once it has landed.
    fn acquire(&self, space: SpaceId, access: Access) {
        if resident(self.state.summary(), space, access) {
            return;
        }
        let (pending, in_flight) = {
            let mut inner = self.state.lock();
            let span = FragmentSpan::of(BYTES, 0, 1);
            let plan = inner.table.plan_acquire(&span, space, access, |_, _| 1);
            let pending = inner.in_flight.before(space, &BYTES, access);
            let in_flight = inner.in_flight.mask != 0;
            inner
                .in_flight
                .settle_ahead(space, &BYTES, access, |_, _, _| {});
            for m in &plan.moves {
                // A copy on demand, made under the lock as the sim's are.
                set(self.cell(space), get(self.cell(m.src)));
            }
            inner.table.commit_acquire(&plan);
            (pending, in_flight)
        };
        self.link.wait(pending);
        if in_flight {
            self.state.lock().in_flight.settle(self.link.now());
        }
    }

    /// A kernel in sim0 reading the fragment, under a lease as dispatch takes one.
    fn read_on_sim0(&self) -> u32 {
        let _lease = Lease::take(&self.leases);
        self.acquire(SIM0, Access::Read);
        get(&self.sim0)
    }

    /// A kernel or host loop in `space` overwriting the fragment (write-discard), its write
    /// marked after.
    fn overwrite(&self, space: SpaceId, value: u32) {
        let _lease = Lease::take(&self.leases);
        self.acquire(space, Access::Write);
        set(self.cell(space), value);
        self.state.lock().table.mark_written(0..1, space);
    }

    /// `RawBuffer::evict` of sim0's block: try-lock, withdraw, pass over a block in use or
    /// with a copy still landing in it, else drop the fragment there (the host holds it, so
    /// nothing is written back) and free the block, whose memory the next owner overwrites.
    fn evict_sim0(&self) -> bool {
        let Some(mut inner) = self.state.try_lock() else {
            return false;
        };
        inner.withdraw();
        if !self.leases.may_move(SIM0, Held::NONE)
            || inner.in_flight.landing_into(SIM0, self.link.now())
        {
            return false;
        }
        let plan = inner.table.plan_evict(SIM0);
        assert!(plan.write_back.is_empty(), "the host holds the fragment");
        inner.table.commit_evict(&plan, Some(HOST));
        inner.in_flight.drop_ahead(Some(SIM0), &BYTES, |_, _, _| {});
        set(&self.sim0, REUSED);
        true
    }

    /// `Drop for RawBuffer`: waits for every copy still on a link, then frees the blocks.
    fn free(&self) {
        let mut inner = self.state.lock();
        inner.in_flight.drop_ahead(None, &BYTES, |_, _, _| {});
        self.link.wait(inner.in_flight.landing());
        set(&self.sim0, REUSED);
        set(&self.host, REUSED);
    }

    fn cell(&self, space: SpaceId) -> &UnsafeCell<u32> {
        if space == HOST {
            &self.host
        } else {
            &self.sim0
        }
    }

    /// The fragment's value as a read in `space` after every thread has finished sees it.
    fn settled_value(&self, space: SpaceId) -> u32 {
        self.acquire(space, Access::Read);
        get(self.cell(space))
    }
}

/// A buffer holding 7 on the host with a prefetch to sim0 issued, and its link running.
fn prefetched() -> (Arc<Buffer>, loom::thread::JoinHandle<()>) {
    let buffer = Arc::new(Buffer::on_host(7));
    buffer.prefetch_to_sim0();
    assert!(
        !resident(buffer.state.summary(), SIM0, Access::Read),
        "a copy in flight is not resident to the fast path"
    );
    let link = {
        let b = Arc::clone(&buffer);
        loom::thread::spawn(move || b.run_link())
    };
    (buffer, link)
}

#[test]
fn loom_model_in_flight_readers_on_either_path_see_only_landed_bytes() {
    // Three threads with a lock, a condition variable and the buffer's lock each: unbounded,
    // loom takes minutes here. Three preemptions are enough for every bug this model has
    // caught (each needs one or two), and keep it to seconds.
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let (buffer, link) = prefetched();
        // The first reader takes the locked path and uses the copy made ahead; the second may
        // find the summary published by then and take the fast path.
        let first = {
            let b = Arc::clone(&buffer);
            loom::thread::spawn(move || b.read_on_sim0())
        };
        let second = buffer.read_on_sim0();
        assert_eq!(second, 7, "a reader saw bytes that had not landed");
        assert_eq!(
            first.join().unwrap(),
            7,
            "a reader saw bytes that had not landed"
        );
        link.join().unwrap();
        assert!(resident(buffer.state.summary(), SIM0, Access::Read));
        assert_eq!(
            buffer.state.lock().in_flight.mask,
            0,
            "nothing left in flight"
        );
    });
}

#[test]
fn loom_model_in_flight_a_write_to_the_destination_is_never_overwritten_by_the_copy() {
    loom::model(|| {
        let (buffer, link) = prefetched();
        buffer.overwrite(SIM0, 99);
        link.join().unwrap();
        assert_eq!(
            buffer.settled_value(SIM0),
            99,
            "the copy landed over the write"
        );
        assert_eq!(buffer.settled_value(HOST), 99);
    });
}

#[test]
fn loom_model_in_flight_a_write_to_the_source_waits_for_the_copy_and_makes_it_stale() {
    loom::model(|| {
        let (buffer, link) = prefetched();
        buffer.overwrite(HOST, 99);
        // The copy read the old bytes (or the write would have raced it); they are stale now.
        assert!(!resident(buffer.state.summary(), SIM0, Access::Read));
        link.join().unwrap();
        assert_eq!(
            buffer.settled_value(SIM0),
            99,
            "a reader saw the stale copy"
        );
    });
}

#[test]
fn loom_model_in_flight_an_eviction_or_a_free_never_frees_a_block_a_copy_lands_in() {
    loom::model(|| {
        let (buffer, link) = prefetched();
        let evicted = buffer.evict_sim0();
        if evicted {
            // Only once the copy had landed: its bytes were dropped, the host's are the value.
            assert_eq!(buffer.settled_value(SIM0), 7);
        }
        buffer.free();
        link.join().unwrap();
    });
}

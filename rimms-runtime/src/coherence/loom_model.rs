//! Loom model of the coherence state under concurrent calls: the real fragment table and
//! [`Published`] lock-and-summary, with each space's copy of each fragment a loom cell, so loom
//! reports any interleaving in which a copy or a kernel touches memory another thread uses
//! without ordering, or in which the table and the summary disagree.
//!
//! The calls follow the borrow rules `Runtime::scope` enforces: several threads may read one
//! fragment at once, and a thread writes only a fragment no other thread uses. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p rimms-runtime --lib loom_model --release`.

use super::{resident, Access, FragmentSpan, FragmentTable, Published, WithTable};
use crate::hal::{SpaceId, SpaceSet};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;

const FRAGS: usize = 2;
const SPACES: usize = 3;
const SIM0: SpaceId = SpaceId(1);
const SIM1: SpaceId = SpaceId(2);

struct Table(FragmentTable);

impl WithTable for Table {
    fn table(&self) -> &FragmentTable {
        &self.0
    }
}

/// One buffer of two one-byte fragments in three spaces, and the copies made.
struct Buffer {
    state: Published<Table>,
    memory: [[UnsafeCell<u32>; FRAGS]; SPACES],
    copies: AtomicUsize,
}

impl Buffer {
    /// Fragment `f` holds `values[f]` on the host and nowhere else.
    fn on_host(values: [u32; FRAGS]) -> Buffer {
        let mut table = FragmentTable::new(FRAGS);
        table.mark_written(0..FRAGS, SpaceId::HOST);
        let memory = std::array::from_fn(|space| {
            std::array::from_fn(|f| UnsafeCell::new(if space == 0 { values[f] } else { 0 }))
        });
        Buffer {
            state: Published::new(Table(table)),
            memory,
            copies: AtomicUsize::new(0),
        }
    }

    /// What dispatch does before a kernel: the lock-free check, else plan, copy and commit
    /// under the lock.
    fn acquire(&self, frags: std::ops::Range<usize>, space: SpaceId, access: Access) {
        if resident(self.state.summary(), space, access) {
            return;
        }
        let mut locked = self.state.lock();
        let span = FragmentSpan::of(frags, 0, FRAGS);
        let plan = locked.0.plan_acquire(&span, space, access, |_, _| 1);
        for m in &plan.moves {
            for f in m.frags.clone() {
                let value = self.memory[m.src.index()][f].with(|p| unsafe { *p });
                self.memory[space.index()][f].with_mut(|p| unsafe { *p = value });
                self.copies.fetch_add(1, Ordering::Relaxed);
            }
        }
        locked.0.commit_acquire(&plan);
    }

    /// A kernel in `space` reading fragment `frag`.
    fn read(&self, frag: usize, space: SpaceId) -> u32 {
        self.acquire(frag..frag + 1, space, Access::Read);
        self.memory[space.index()][frag].with(|p| unsafe { *p })
    }

    /// A kernel in `space` reading the whole buffer: the call whose acquire can take the
    /// lock-free path once another thread's copies are published.
    fn read_all(&self, space: SpaceId) -> [u32; FRAGS] {
        self.acquire(0..FRAGS, space, Access::Read);
        std::array::from_fn(|f| self.memory[space.index()][f].with(|p| unsafe { *p }))
    }

    /// A kernel in `space` overwriting fragment `frag`, then the mark.
    fn write(&self, frag: usize, space: SpaceId, value: u32) {
        self.acquire(frag..frag + 1, space, Access::Write);
        self.memory[space.index()][frag].with_mut(|p| unsafe { *p = value });
        self.state.lock().0.mark_written(frag..frag + 1, space);
    }

    fn valid(&self, frag: usize) -> SpaceSet {
        self.state
            .lock()
            .0
            .get(frag)
            .map_or(SpaceSet::EMPTY, |s| s.valid)
    }

    fn summary_matches_table(&self) -> bool {
        let locked = self.state.lock();
        self.state.summary() == locked.0.summary()
    }
}

#[test]
fn loom_model_concurrent_readers_of_a_whole_buffer_copy_it_once() {
    loom::model(|| {
        let buffer = Arc::new(Buffer::on_host([10, 20]));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let b = Arc::clone(&buffer);
                loom::thread::spawn(move || b.read_all(SIM0))
            })
            .collect();
        for r in readers {
            // A reader that found the summary published reads without the lock; loom reports
            // a race if the summary does not order the other reader's copies before that.
            assert_eq!(r.join().unwrap(), [10, 20]);
        }
        assert_eq!(buffer.copies.load(Ordering::Relaxed), 2);
        assert!(resident(buffer.state.summary(), SIM0, Access::Read));
        assert!(buffer.summary_matches_table());
    });
}

#[test]
fn loom_model_two_readers_and_a_writer_of_another_fragment() {
    loom::model(|| {
        let buffer = Arc::new(Buffer::on_host([10, 20]));
        let readers: Vec<_> = [SIM0, SIM0]
            .into_iter()
            .map(|space| {
                let b = Arc::clone(&buffer);
                loom::thread::spawn(move || b.read(0, space))
            })
            .collect();
        let writer = {
            let b = Arc::clone(&buffer);
            loom::thread::spawn(move || b.write(1, SIM1, 99))
        };
        for r in readers {
            assert_eq!(r.join().unwrap(), 10);
        }
        writer.join().unwrap();
        // Two concurrent reads of one fragment on one device: one copy.
        assert_eq!(buffer.copies.load(Ordering::Relaxed), 1);
        assert_eq!(
            buffer.valid(0),
            SpaceSet::EMPTY.with(SpaceId::HOST).with(SIM0)
        );
        assert_eq!(buffer.valid(1), SpaceSet::EMPTY.with(SIM1));
        assert!(buffer.summary_matches_table());
        assert_eq!(buffer.read(1, SpaceId::HOST), 99);
    });
}

#[test]
fn loom_model_fast_path_reader_while_another_fragment_is_written() {
    loom::model(|| {
        // Both fragments valid on sim0 too, so a read there may take the lock-free path.
        let buffer = Arc::new(Buffer::on_host([10, 20]));
        buffer.read(0, SIM0);
        buffer.read(1, SIM0);
        let reader = {
            let b = Arc::clone(&buffer);
            loom::thread::spawn(move || b.read(0, SIM0))
        };
        let writer = {
            let b = Arc::clone(&buffer);
            loom::thread::spawn(move || b.write(1, SIM1, 99))
        };
        assert_eq!(reader.join().unwrap(), 10);
        writer.join().unwrap();
        assert_eq!(buffer.copies.load(Ordering::Relaxed), 2);
        assert_eq!(buffer.valid(1), SpaceSet::EMPTY.with(SIM1));
        assert!(!resident(buffer.state.summary(), SIM0, Access::Read));
        assert!(buffer.summary_matches_table());
    });
}

//! Loom model of the lease handshake (`data::lease`): the real [`Leases`] word and the real
//! [`Published`] lock and summary, against an evictor and a window mover, with each space's
//! copy of the one fragment a loom cell. Loom reports any interleaving in which a holder reads
//! or writes block memory that a mover writes without ordering between them (a freed block
//! reused, a write-back over a writer's bytes), and the asserts catch stale values.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p rimms-runtime --no-default-features --lib
//! loom_model --release` (CI does).

use super::lease::{Held, Lease, Leases};
use crate::coherence::{resident, Access, FragmentSpan, FragmentTable, Published, WithTable};
use crate::hal::SpaceId;
use loom::cell::UnsafeCell;
use loom::sync::Arc;

const SIM0: SpaceId = SpaceId(1);
/// What a freed block holds once another buffer takes its memory.
const REUSED: u32 = 0xdead;

struct Table(FragmentTable);

impl WithTable for Table {
    fn table(&self) -> &FragmentTable {
        &self.0
    }
}

/// A buffer of one fragment with a block on the host and one on sim0.
struct Buffer {
    leases: Leases,
    state: Published<Table>,
    host: UnsafeCell<u32>,
    sim0: UnsafeCell<u32>,
}

impl Buffer {
    /// The fragment's only valid copy, `value`, is on sim0.
    fn on_sim0(value: u32) -> Buffer {
        let mut table = FragmentTable::new(1);
        table.mark_written(0..1, SIM0);
        Buffer {
            leases: Leases::new(),
            state: Published::new(Table(table)),
            host: UnsafeCell::new(0),
            sim0: UnsafeCell::new(value),
        }
    }

    /// A kernel on sim0 reading the fragment, as dispatch does: lease, lock-free check, else
    /// the locked path (which brings the host's copy back to sim0 where sim0 lost it).
    fn read_on_sim0(&self) -> u32 {
        let _lease = Lease::take(&self.leases);
        if !resident(self.state.summary(), SIM0, Access::Read) {
            let mut locked = self.state.lock();
            let span = FragmentSpan::of(0..1, 0, 1);
            let plan = locked.0.plan_acquire(&span, SIM0, Access::Read, |_, _| 1);
            if !plan.moves.is_empty() {
                // Under the buffer's lock, as every copy is.
                set(&self.sim0, get(&self.host));
            }
            locked.0.commit_acquire(&plan);
        }
        get(&self.sim0)
    }

    /// A host loop overwriting the fragment (write-discard: nothing copied in), its write
    /// recorded after, as `RawBuffer::host_acquire` and `HostWrite` do.
    fn overwrite_on_host(&self, value: u32) {
        let lease = Lease::take(&self.leases);
        {
            let mut locked = self.state.lock();
            let span = FragmentSpan::of(0..1, 0, 1);
            let plan = locked
                .0
                .plan_acquire(&span, SpaceId::HOST, Access::Write, |_, _| 1);
            locked.0.commit_acquire(&plan);
        }
        set(&self.host, value);
        self.state.lock().0.mark_written(0..1, SpaceId::HOST);
        drop(lease);
    }

    /// An eviction of sim0's block (by another buffer's allocation): try-lock, withdraw, look
    /// at the leases, then write back the last copy and free the block, whose memory the next
    /// owner overwrites.
    fn evict_sim0(&self) -> bool {
        let Some(mut locked) = self.state.try_lock() else {
            return false;
        };
        locked.withdraw();
        if !self.leases.may_move(SIM0, Held::NONE) {
            return false;
        }
        let plan = locked.0.plan_evict(SIM0);
        if !plan.write_back.is_empty() {
            set(&self.host, get(&self.sim0));
        }
        locked.0.commit_evict(&plan, Some(SpaceId::HOST));
        set(&self.sim0, REUSED);
        true
    }

    /// A call holding a lease of its own moving sim0's block (a window that grows or is
    /// retired for it): allowed only when no other lease is out.
    fn move_sim0_holding_a_lease(&self) -> bool {
        let _mine = Lease::take(&self.leases);
        let locked = self.state.lock();
        locked.withdraw();
        if !self.leases.may_move(SIM0, Held::ONE) {
            return false;
        }
        // The bytes go to a new block; the old block's memory is reused.
        let value = get(&self.sim0);
        set(&self.sim0, REUSED);
        set(&self.sim0, value);
        drop(locked);
        true
    }

    fn host_value(&self) -> u32 {
        let _locked = self.state.lock();
        get(&self.host)
    }
}

/// A block's bytes, read (the copy-in-flight model's blocks too).
pub(super) fn get(cell: &UnsafeCell<u32>) -> u32 {
    // SAFETY: a loom cell: loom checks this access against every other access to the cell
    // and fails the model on one that is not ordered with it, which is what the model tests.
    cell.with(|p| unsafe { *p })
}

/// A block's bytes, written.
pub(super) fn set(cell: &UnsafeCell<u32>, value: u32) {
    // SAFETY: as in `get`.
    cell.with_mut(|p| unsafe { *p = value });
}

#[test]
fn loom_model_lease_an_eviction_never_frees_a_block_a_leased_reader_uses() {
    loom::model(|| {
        let buffer = Arc::new(Buffer::on_sim0(7));
        let reader = {
            let b = Arc::clone(&buffer);
            loom::thread::spawn(move || b.read_on_sim0())
        };
        let evicted = buffer.evict_sim0();
        assert_eq!(reader.join().unwrap(), 7, "the reader saw its own bytes");
        if evicted {
            assert_eq!(buffer.host_value(), 7, "the last copy was written back");
        }
    });
}

#[test]
fn loom_model_lease_an_eviction_never_writes_back_over_a_host_writer() {
    loom::model(|| {
        let buffer = Arc::new(Buffer::on_sim0(7));
        let writer = {
            let b = Arc::clone(&buffer);
            loom::thread::spawn(move || b.overwrite_on_host(99))
        };
        buffer.evict_sim0();
        writer.join().unwrap();
        assert_eq!(buffer.host_value(), 99, "the writer's value is the newest");
        let valid = buffer.state.lock().0.get(0).map(|s| s.valid);
        assert_eq!(valid, Some(crate::space::SpaceSet::only(SpaceId::HOST)));
    });
}

#[test]
fn loom_model_lease_a_mover_counts_only_its_own_lease() {
    loom::model(|| {
        let buffer = Arc::new(Buffer::on_sim0(7));
        let reader = {
            let b = Arc::clone(&buffer);
            loom::thread::spawn(move || b.read_on_sim0())
        };
        buffer.move_sim0_holding_a_lease();
        assert_eq!(reader.join().unwrap(), 7);
    });
}

//! Log events raised under a buffer's lock wait until the thread holds no buffer's lock.
//!
//! A `tracing` subscriber is the program's code, and the program may call back into the
//! runtime from it: read the buffer whose copy it is told of, or write its own trace through a
//! runtime. Copies and evictions happen under the lock of the buffer they serve (and an
//! eviction under the evicting buffer's too), so an event emitted where it happens would run
//! the subscriber under those locks, and a subscriber touching the same buffer would deadlock
//! on its own thread. So every lock of a buffer's table comes with an [`AfterLocks`] guard
//! (`data::buffer`), events go through [`emit`], and while any guard lives on a thread its
//! events wait in a thread-local queue; the last guard to go, after its lock is released,
//! emits them in the order they were raised.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

type Event = Box<dyn FnOnce()>;

thread_local! {
    /// Guards alive on this thread.
    static HELD: Cell<usize> = const { Cell::new(0) };
    /// Whether `WAITING` holds anything: a flag without a destructor, so that a guard's release
    /// with nothing to emit touches no lazily initialised thread-local.
    static ANY_WAITING: Cell<bool> = const { Cell::new(false) };
    static WAITING: RefCell<Vec<Event>> = const { RefCell::new(Vec::new()) };
}

/// While alive, this thread's events wait (see the module docs). Not `Send`: it counts on the
/// thread that made it.
pub(crate) struct AfterLocks {
    _this_thread: PhantomData<*const ()>,
}

impl AfterLocks {
    pub(crate) fn hold() -> AfterLocks {
        HELD.with(|held| held.set(held.get() + 1));
        AfterLocks {
            _this_thread: PhantomData,
        }
    }
}

impl Drop for AfterLocks {
    fn drop(&mut self) {
        let left = HELD.with(|held| {
            let left = held.get() - 1;
            held.set(left);
            left
        });
        // While unwinding, a subscriber that panicked again would abort the process: the
        // events wait for the next guard's release instead.
        if left == 0 && ANY_WAITING.with(Cell::get) && !std::thread::panicking() {
            emit_waiting();
        }
    }
}

/// Runs `event` now, or, if this thread holds a guard, when its last guard goes.
pub(crate) fn emit(event: impl FnOnce() + 'static) {
    if HELD.with(Cell::get) == 0 {
        event();
    } else {
        WAITING.with(|waiting| waiting.borrow_mut().push(Box::new(event)));
        ANY_WAITING.with(|any| any.set(true));
    }
}

fn emit_waiting() {
    // Taken out first: an event's subscriber may lock buffers and raise events of its own,
    // which its own guards emit as they go.
    let events = WAITING.with(|waiting| std::mem::take(&mut *waiting.borrow_mut()));
    ANY_WAITING.with(|any| any.set(false));
    for event in events {
        event();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn log_to(log: &Rc<RefCell<Vec<u32>>>, n: u32) -> impl FnOnce() + 'static {
        let log = log.clone();
        move || log.borrow_mut().push(n)
    }

    #[test]
    fn events_wait_for_the_last_guard_and_keep_their_order() {
        let log = Rc::new(RefCell::new(Vec::new()));
        emit(log_to(&log, 1));
        assert_eq!(*log.borrow(), [1], "with no guard an event runs at once");
        let outer = AfterLocks::hold();
        emit(log_to(&log, 2));
        let inner = AfterLocks::hold();
        emit(log_to(&log, 3));
        drop(inner);
        assert_eq!(*log.borrow(), [1], "an outer guard still holds them");
        drop(outer);
        assert_eq!(*log.borrow(), [1, 2, 3]);
        emit(log_to(&log, 4));
        assert_eq!(*log.borrow(), [1, 2, 3, 4]);
    }

    #[test]
    fn an_event_may_raise_events_under_guards_of_its_own() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let guard = AfterLocks::hold();
        let (inner_log, nested) = (log.clone(), log_to(&log, 2));
        emit(move || {
            inner_log.borrow_mut().push(1);
            let _again = AfterLocks::hold();
            emit(nested);
            assert_eq!(
                *inner_log.borrow(),
                [1],
                "nested events wait for the nested guard"
            );
        });
        drop(guard);
        assert_eq!(*log.borrow(), [1, 2]);
    }

    #[test]
    fn a_guard_dropped_while_unwinding_leaves_its_events_for_the_next() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let queued = log_to(&log, 1);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = AfterLocks::hold();
            emit(queued);
            panic!("under a buffer's lock");
        }));
        assert!(unwound.is_err());
        assert!(log.borrow().is_empty());
        drop(AfterLocks::hold());
        assert_eq!(*log.borrow(), [1]);
    }
}

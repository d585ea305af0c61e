//! A job's borrows, kept where the language's aliasing rules do not protect them.
//!
//! A reference passed to a function, or held in a value passed to it, must stay valid until
//! the function returns (Miri's "protectors"; LLVM's `dereferenceable` on arguments). A
//! scope's job breaks that on purpose: the closure a queue runs holds the job, and so its
//! `'scope` borrows, and calls `ScopeState::finish` as its last step, after which the scope
//! may return and its borrows end, while the closure has not yet returned. `std::thread`'s
//! spawn meets the same end of a scoped thread the same way: what may dangle is kept in a
//! `MaybeUninit`, whose contents are not retagged on a call.

use std::mem::{ManuallyDrop, MaybeUninit};

/// A `T` that may hold references that dangle while it is passed around, though never once
/// [`MaybeDangling::into_inner`] has given it back (or it is dropped).
pub(super) struct MaybeDangling<T>(MaybeUninit<T>);

impl<T> MaybeDangling<T> {
    pub(super) fn new(value: T) -> Self {
        MaybeDangling(MaybeUninit::new(value))
    }

    pub(super) fn into_inner(self) -> T {
        let this = ManuallyDrop::new(self);
        // SAFETY: `new` initialised it and nothing takes it out but this, which consumes
        // `self` without running its `Drop`, so the value is read once.
        unsafe { this.0.assume_init_read() }
    }
}

impl<T> Drop for MaybeDangling<T> {
    fn drop(&mut self) {
        // SAFETY: initialised by `new`, and still there: `into_inner` does not drop `self`.
        unsafe { self.0.assume_init_drop() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// The value comes back whole, and is dropped once either way.
    #[test]
    fn the_value_comes_back_or_is_dropped_once() {
        let counted = Rc::new(());
        let kept = MaybeDangling::new((Rc::clone(&counted), 7));
        assert_eq!(Rc::strong_count(&counted), 2);
        let (back, seven) = kept.into_inner();
        assert_eq!((Rc::strong_count(&counted), seven), (2, 7));
        drop(back);
        assert_eq!(Rc::strong_count(&counted), 1);
        drop(MaybeDangling::new(Rc::clone(&counted)));
        assert_eq!(Rc::strong_count(&counted), 1);
    }
}

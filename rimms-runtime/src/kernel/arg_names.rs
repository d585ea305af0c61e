//! Naming a kernel argument in an error without carrying its name through the call.
//!
//! A kernel's arguments cross dispatch on every call, and an argument's name is two words that
//! only an error ever reads. So a failed cast or a bad device slice names its argument by
//! position ("argument 2"), and dispatch, which holds the call's [`KernelArg`]s, swaps the real
//! name in on the way out. The happy path carries nothing extra; an error that escapes some
//! other way still says which argument it was.

use super::dispatch::KernelArg;
use crate::hal::Error;

/// How many arguments a call may have; dispatch asserts it at compile time.
pub(crate) const MAX_ARGS: usize = 32;

/// The stand-in names, one per position. An error carries one of these very strings until
/// dispatch recognises it, by address rather than by text, so a name a user chose is left
/// alone.
static POSITIONS: [&str; MAX_ARGS] = [
    "argument 0",
    "argument 1",
    "argument 2",
    "argument 3",
    "argument 4",
    "argument 5",
    "argument 6",
    "argument 7",
    "argument 8",
    "argument 9",
    "argument 10",
    "argument 11",
    "argument 12",
    "argument 13",
    "argument 14",
    "argument 15",
    "argument 16",
    "argument 17",
    "argument 18",
    "argument 19",
    "argument 20",
    "argument 21",
    "argument 22",
    "argument 23",
    "argument 24",
    "argument 25",
    "argument 26",
    "argument 27",
    "argument 28",
    "argument 29",
    "argument 30",
    "argument 31",
];

/// The stand-in name of the argument at `position`.
pub(crate) fn by_position(position: u8) -> &'static str {
    // Dispatch makes at most `MAX_ARGS` arguments, so the fallback is never taken; it keeps a
    // wrong position from panicking in an error path.
    POSITIONS
        .get(usize::from(position))
        .copied()
        .unwrap_or("an argument")
}

/// `error` with a stand-in argument name replaced by the name `args` gives that position.
#[cold]
pub(crate) fn name_argument<const N: usize>(mut error: Error, args: &[KernelArg<'_>; N]) -> Error {
    if let Error::ArgumentType { arg, .. } = &mut error {
        let position = POSITIONS.iter().position(|p| std::ptr::eq(*p, *arg));
        if let Some(named) = position.and_then(|i| args.get(i)) {
            *arg = named.name;
        }
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_distinct_and_say_which() {
        for (i, p) in POSITIONS.iter().enumerate() {
            assert_eq!(*p, format!("argument {i}"));
            assert_eq!(by_position(i as u8), *p);
        }
        assert_eq!(by_position(MAX_ARGS as u8), "an argument");
    }
}

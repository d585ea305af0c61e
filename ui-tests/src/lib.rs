//! Nothing to link: this package holds the trybuild cases of `rimms` (`pass/`, `fail/`) and
//! their runner, `tests/ui.rs`.

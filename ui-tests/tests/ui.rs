//! Compile-time checks of the macros and types: every case in `fail/` must fail with the
//! reviewed message in its `.stderr`; every case in `pass/` must compile.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
    t.compile_fail("fail/*.rs");
}

//! Compile-time checks of the macros and types: every case in `ui-tests/fail` must fail with
//! the reviewed message in its `.stderr`; every case in `ui-tests/pass` must compile.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui-tests/pass/*.rs");
    t.compile_fail("ui-tests/fail/*.rs");
}

//! A raw pointer is refused by its type, not by its spelling: behind an alias or an `Option`.
type P = *const u32;

#[rimms::kernel(device = cpu)]
fn aliased(p: P, y: &mut [u32]) {
    let _ = (p, y);
}

#[rimms::kernel(device = cpu)]
fn wrapped(p: Option<*mut u32>, y: &mut [u32]) {
    let _ = (p, y);
}

#[rimms::api]
fn declared(p: P, y: &mut [u32]);

fn main() {}

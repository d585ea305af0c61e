// The API overwrites `out` unread; an implementation that forgets `#[out]` is told to add it.
#[rimms::api]
pub fn power(x: &[f32], #[out] out: &mut [f32]);

#[rimms::kernel(api = power, device = cpu)]
fn power_host(x: &[f32], out: &mut [f32]) {
    let _ = (x, out);
}

fn main() {}

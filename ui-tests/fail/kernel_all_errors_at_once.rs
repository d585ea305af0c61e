// Every mistake of a kernel is reported by one build: the attribute's and the signature's.
#[rimms::api]
fn scale(a: f32, x: &mut [f32]);

#[rimms::kernel(api = scale, device = [tpu, sim(1)])]
fn scale_sim(a: f32, p: *mut f32, x: &mut [f32]) {
    let _ = (a, p, x);
}

fn main() {}

// `auto` places calls; an implementation of an API names the kinds it is written for.
#[rimms::api]
fn halve(#[out] y: &mut [f32]);

#[rimms::kernel(api = halve, device = auto)]
fn halve_anywhere(y: &mut [f32]) {
    y.fill(0.5);
}

fn main() {}

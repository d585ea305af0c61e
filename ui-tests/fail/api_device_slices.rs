// APIs are declared with host slices; device slices are an implementation's form.
#[allow(unused_imports)]
use rimms::DevSlice;

#[rimms::api]
fn halve(x: DevSlice<f32>, #[out] y: &mut [f32]);

fn main() {}

//! A device kernel's slice of its argument lives for the call only: it cannot be kept and
//! handed to the device after the call's copies and marks are done.
use rimms::{DevSliceMut, KernelCtx};
use std::sync::Mutex;

#[rimms::api]
fn keep_device_slice(y: &mut [u32]);

static KEPT: Mutex<Option<DevSliceMut<'static, u32>>> = Mutex::new(None);

#[rimms::kernel(api = keep_device_slice, device = sim)]
fn keep_device_slice_sim(_ctx: &KernelCtx<'_>, y: DevSliceMut<'_, u32>) {
    *KEPT.lock().unwrap() = Some(y);
}

fn main() {}

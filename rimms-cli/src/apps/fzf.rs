//! FZF: FFT → ZIP (multiply by a filter) → inverse FFT, the chain the RIMMS paper measures.
//! It is the 2FFT chain with its filter step switched on, so the code is [`two_fft`]'s; this
//! module makes the input.
//!
//! [`two_fft`]: super::two_fft

use super::two_fft::signal;
pub use super::two_fft::{run, Input, Params};

/// The FZF input for `params`: the 2FFT signal and a filter that is written once and stays
/// on the device from frame to frame.
pub fn generate(params: Params) -> Input {
    Input {
        filter: Some(signal(params.points * params.rows, 99)),
        ..Input::generate(params)
    }
}

//! The FFT core (Xilinx FFT LogiCORE, PG109, as in CEDR's ZCU102 image).
//!
//! Floating point, natural order, 8 to 2,048 points (power of two), one frame per DMA packet:
//! `N` complex f32 values (re, im interleaved, `8·N` bytes) in through MM2S, `N` out through
//! S2MM. The core does **not** scale the inverse transform by 1/N; the runtime's `fft` API does,
//! so the board facade multiplies the output by 1/N on the CPU after the transfer (see
//! [`super::board`]).
//!
//! The core takes a 24-bit configuration word before each transform: log2 N in bits 4:0 and
//! the direction in bit 8 (1 = forward, 0 = inverse). DESIGN.md does not say how the word
//! reaches the core's configuration channel; **this backend's convention** is that it is a
//! 32-bit register in the accelerator's *control page* at [`DEFAULT_CONFIG_OFFSET`] (0x00,
//! e.g. the data register of an AXI GPIO driving `s_axis_config_tdata`, configurable per
//! instance as `config_offset`), and that the core latches it when the next frame starts.
//! The driver writes it before every transform, even when it did not change, so a core that
//! was reset in between never runs with a stale size. The emulator reads the same register
//! when a frame arrives.

use super::axi_dma::{AxiDma, Channel};
use super::regs::RegisterPage;
use crate::{Error, FftDirection, Result};

/// Smallest transform the core does.
pub const FFT_MIN_POINTS: usize = 8;
/// Largest transform the core does (the image's configuration).
pub const FFT_MAX_POINTS: usize = 2048;
/// Default offset of the configuration register in the control page.
pub const DEFAULT_CONFIG_OFFSET: usize = 0x00;
/// Direction bit of the configuration word.
pub const CONFIG_FORWARD: u32 = 1 << 8;
/// log2 N field of the configuration word.
pub const CONFIG_NFFT_MASK: u32 = 0x1F;

/// Bytes of one complex f32 point.
pub const POINT_BYTES: usize = 8;

/// The configuration word for an `n`-point transform, `None` unless `n` is a power of two.
pub fn config_word(dir: FftDirection, n: usize) -> Option<u32> {
    if !n.is_power_of_two() {
        return None;
    }
    let fwd = match dir {
        FftDirection::Forward => CONFIG_FORWARD,
        FftDirection::Inverse => 0,
    };
    Some(n.trailing_zeros() | fwd)
}

/// Decodes a configuration word into (points, forward?); `None` outside 8..=2048 points.
pub fn decode_config(word: u32) -> Option<(usize, bool)> {
    let log2 = word & CONFIG_NFFT_MASK;
    let n = 1usize.checked_shl(log2)?;
    if !(FFT_MIN_POINTS..=FFT_MAX_POINTS).contains(&n) {
        return None;
    }
    Some((n, word & CONFIG_FORWARD != 0))
}

/// One FFT core's control side.
#[derive(Debug)]
pub struct FftIp {
    name: String,
    ctrl: RegisterPage,
    config_offset: usize,
    max_points: usize,
}

impl FftIp {
    /// Wraps the core's control page. `max_points` is clamped to the core's 2,048.
    pub fn new(name: &str, ctrl: RegisterPage, config_offset: usize, max_points: usize) -> Self {
        Self {
            name: name.to_owned(),
            ctrl,
            config_offset,
            max_points: max_points.min(FFT_MAX_POINTS),
        }
    }

    /// The largest transform this instance accepts.
    pub fn max_points(&self) -> usize {
        self.max_points
    }

    /// The control page.
    pub fn ctrl(&self) -> &RegisterPage {
        &self.ctrl
    }

    /// Where the configuration word goes.
    pub fn config_offset(&self) -> usize {
        self.config_offset
    }

    /// Refuses sizes the core cannot transform, as [`Error::Unsupported`] (the runtime can
    /// fall back to the CPU).
    pub fn check(&self, n: usize) -> Result<()> {
        if !n.is_power_of_two() || n < FFT_MIN_POINTS || n > self.max_points {
            return Err(Error::Unsupported {
                api: "fft",
                device: self.name.clone(),
                why: format!(
                    "the FFT core transforms powers of two from {FFT_MIN_POINTS} to {} points, not {n}",
                    self.max_points
                ),
            });
        }
        Ok(())
    }

    /// One `n`-point transform of the frame at physical address `input` into `output` (they
    /// may be equal). Unscaled: the inverse is `N` times the runtime's. Checks the size and both
    /// buffers before writing any register, then writes the configuration word and runs the
    /// DMA to completion.
    pub fn transform(
        &self,
        dma: &AxiDma,
        dir: FftDirection,
        n: usize,
        input: u64,
        output: u64,
    ) -> Result<()> {
        self.check(n)?;
        let bytes = n * POINT_BYTES;
        dma.check_buffer(Channel::Mm2s, input, bytes)?;
        dma.check_buffer(Channel::S2mm, output, bytes)?;
        // `check` made `n` a power of two in range, so the word exists.
        let word = config_word(dir, n).unwrap_or(0);
        dma.ensure_ready()?;
        self.ctrl.write32(self.config_offset, word)?;
        dma.transfer(input, bytes, output, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_words_follow_the_core_layout() {
        assert_eq!(config_word(FftDirection::Forward, 256), Some(0x108));
        assert_eq!(config_word(FftDirection::Inverse, 2048), Some(11));
        assert_eq!(config_word(FftDirection::Forward, 100), None);
        assert_eq!(decode_config(0x103), Some((8, true)));
        assert_eq!(decode_config(11), Some((2048, false)));
        assert_eq!(decode_config(12), None, "4096 points is past the core");
        assert_eq!(decode_config(2), None, "4 points is below the core");
    }
}

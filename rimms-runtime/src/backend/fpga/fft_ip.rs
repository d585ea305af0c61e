//! The FFT core (Xilinx FFT, PG109) as CEDR's images instantiate it, and its reset.
//!
//! The core takes a 24-bit configuration word before each transform: log2 N in bits 4:0 and
//! the direction in bit 8 (1 = forward, 0 = inverse), on its AXI-Stream config channel. How
//! the word reaches that channel depends on the image, and the board configuration says which
//! ([`FftConfigPath`]):
//!
//! - **GPIO** (CEDR's ZCU102 images, `FFT_CONFIG_VIA_GPIO` in CEDR's `platform.h`): an AXI GPIO
//!   in the control page whose channel 1 (data 0x00, tri 0x04) drives the 1-bit `tvalid` and
//!   channel 2 (data 0x08, tri 0x0C) drives `tdata`. The sequence (CEDR's `config_fft`): both
//!   tri registers to 0 (outputs), the word to 0x08, `tvalid` = 1 at 0x00, a short delay,
//!   `tvalid` = 0. The delay here is a read of the GPIO, which cannot complete before the write
//!   before it has reached the block: a bus round trip, far more than the core's few cycles.
//! - **Register** (CEDR's `fft_axi_config` IP): one write of the word to `config_offset`.
//!
//! Writing the word to 0x00 of a GPIO image, as this driver once did, drives `tvalid` with the
//! word's bit 0: an odd log2 N pushes whatever 0x08 holds (power-on 0: an 8-point inverse), an
//! even one pushes nothing and the core keeps its power-on 2,048-point forward config.
//!
//! The driver writes the word before every transform, even when it did not change, so a core
//! that was reset in between never runs with a stale size.
//!
//! **Reset.** Each FFT on CEDR's images has a reset GPIO (`FFT_GPIO_RESET_BASE_ADDRS`) whose
//! channel 1 drives the active-low reset of the core *and* its DMA (CEDR's
//! `reset_fft_and_dma`: tri 0x04 = 0, data 0x00 = 0, a short hold, data = 1). A DMA soft reset
//! alone leaves a partial frame inside the core after a fault, which shifts every later frame;
//! [`FftIp::hard_reset`] is used at open and after every fault.

use super::axi_dma::{AxiDma, Channel};
use super::config::FftConfigPath;
use super::fault::{unsupported, Result};
use super::regs::RegisterPage;
use crate::hal::FftDirection;

/// Smallest transform the core does.
pub const FFT_MIN_POINTS: usize = 8;
/// Largest transform the core does (the image's configuration).
pub const FFT_MAX_POINTS: usize = 2048;
/// Default offset of the configuration register in the control page (register path).
pub const DEFAULT_CONFIG_OFFSET: usize = 0x00;
/// Config GPIO channel 1 data: `tvalid`.
pub const GPIO_DATA1: usize = 0x00;
/// Config GPIO channel 1 tri-state control (0 = output).
pub const GPIO_TRI1: usize = 0x04;
/// Config GPIO channel 2 data: `tdata`, the config word.
pub const GPIO_DATA2: usize = 0x08;
/// Config GPIO channel 2 tri-state control (0 = output).
pub const GPIO_TRI2: usize = 0x0C;
/// Reset GPIO data (bit 0, active low).
pub const RESET_DATA: usize = 0x00;
/// Reset GPIO tri-state control.
pub const RESET_TRI: usize = 0x04;
/// The core's configuration at power-on and after reset: 2,048-point forward.
pub const POWER_ON_CONFIG: u32 = 11 | CONFIG_FORWARD;
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
    path: FftConfigPath,
    config_offset: usize,
    reset: Option<RegisterPage>,
    max_points: usize,
}

impl FftIp {
    /// Wraps the core's control page and, if it has one, its reset GPIO. `config_offset` is
    /// used on the register path only; `max_points` is clamped to the core's 2,048.
    pub fn new(
        name: &str,
        ctrl: RegisterPage,
        path: FftConfigPath,
        config_offset: usize,
        reset: Option<RegisterPage>,
        max_points: usize,
    ) -> Self {
        Self {
            name: name.to_owned(),
            ctrl,
            path,
            config_offset,
            reset,
            max_points: max_points.min(FFT_MAX_POINTS),
        }
    }

    /// How the configuration word is written.
    pub fn config_path(&self) -> FftConfigPath {
        self.path
    }

    /// The reset GPIO's page, if the board has one.
    pub fn reset_page(&self) -> Option<&RegisterPage> {
        self.reset.as_ref()
    }

    /// Pulses the reset GPIO: core and DMA both reset (active low, held across a read-back).
    /// Returns false, writing nothing, when the board has no reset GPIO.
    pub fn hard_reset(&self) -> Result<bool> {
        let Some(r) = &self.reset else {
            return Ok(false);
        };
        r.write32(RESET_TRI, 0)?;
        r.write32(RESET_DATA, 0)?;
        // The read cannot complete before the write above has reached the GPIO: the hold.
        r.read32(RESET_DATA)?;
        r.write32(RESET_DATA, 1)?;
        tracing::debug!(fft = %self.name, "FFT core and DMA reset through the reset GPIO");
        Ok(true)
    }

    /// Pushes one configuration word into the core's config channel.
    pub fn write_config(&self, word: u32) -> Result<()> {
        match self.path {
            FftConfigPath::Register => self.ctrl.write32(self.config_offset, word),
            FftConfigPath::Gpio => {
                self.ctrl.write32(GPIO_TRI1, 0)?;
                self.ctrl.write32(GPIO_TRI2, 0)?;
                self.ctrl.write32(GPIO_DATA2, word)?;
                self.ctrl.write32(GPIO_DATA1, 1)?;
                // The delay with tvalid high: a read-back, a bus round trip.
                self.ctrl.read32(GPIO_DATA1)?;
                self.ctrl.write32(GPIO_DATA1, 0)
            }
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

    /// Where the configuration word goes on the register path.
    pub fn config_offset(&self) -> usize {
        self.config_offset
    }

    /// Refuses sizes the core cannot transform, as [`BackendError::Unsupported`](crate::hal::BackendError::Unsupported) (the runtime can
    /// fall back to the CPU).
    pub fn check(&self, n: usize) -> Result<()> {
        if !n.is_power_of_two() || n < FFT_MIN_POINTS || n > self.max_points {
            return Err(unsupported(
                &self.name,
                "fft",
                format!(
                    "the FFT core transforms powers of two from {FFT_MIN_POINTS} to {} points, not {n}",
                    self.max_points
                ),
            ));
        }
        Ok(())
    }

    /// One `n`-point transform of the frame at physical address `input` into `output` (they
    /// may be equal). Unscaled: the inverse is `N` times the runtime's. Checks the size and both
    /// buffers before writing any register, then writes the configuration word and runs the
    /// DMA to completion. The caller has made the engine ready (core and DMA reset after any
    /// fault).
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
        self.write_config(word)?;
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

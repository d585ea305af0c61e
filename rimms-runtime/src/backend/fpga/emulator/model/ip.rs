//! The cores' side of the model: the FFT core's config channel and frame assembly, the ZIP
//! core's registers, and what one MM2S packet becomes at each (the packets the core puts on
//! its output stream, and the rules the packet broke).

use std::collections::VecDeque;

use rustfft::FftPlanner;

use super::super::{cores, Rule};
use crate::backend::fpga::config::FftConfigPath;
use crate::backend::fpga::fft_ip::{
    CONFIG_FORWARD, CONFIG_NFFT_MASK, FFT_MAX_POINTS, FFT_MIN_POINTS, POWER_ON_CONFIG,
};

/// The FFT core's side: config channel, frame assembly.
pub(super) struct FftCore {
    pub(super) path: FftConfigPath,
    pub(super) config_offset: usize,
    /// GPIO registers: data 1 (tvalid), tri 1, data 2 (tdata), tri 2.
    pub(super) gpio: [u32; 4],
    pub(super) queue: VecDeque<u32>,
    pub(super) current: u32,
    /// The frame being assembled: its points and direction.
    pub(super) frame: Option<(usize, bool)>,
    pub(super) buf: Vec<u8>,
    pub(super) planner: FftPlanner<f32>,
}

impl FftCore {
    pub(super) fn reset(&mut self) {
        self.queue.clear();
        self.current = POWER_ON_CONFIG;
        self.frame = None;
        self.buf.clear();
    }
}

/// The ZIP core's side: its two registers.
pub(super) struct ZipCore {
    pub(super) size: u32,
    pub(super) op: u32,
    pub(super) max_floats: usize,
}

pub(super) enum Core {
    Fft(Box<FftCore>),
    Zip(ZipCore),
}
/// Decodes a config word as the core applies it: log2 N clamped to the core's range.
fn apply_config(word: u32, notes: &mut Vec<(Rule, String)>) -> (usize, bool) {
    let log2 = word & CONFIG_NFFT_MASK;
    let (lo, hi) = (
        FFT_MIN_POINTS.trailing_zeros(),
        FFT_MAX_POINTS.trailing_zeros(),
    );
    let used = log2.clamp(lo, hi);
    if used != log2 {
        notes.push((
            Rule::FftConfigClamped,
            format!("config word {word:#x} asks for log2 N = {log2}; the core clamps it to {used} ({} points)", 1usize << used),
        ));
    }
    (1usize << used, word & CONFIG_FORWARD != 0)
}

/// One MM2S packet into the FFT core: frames of N points as configured when each starts; a
/// packet that ends inside a frame leaves the rest of that frame to come from the next one.
pub(super) fn fft_packet(
    f: &mut FftCore,
    input: &[u8],
    notes: &mut Vec<(Rule, String)>,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (n, fwd) = match f.frame {
            Some(fr) => fr,
            None => {
                // A queued word is reported once, when the core takes it.
                let fr = match f.queue.pop_front() {
                    Some(word) => {
                        f.current = word;
                        apply_config(word, notes)
                    }
                    None => apply_config(f.current, &mut Vec::new()),
                };
                f.frame = Some(fr);
                fr
            }
        };
        let need = n * 8 - f.buf.len();
        let take = need.min(rest.len());
        f.buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if f.buf.len() == n * 8 {
            if out.is_empty() && !rest.is_empty() {
                notes.push((
                    Rule::FftFrameLength,
                    format!("an MM2S packet of {} bytes holds more than one {n}-point frame (event_tlast_missing)", input.len()),
                ));
            }
            out.push(cores::fft(&mut f.planner, n, fwd, &f.buf));
            f.buf.clear();
            f.frame = None;
        }
    }
    if !f.buf.is_empty() {
        let (n, _) = f.frame.unwrap_or((0, false));
        notes.push((
            Rule::FftFrameLength,
            format!(
                "the MM2S packet ended {} points into a {n}-point frame (event_tlast_unexpected): no output, and the rest of the frame will come from the next packet",
                f.buf.len() / 8
            ),
        ));
    }
    out
}

/// One MM2S packet into the ZIP core.
pub(super) fn zip_packet(
    z: &ZipCore,
    input: &[u8],
    notes: &mut Vec<(Rule, String)>,
) -> Vec<Vec<u8>> {
    let size = z.size as usize;
    if size == 0 || size > z.max_floats {
        notes.push((
            Rule::ZipOverCapacity,
            format!(
                "ZIP size {size} floats is outside the core's 1..={} floats per input",
                z.max_floats
            ),
        ));
        return Vec::new();
    }
    if input.len() != 8 * size {
        notes.push((
            Rule::ZipPacketLength,
            format!(
                "ZIP packet of {} bytes for size {size}: the core takes exactly {} (input 0 then input 1)",
                input.len(),
                8 * size
            ),
        ));
        if input.len() < 8 * size {
            return Vec::new();
        }
    }
    cores::zip(z.size, z.op, &input[..8 * size])
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> FftCore {
        FftCore {
            path: FftConfigPath::Gpio,
            config_offset: 0,
            gpio: [0; 4],
            queue: VecDeque::new(),
            current: POWER_ON_CONFIG,
            frame: None,
            buf: Vec::new(),
            planner: FftPlanner::new(),
        }
    }

    /// `n` complex points, the k-th = (k + 1, 0), as bytes.
    fn ramp(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|k| [(k + 1) as f32, 0.0])
            .flat_map(f32::to_ne_bytes)
            .collect()
    }

    fn first(bytes: &[u8]) -> (f32, f32) {
        let f = |i: usize| f32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        (f(0), f(4))
    }

    #[test]
    fn power_on_is_a_2048_point_forward_transform() {
        let mut c = core();
        let mut notes = Vec::new();
        // Bin 0 of a forward or inverse unscaled FFT is the plain sum: 1 + 2 + … + N.
        let out = fft_packet(&mut c, &ramp(2048), &mut notes);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 2048 * 8);
        assert_eq!(first(&out[0]), ((2048 * 2049 / 2) as f32, 0.0));
        assert!(notes.is_empty());
    }

    #[test]
    fn config_words_queue_and_out_of_range_sizes_clamp() {
        let mut c = core();
        let mut notes = Vec::new();
        // 0 (log2 N = 0: clamped to 8 points, inverse), then 12 (clamped to 2048, inverse),
        // then 16 points forward: each frame takes the next word.
        c.queue.extend([0, 12, 4 | CONFIG_FORWARD]);
        let out = fft_packet(&mut c, &ramp(8), &mut notes);
        assert_eq!((out.len(), out[0].len()), (1, 64));
        // The 8-point inverse of the ramp: bin 1 = Σ (k+1) e^{+2πik/8} = -4 - 4·(1+√2)j.
        let b1 = {
            let f = |i: usize| {
                f32::from_ne_bytes([out[0][i], out[0][i + 1], out[0][i + 2], out[0][i + 3]])
            };
            (f(8), f(12))
        };
        let want_im = -4.0 * (1.0 + 2f32.sqrt());
        assert!(
            (b1.0 + 4.0).abs() < 1e-4 && (b1.1 - want_im).abs() < 1e-4,
            "{b1:?}"
        );
        let out = fft_packet(&mut c, &ramp(2048), &mut notes);
        assert_eq!(out[0].len(), 2048 * 8);
        let out = fft_packet(&mut c, &ramp(16), &mut notes);
        assert_eq!((out[0].len(), first(&out[0])), (128, (136.0, 0.0)));
        let rules: Vec<Rule> = notes.iter().map(|(r, _)| *r).collect();
        assert_eq!(rules, [Rule::FftConfigClamped, Rule::FftConfigClamped]);
        // With the queue empty the last word stays in force.
        notes.clear();
        let out = fft_packet(&mut c, &ramp(16), &mut notes);
        assert_eq!(out[0].len(), 128);
        assert!(notes.is_empty());
    }

    #[test]
    fn short_and_long_packets_carry_into_the_next_frame() {
        let mut c = core();
        let mut notes = Vec::new();
        c.queue.push_back(3 | CONFIG_FORWARD); // 8 points
                                               // 5 points: no output, the frame waits for 3 more.
        assert!(fft_packet(&mut c, &ramp(5), &mut notes).is_empty());
        assert_eq!(notes.len(), 1);
        // 11 more: completes the frame with the first 3 of them (1+2+3+4+5 + 1+2+3 = 21), then
        // 8 points more make a second frame (4..=11: 60).
        let out = fft_packet(&mut c, &ramp(11), &mut notes);
        assert_eq!(out.len(), 2);
        assert_eq!(first(&out[0]).0, 21.0);
        assert_eq!(first(&out[1]).0, 60.0);
        let rules: Vec<Rule> = notes.iter().map(|(r, _)| *r).collect();
        assert_eq!(rules, [Rule::FftFrameLength, Rule::FftFrameLength]);
    }
}

//! What the emulated cores compute from one input packet.
//!
//! FFT: rustfft, no 1/N on the inverse, exactly as the hardware core. ZIP: the five operations
//! of the HLS core on native-endian f32.

use rustfft::num_complex::Complex32;
use rustfft::{FftDirection, FftPlanner};

use crate::backend::fpga::zip_ip::ZipCoreOp;

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn to_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// One whole frame of `n` points (`8n` bytes, assembled by the model) through the core.
pub(crate) fn fft(planner: &mut FftPlanner<f32>, n: usize, forward: bool, input: &[u8]) -> Vec<u8> {
    let f = floats(input);
    let mut data: Vec<Complex32> = (0..n)
        .map(|k| {
            let re = f.get(2 * k).copied().unwrap_or(0.0);
            let im = f.get(2 * k + 1).copied().unwrap_or(0.0);
            Complex32::new(re, im)
        })
        .collect();
    let dir = if forward {
        FftDirection::Forward
    } else {
        FftDirection::Inverse
    };
    planner.plan_fft(n, dir).process(&mut data);
    let out: Vec<f32> = data.iter().flat_map(|c| [c.re, c.im]).collect();
    to_bytes(&out)
}

/// One packet through the ZIP core: `size` floats of input 0, then `size` of input 1, out
/// `size` floats. `None` (the core waits for more data) when the packet is shorter than
/// `2 · size` floats or `size` is 0. An unknown operation code gives zeros.
pub(crate) fn zip(size: u32, op: u32, input: &[u8]) -> Option<Vec<u8>> {
    let size = size as usize;
    let f = floats(input);
    if size == 0 || f.len() < 2 * size {
        return None;
    }
    let (a, b) = (&f[..size], &f[size..2 * size]);
    let mut out = vec![0.0f32; size];
    match ZipCoreOp::from_code(op) {
        Some(ZipCoreOp::Add) => out
            .iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = a[i] + b[i]),
        Some(ZipCoreOp::Sub) => out
            .iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = a[i] - b[i]),
        Some(ZipCoreOp::Mul) => out
            .iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = a[i] * b[i]),
        Some(ZipCoreOp::Div) => out
            .iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = a[i] / b[i]),
        Some(ZipCoreOp::ComplexMul) => {
            for k in 0..size / 2 {
                let (ar, ai, br, bi) = (a[2 * k], a[2 * k + 1], b[2 * k], b[2 * k + 1]);
                out[2 * k] = ar * br - ai * bi;
                out[2 * k + 1] = ar * bi + ai * br;
            }
        }
        None => {}
    }
    Some(to_bytes(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zip_ops_and_short_packets() {
        let input = to_bytes(&[1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0]);
        let run = |op| floats(&zip(4, op, &input).unwrap());
        assert_eq!(run(0), [11.0, 22.0, 33.0, 44.0]);
        assert_eq!(run(1), [-9.0, -18.0, -27.0, -36.0]);
        assert_eq!(run(2), [10.0, 40.0, 90.0, 160.0]);
        assert_eq!(run(3), [0.1, 0.1, 0.1, 0.1]);
        // (1+2i)(10+20i) = -30+40i, (3+4i)(30+40i) = -70+240i
        assert_eq!(run(4), [-30.0, 40.0, -70.0, 240.0]);
        assert_eq!(run(9), [0.0; 4]);
        assert_eq!(
            zip(5, 0, &input),
            None,
            "a packet shorter than 2·size waits"
        );
    }

    #[test]
    fn fft_of_an_impulse_is_flat() {
        let mut p = FftPlanner::new();
        let mut x = vec![0.0f32; 16];
        x[0] = 1.0;
        let y = floats(&fft(&mut p, 8, true, &to_bytes(&x)));
        assert!(y.chunks(2).all(|c| c == [1.0, 0.0]), "{y:?}");
    }
}

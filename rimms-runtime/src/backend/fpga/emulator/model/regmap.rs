//! The AXI DMA's register map as the core shows it on reads (PG021, AXI DMA v7.1, simple
//! mode): which offsets exist, which DMACR bits hold what is written, and the reset values.
//!
//! - **DMACR.** RS (bit 0), Keyhole (3), Cyclic BD Enable (4), IOC / Dly / Err IrqEn (12–14),
//!   IRQThreshold (23:16) and IRQDelay (31:24) hold what was written; bit 1 is reserved and
//!   always reads 1; the other reserved bits (5–11, 15) read 0; Reset (bit 2) reads 1 while a
//!   soft reset is in progress and clears itself. Reset value `0x0001_0002`.
//! - **Offsets.** Per channel DMACR, DMASR, SA / DA, SA_MSB / DA_MSB, LENGTH; everything else
//!   (0x08–0x14, 0x20–0x24, 0x2C and the S2MM equivalents: the scatter-gather registers, absent
//!   in simple mode) is reserved and reads 0 whatever is written.
//! - **SA_MSB / DA_MSB** exist only when the address width is over 32 bits; on a 32-bit
//!   configuration they read 0 and a write there is ignored.
//! - **LENGTH** is `c_sg_length_width` bits wide (the board's `dma_length_bits`): it reads back
//!   masked to that width (a wider value is also a driver error the model records). S2MM
//!   LENGTH reads the bytes received once a transfer completes.

use crate::backend::fpga::axi_dma::Channel;

/// DMACR after reset: IRQThreshold = 1 in bits 23:16, bit 1 reads 1.
pub(crate) const DMACR_RESET_VALUE: u32 = 0x0001_0002;
/// DMACR bit 1: reserved, always reads 1.
pub(super) const DMACR_ONE: u32 = 1 << 1;
/// DMACR bits that hold what is written (RS, Keyhole, Cyclic BD, the three IrqEn, IRQThreshold,
/// IRQDelay).
pub(super) const DMACR_WRITABLE: u32 = 0xFFFF_0000 | 0x7000 | 0x19;

/// A channel's register, by its offset from the channel's DMACR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reg {
    Cr,
    Sr,
    Addr,
    AddrMsb,
    Length,
}

/// The channel and register at byte offset `off` of the DMA page; `None` for a reserved offset.
pub(super) fn dma_reg(off: usize) -> Option<(Channel, Reg)> {
    let (ch, rel) = if (Channel::S2mm.base()..Channel::S2mm.base() + 0x30).contains(&off) {
        (Channel::S2mm, off - Channel::S2mm.base())
    } else if off < Channel::S2mm.base() {
        (Channel::Mm2s, off)
    } else {
        return None;
    };
    let reg = match rel {
        0x00 => Reg::Cr,
        0x04 => Reg::Sr,
        0x18 => Reg::Addr,
        0x1C => Reg::AddrMsb,
        0x28 => Reg::Length,
        _ => return None,
    };
    Some((ch, reg))
}

/// What DMACR reads when the channel holds `cr` (as masked on write) and a reset is or is not
/// in progress.
pub(super) fn dmacr_read(cr: u32, resetting: bool) -> u32 {
    let reset = if resetting {
        crate::backend::fpga::axi_dma::DMACR_RESET
    } else {
        0
    };
    (cr & DMACR_WRITABLE) | DMACR_ONE | reset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_names_every_simple_mode_register_and_nothing_else() {
        let named: Vec<usize> = (0..0x100)
            .step_by(4)
            .filter(|&o| dma_reg(o).is_some())
            .collect();
        assert_eq!(
            named,
            [0x00, 0x04, 0x18, 0x1C, 0x28, 0x30, 0x34, 0x48, 0x4C, 0x58]
        );
        assert_eq!(dma_reg(0x58), Some((Channel::S2mm, Reg::Length)));
        assert_eq!(dmacr_read(0, false), 0x2);
        assert_eq!(dmacr_read(0xFFFF_FFFF, true), 0xFFFF_701F);
        assert_eq!(dmacr_read(DMACR_RESET_VALUE, false), DMACR_RESET_VALUE);
    }
}

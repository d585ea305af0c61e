//! One page of memory-mapped control registers.
//!
//! An AXI block's registers appear at a physical address. Userspace reaches them by mapping a
//! page of `/dev/mem` at that address (opened `O_SYNC`, so the mapping is uncached device
//! memory), or map N of a UIO device (offset N × page size); the emulator hands out a plain
//! file of one page instead. [`RegisterPage`] owns that mapping and is the only place in the
//! backend that turns it into pointers: every access is a 32-bit `read_volatile` /
//! `write_volatile` at a bounds- and alignment-checked offset.
//!
//! Each write is preceded and each read followed by a full fence (as Linux's `writel` /
//! `readl` carry barriers): data the CPU wrote to the u-dma-buf is visible before the register
//! write that starts a DMA.
//!
//! An emulated page (its block names a `bus_log`) sends every write through the emulator's
//! [`BusLog`] instead of storing it, so the emulator sees each write once and in order, as a
//! block on the AXI bus would; a read first waits until the emulator has handled the page's
//! writes (AXI orders a read after earlier writes to the same slave). The page holds what the
//! emulated block shows there, and only the emulator writes it.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::OFlag;

use super::buslog::{BusLog, BusWrite};
use super::config::RegisterBlock;
use super::fault::{file_error, FpgaFault, Result};

/// A mapped register page.
#[derive(Debug)]
pub struct RegisterPage {
    device: String,
    path: PathBuf,
    offset: u64,
    map: MmapRaw,
    len: usize,
    /// The emulator's bus and this page's tag on it.
    bus: Option<(Arc<BusLog>, u16)>,
    /// The ticket of this page's last write on the bus: a read waits until it is handled.
    last_write: AtomicU64,
    /// Modelled (write, read) access times, emulator with a timing model only.
    model: Option<(Duration, Duration)>,
}

impl RegisterPage {
    /// Maps `len` bytes of `path` at byte `offset` (a physical address for `/dev/mem`, N × page
    /// size for map N of a UIO device, 0 for an emulator page file). `device` names the block
    /// in errors. `len` must be a non-zero multiple of 4.
    pub fn open(device: &str, path: &Path, offset: u64, len: usize) -> Result<Self> {
        if len == 0 || len % 4 != 0 {
            return Err(file_error(
                device,
                path,
                format!("register page length {len} is not a non-zero multiple of 4"),
            ));
        }
        // memmap2 maps a page-unaligned `offset` from the page below it and returns a pointer
        // `offset % page_size` bytes into that page. Every register pointer is that pointer plus
        // a multiple of 4, so it is aligned for `u32` only if `offset` is: a board file's
        // `offset = 0xA000_0002` would otherwise make every volatile access below undefined
        // behaviour.
        if offset % 4 != 0 {
            return Err(file_error(
                device,
                path,
                format!("register page offset {offset:#x} is not 4-byte aligned"),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(OFlag::O_SYNC.bits())
            .open(path)
            .map_err(|e| file_error(device, path, format!("cannot open register page: {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| file_error(device, path, format!("cannot stat: {e}")))?;
        // A regular file must cover the page, or an access past its end raises SIGBUS.
        if meta.is_file() && meta.len() < offset.saturating_add(len as u64) {
            return Err(file_error(
                device,
                path,
                format!(
                    "file has {} bytes, too short for a {len}-byte register page at offset {offset:#x}",
                    meta.len()
                ),
            ));
        }
        let map = MmapOptions::new()
            .offset(offset)
            .len(len)
            .map_raw(&file)
            .map_err(|e| {
                file_error(
                    device,
                    path,
                    format!("mmap of {len} bytes at offset {offset:#x} failed: {e}"),
                )
            })?;
        Ok(Self {
            device: device.to_owned(),
            path: path.to_owned(),
            offset,
            map,
            len,
            bus: None,
            last_write: AtomicU64::new(0),
            model: None,
        })
    }

    /// Maps the page a configured block names, with its bus log if it has one.
    pub fn open_block(device: &str, block: &RegisterBlock) -> Result<Self> {
        let mut page = Self::open(device, &block.path, block.offset, block.len)?;
        if let Some(log) = &block.bus_log {
            page.bus = Some((Arc::new(BusLog::open(device, log)?), block.bus_tag));
        }
        page.model = block
            .model_access_ns
            .map(|[w, r]| (Duration::from_nanos(w), Duration::from_nanos(r)));
        Ok(page)
    }

    /// The block's name, as used in errors.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The file mapped.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The offset in that file (the physical address for `/dev/mem`).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: empty pages are refused at open.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, off: usize) -> Result<*mut u32> {
        let why = if off % 4 != 0 {
            "not 4-byte aligned"
        } else if off.checked_add(4).is_none_or(|end| end > self.len) {
            "outside the page"
        } else {
            // SAFETY: `off + 4 <= len`, so the pointer stays inside the mapping.
            return Ok(unsafe { self.map.as_mut_ptr().add(off) }.cast::<u32>());
        };
        Err(FpgaFault::Register {
            offset: off,
            len: self.len,
            why,
        }
        .on(&self.device))
    }

    /// Reads the 32-bit register at byte offset `off`.
    pub fn read32(&self, off: usize) -> Result<u32> {
        let p = self.check(off)?;
        if let Some((log, _)) = &self.bus {
            log.wait_handled(&self.device, self.last_write.load(Ordering::Acquire))?;
        }
        // SAFETY: `p` is inside the mapping (checked), 4-byte aligned (the mapping starts
        // `offset % page_size` bytes past a page boundary, a multiple of 4 since `open` refuses
        // any other `offset`, and `off % 4 == 0`), and the mapping lives as long as `self`.
        let v = unsafe { p.read_volatile() };
        fence(Ordering::SeqCst);
        if let Some((_, read)) = self.model {
            if POLL_READS
                .with(|n| n.get().map(|k| n.set(Some(k + 1))))
                .is_none()
            {
                take_time(read);
            }
        }
        Ok(v)
    }

    /// Writes `value` to the 32-bit register at byte offset `off`.
    pub fn write32(&self, off: usize, value: u32) -> Result<()> {
        let p = self.check(off)?;
        fence(Ordering::SeqCst);
        if let Some((log, tag)) = &self.bus {
            // `check` bounded `off` by the page length, which the configuration keeps far
            // below 2^32.
            let offset = u32::try_from(off).unwrap_or(u32::MAX);
            let ticket = log.append(
                &self.device,
                BusWrite {
                    tag: *tag,
                    offset,
                    value,
                },
            )?;
            self.last_write.fetch_max(ticket, Ordering::AcqRel);
        } else {
            // SAFETY: as in `read32`.
            unsafe { p.write_volatile(value) };
        }
        if let Some((write, _)) = self.model {
            take_time(write);
        }
        Ok(())
    }

    /// Runs one evaluation of a poll's condition: its register reads are counted, not charged
    /// (the reads of a wait overlap the transfer the emulator has already charged; how many
    /// there are depends on this machine's speed). Returns `f`'s result and the reads counted.
    pub fn polled<T>(f: impl FnOnce() -> T) -> (T, u32) {
        let outer = POLL_READS.with(|n| n.replace(Some(0)));
        let out = f();
        let reads = POLL_READS.with(|n| n.replace(outer)).unwrap_or(0);
        (out, reads)
    }

    /// Charges `reads` modelled register reads (the last evaluation of a wait, which the board
    /// makes once the event has happened).
    pub fn charge_reads(&self, reads: u32) {
        if let Some((_, read)) = self.model {
            take_time(read * reads);
        }
    }
}

thread_local! {
    /// Inside [`RegisterPage::polled`]: the reads counted so far.
    static POLL_READS: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// A modelled access time: charged to the virtual clock when it runs, else waited out.
fn take_time(d: Duration) {
    if crate::vclock::is_on() {
        crate::vclock::charge(crate::vclock::Term::Register, d);
    } else {
        spin_for(d);
    }
}

/// Busy-waits `d`: modelled bus times are far below a sleep's granularity.
fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_checked_and_values_land_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page");
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        let page = RegisterPage::open("blk", &path, 0, 4096).unwrap();
        page.write32(0x58, 0xDEAD_BEEF).unwrap();
        assert_eq!(page.read32(0x58).unwrap(), 0xDEAD_BEEF);
        for bad in [0x59, 4096, 4094, usize::MAX - 1] {
            match page
                .read32(bad)
                .map_err(|e| e.fpga_fault().map(|(_, f)| f.clone()))
            {
                Err(Some(FpgaFault::Register { offset, .. })) => assert_eq!(offset, bad),
                other => panic!("offset {bad:#x}: {other:?}"),
            }
            assert!(page.write32(bad, 1).is_err());
        }
        drop(page);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[0x58..0x5C], &0xDEAD_BEEFu32.to_ne_bytes());
    }

    #[test]
    fn a_short_file_or_bad_length_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page");
        std::fs::write(&path, vec![0u8; 100]).unwrap();
        let e = RegisterPage::open("blk", &path, 0, 4096).unwrap_err();
        assert!(e.to_string().contains("too short"), "{e}");
        assert!(RegisterPage::open("blk", &path, 0, 6).is_err());
        let e = RegisterPage::open("blk", &dir.path().join("none"), 0, 4096).unwrap_err();
        assert!(e.to_string().contains("none"), "{e}");
    }

    /// A block's `offset` comes from the user's board file. memmap2 maps a page-unaligned
    /// offset from the page below and hands back `base + offset % page`, so an offset that is
    /// not a multiple of 4 used to give a mapping whose every register pointer was misaligned
    /// for `u32`: `read_volatile` / `write_volatile` on it is undefined behaviour (a debug
    /// build aborts on the precondition check). It must be refused at open.
    #[test]
    fn an_offset_that_would_misalign_the_registers_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page");
        std::fs::write(&path, vec![0u8; 2 * 4096]).unwrap();
        for bad in [1u64, 2, 3, 0x1002] {
            let e = RegisterPage::open("blk", &path, bad, 16).unwrap_err();
            assert!(e.to_string().contains("aligned"), "offset {bad:#x}: {e}");
        }
        // A 4-byte aligned offset that is not page aligned is fine: the registers stay aligned.
        let page = RegisterPage::open("blk", &path, 0x1004, 16).unwrap();
        page.write32(0x8, 0x1234_5678).unwrap();
        assert_eq!(page.read32(0x8).unwrap(), 0x1234_5678);
        drop(page);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[0x100C..0x1010], &0x1234_5678u32.to_ne_bytes());
    }
}

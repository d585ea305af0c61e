//! The emulator's register bus: an ordered log of every register write.
//!
//! On a board, each store to a register page is one AXI-Lite write, and the block sees the
//! writes in the order they were made: a DMA that is given RS, then SA, then LENGTH back to
//! back starts with that address; a GPIO pulsed 1 then 0 sees a rising edge. An emulator that
//! only *samples* a register file sees neither: two writes between samples collapse into the
//! last value, and a pulse vanishes. So an emulated register page also appends every write to
//! this log, a shared file the emulator reads in order. The log is the emulator's bus; a board
//! has none (its [`RegisterBlock`](super::config::RegisterBlock)s name no `bus_log`).
//!
//! Layout: a 64-byte header (`reserved`: the next index a writer claims, `consumed`: how far the
//! emulator has read), then [`LOG_SLOTS`] slots of two `u64`: a sequence number (`index + 1`
//! once the slot holds entry `index`) and the entry (`tag << 48 | offset << 32 | value`, the tag
//! naming the page). Writers claim an index with `fetch_add`, so several threads (and processes)
//! may write; the emulator reads slot after slot, waiting for each sequence number, so it sees
//! every write exactly once, in claim order. A writer that finds the log full waits (bounded)
//! for the emulator to catch up.
//!
//! The emulator counts the writes it has *handled* (header word `handled`); a register page
//! waits (bounded) for its own last write to be handled before it reads, as AXI orders a read
//! after the writes to the same slave: the read sees the register as the block left it after
//! those writes (DMACR's reset bit set, a masked LENGTH), never a value the driver stored
//! itself. Writes are posted: a run of writes does not wait for the emulator between them.
//! The emulator is the only writer of an emulated register page; a driver's store would race
//! with the emulator's updates (an update could overwrite a store it had not yet seen, and the
//! register then kept the wrong value for good). While no emulator reads the log (`closed` set
//! when it stops), a read does not wait.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

use super::fault::{file_error, FpgaFault, Result};

/// Entries the log holds before writers wait.
pub const LOG_SLOTS: usize = 4096;
const HEADER_BYTES: usize = 64;
/// Bytes of a log file.
pub const LOG_BYTES: usize = HEADER_BYTES + LOG_SLOTS * 16;
/// How long a writer waits for room, or for its write to be handled, before it reports the
/// emulator as gone.
const FULL_WAIT: Duration = Duration::from_secs(2);
/// Polls a writer spins before it yields while waiting for its write to be handled.
const ACK_SPINS: u32 = 200;

/// One logged write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusWrite {
    /// The page it went to (the `tag` of its register block).
    pub tag: u16,
    /// Byte offset in the page.
    pub offset: u32,
    /// The value written.
    pub value: u32,
}

impl BusWrite {
    fn encode(self) -> u64 {
        (u64::from(self.tag) << 48)
            | (u64::from(self.offset & 0xFFFF) << 32)
            | u64::from(self.value)
    }

    fn decode(word: u64) -> Self {
        Self {
            tag: (word >> 48) as u16,
            offset: ((word >> 32) & 0xFFFF) as u32,
            value: word as u32,
        }
    }
}

/// A mapped log file.
#[derive(Debug)]
pub struct BusLog {
    map: MmapRaw,
}

impl BusLog {
    /// Creates (or empties) a log file at `path`.
    pub fn create(path: &Path) -> std::io::Result<()> {
        let f = std::fs::File::create(path)?;
        f.set_len(LOG_BYTES as u64)
    }

    /// Maps an existing log file; `device` names the block in errors.
    pub fn open(device: &str, path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| file_error(device, path, format!("cannot open the bus log: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| file_error(device, path, format!("cannot stat the bus log: {e}")))?
            .len();
        if len < LOG_BYTES as u64 {
            return Err(file_error(
                device,
                path,
                format!("bus log has {len} bytes, needs {LOG_BYTES}"),
            ));
        }
        let map = MmapOptions::new()
            .len(LOG_BYTES)
            .map_raw(&file)
            .map_err(|e| file_error(device, path, format!("cannot map the bus log: {e}")))?;
        Ok(Self { map })
    }

    fn word(&self, index: usize) -> &AtomicU64 {
        debug_assert!(index * 8 + 8 <= LOG_BYTES);
        // SAFETY: every caller passes an index below LOG_BYTES / 8 (the header words 0 and 1,
        // or a slot index reduced modulo LOG_SLOTS), so the 8 bytes lie inside the mapping,
        // which is page aligned and therefore 8-byte aligned at every multiple of 8. The file is
        // only ever accessed through these atomics, by every process that maps it.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(index * 8).cast::<u64>()) }
    }

    fn reserved(&self) -> &AtomicU64 {
        self.word(0)
    }

    fn consumed(&self) -> &AtomicU64 {
        self.word(1)
    }

    fn handled(&self) -> &AtomicU64 {
        self.word(2)
    }

    fn closed(&self) -> &AtomicU64 {
        self.word(3)
    }

    fn slot(&self, index: u64) -> (&AtomicU64, &AtomicU64) {
        let s = (index % LOG_SLOTS as u64) as usize;
        let base = HEADER_BYTES / 8 + 2 * s;
        (self.word(base), self.word(base + 1))
    }

    /// Appends one write (the driver side) and returns its ticket for
    /// [`wait_handled`](Self::wait_handled). Waits, bounded, while the log is full.
    pub fn append(&self, device: &str, w: BusWrite) -> Result<u64> {
        let index = self.reserved().fetch_add(1, Ordering::AcqRel);
        let start = Instant::now();
        while index - self.consumed().load(Ordering::Acquire) >= LOG_SLOTS as u64 {
            if start.elapsed() > FULL_WAIT {
                return Err(FpgaFault::Timeout {
                    what: "the emulator to take register writes (its bus log stayed full)".into(),
                    waited: start.elapsed(),
                }
                .on(device));
            }
            thread::yield_now();
        }
        let (seq, entry) = self.slot(index);
        entry.store(w.encode(), Ordering::Relaxed);
        seq.store(index + 1, Ordering::Release);
        Ok(index + 1)
    }

    /// Waits (bounded) until the emulator has handled every write up to `ticket` (the write's
    /// response), unless no emulator reads the log.
    pub fn wait_handled(&self, device: &str, ticket: u64) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        while self.handled().load(Ordering::Acquire) < ticket
            && self.closed().load(Ordering::Acquire) == 0
        {
            if start.elapsed() > FULL_WAIT {
                return Err(FpgaFault::Timeout {
                    what: "the emulator to handle a register write".into(),
                    waited: start.elapsed(),
                }
                .on(device));
            }
            spins = spins.saturating_add(1);
            if spins < ACK_SPINS {
                std::hint::spin_loop();
            } else {
                thread::yield_now();
            }
        }
        Ok(())
    }

    /// The emulator has acted on every write it has taken with [`next`](Self::next).
    pub fn mark_handled(&self) {
        let c = self.consumed().load(Ordering::Acquire);
        self.handled().store(c, Ordering::Release);
    }

    /// The emulator stops (or starts) reading: writers do not (or do) wait for handling.
    pub fn set_closed(&self, closed: bool) {
        self.closed().store(u64::from(closed), Ordering::Release);
    }

    /// The next write in order, if it has been made (the emulator side).
    pub fn next(&self) -> Option<BusWrite> {
        let index = self.consumed().load(Ordering::Acquire);
        let (seq, entry) = self.slot(index);
        if seq.load(Ordering::Acquire) != index + 1 {
            return None;
        }
        let w = BusWrite::decode(entry.load(Ordering::Relaxed));
        self.consumed().store(index + 1, Ordering::Release);
        Some(w)
    }

    /// Writes claimed but not yet read by the emulator.
    pub fn backlog(&self) -> u64 {
        self.reserved()
            .load(Ordering::Acquire)
            .saturating_sub(self.consumed().load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_come_out_once_in_order_across_wraps() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bus");
        BusLog::create(&p).unwrap();
        let (w, r) = (
            BusLog::open("t", &p).unwrap(),
            BusLog::open("t", &p).unwrap(),
        );
        let mut seen = Vec::new();
        for i in 0..(3 * LOG_SLOTS as u32) {
            w.append(
                "t",
                BusWrite {
                    tag: (i % 7) as u16,
                    offset: (i * 4) & 0xFFC,
                    value: i,
                },
            )
            .unwrap();
            if i % 3 == 0 {
                while let Some(x) = r.next() {
                    seen.push(x);
                }
            }
        }
        while let Some(x) = r.next() {
            seen.push(x);
        }
        assert_eq!(seen.len(), 3 * LOG_SLOTS);
        for (i, x) in seen.iter().enumerate() {
            let i = i as u32;
            assert_eq!(
                *x,
                BusWrite {
                    tag: (i % 7) as u16,
                    offset: (i * 4) & 0xFFC,
                    value: i
                }
            );
        }
        assert_eq!(r.backlog(), 0);
    }
}

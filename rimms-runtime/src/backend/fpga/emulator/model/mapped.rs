//! What the model watches: the register pages and u-dma-bufs the driver maps (as atomics), the cache model of a cached buffer,
//! and the sync FIFOs through which the driver hands buffers between the CPU and the device.
//! Apart from the model's state machines so that each file reads as one subject.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::super::files::open_made;
use super::super::{Control, Rule, SyncRecord};
use crate::backend::fpga::udmabuf::{decode_packed, parse_number, SyncDirection, SyncFor};
use crate::hal::{Error, Result};

/// Words per modelled cache line (64 bytes, the A53's).
const LINE_WORDS: usize = 16;

pub(super) fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Config(format!("emulator: cannot {what} {}: {e}", path.display()))
}

/// A mapped register page, seen as atomics. The model is its only writer.
pub(super) struct Page {
    pub(super) map: MmapRaw,
}

impl Page {
    pub(super) fn open(path: &Path) -> Result<Self> {
        let f = open_made(path, true)?;
        let map = MmapOptions::new()
            .len(super::super::files::PAGE_BYTES)
            .map_raw(&f)
            .map_err(|e| io("map", path, e))?;
        Ok(Self { map })
    }

    pub(super) fn reg(&self, off: usize) -> &AtomicU32 {
        // Offsets are the blocks' constants or a validated config offset; anything else reads
        // word 0 rather than leave the page.
        let off = if off % 4 == 0 && off + 4 <= self.map.len() {
            off
        } else {
            0
        };
        // SAFETY: `off + 4` is inside the mapping, which is page aligned, so the pointer is
        // valid and 4-byte aligned for as long as `self` lives; the page is only ever accessed
        // with 32-bit atomic or volatile operations (the driver only reads it).
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(off).cast::<u32>()) }
    }

    /// Shows `v` at `off`: what a read of that register returns from now on.
    pub(super) fn publish(&mut self, off: usize, v: u32) {
        if off % 4 == 0 && off + 4 <= self.map.len() {
            self.reg(off).store(v, Ordering::SeqCst);
        }
    }

    /// What a read of `off` returns.
    #[cfg(test)]
    pub(super) fn read(&self, off: usize) -> u32 {
        self.reg(off).load(Ordering::SeqCst)
    }
}

/// The cache model of a cached u-dma-buf: what DRAM holds, and what the CPU's view held when
/// it was last handed over (a word that differs from it now is a dirty line).
pub(super) struct Cache {
    pub(super) dram: Vec<u32>,
    pub(super) clean: Vec<u32>,
}

/// One emulated u-dma-buf.
pub(super) struct Mem {
    pub(super) name: String,
    pub(super) phys: u64,
    /// The CPU's view: the device file the driver maps.
    pub(super) map: MmapRaw,
    pub(super) words: usize,
    pub(super) cache: Option<Cache>,
    pub(super) class_dir: PathBuf,
    pub(super) fifos: Vec<(SyncFor, File, Vec<u8>)>,
    /// `[requested, done]` sync counters the driver waits on.
    pub(super) ack: MmapRaw,
}

impl Mem {
    pub(super) fn cpu(&self, word: usize) -> &AtomicU32 {
        debug_assert!(word < self.words);
        // SAFETY: callers pass `word < self.words`, so the 4 bytes lie inside the mapping of
        // `words * 4` bytes, which is page aligned. The driver side accesses the same memory only
        // through 32-bit atomics (`Udmabuf`'s helpers) or, for the runtime's views, under the
        // ownership protocol that keeps it off a range the device or the cache maintenance owns.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(word * 4).cast::<u32>()) }
    }

    pub(super) fn done(&self) -> &AtomicU64 {
        // SAFETY: the ack file is 16 bytes, mapped page aligned; word 1 is bytes 8..16.
        unsafe { AtomicU64::from_ptr(self.ack.as_mut_ptr().add(8).cast::<u64>()) }
    }

    /// The word range of `len` bytes at physical `phys`, if they lie in this buffer and are
    /// whole words.
    pub(super) fn words_at(&self, phys: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let off = usize::try_from(phys.checked_sub(self.phys)?).ok()?;
        if off % 4 != 0 || len % 4 != 0 {
            return None;
        }
        let end = off.checked_add(len)?;
        (end <= self.words * 4).then_some(off / 4..end / 4)
    }

    /// What the DMA reads: DRAM (behind the CPU's cache) or, uncached, the mapping itself.
    /// Also counts the words the CPU has written and not cleaned (a missing sync_for_device).
    pub(super) fn dma_read(&self, r: std::ops::Range<usize>) -> (Vec<u8>, usize) {
        let mut out = Vec::with_capacity(r.len() * 4);
        let mut dirty = 0;
        for i in r {
            let v = match &self.cache {
                Some(c) => {
                    if self.cpu(i).load(Ordering::Relaxed) != c.clean[i] {
                        dirty += 1;
                    }
                    c.dram[i]
                }
                None => self.cpu(i).load(Ordering::Relaxed),
            };
            out.extend_from_slice(&v.to_ne_bytes());
        }
        (out, dirty)
    }

    pub(super) fn dma_write(&mut self, start: usize, data: &[u8]) {
        for (k, c) in data.chunks_exact(4).enumerate() {
            let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
            match &mut self.cache {
                Some(cache) => cache.dram[start + k] = v,
                None => self.cpu(start + k).store(v, Ordering::Relaxed),
            }
        }
    }

    /// Cache maintenance for the bytes `offset..offset+size`, widened to whole words. Returns
    /// the dirty words a `sync_for_cpu` threw away (CPU writes never cleaned).
    pub(super) fn maintain(&mut self, which: SyncFor, offset: u64, size: u64) -> usize {
        let Some(mut cache) = self.cache.take() else {
            return 0;
        };
        let start = (offset / 4) as usize;
        let end = (offset.saturating_add(size).div_ceil(4) as usize).min(self.words);
        let mut lost = 0;
        for i in start..end.max(start) {
            let cpu = self.cpu(i).load(Ordering::Relaxed);
            let dirty = cpu != cache.clean[i];
            match which {
                SyncFor::Device => {
                    // Clean: dirty lines reach DRAM; clean ones stay as DRAM has them.
                    if dirty {
                        cache.dram[i] = cpu;
                        cache.clean[i] = cpu;
                    }
                }
                SyncFor::Cpu => {
                    // Invalidate. Lines only partly inside the range are cleaned first (as
                    // arm64's dcache_inval_poc does); a dirty line wholly inside is dropped.
                    let line = i / LINE_WORDS;
                    let edge = line == start / LINE_WORDS || line == (end - 1) / LINE_WORDS;
                    if dirty {
                        if edge {
                            cache.dram[i] = cpu;
                        } else {
                            lost += 1;
                        }
                    }
                    self.cpu(i).store(cache.dram[i], Ordering::Relaxed);
                    cache.clean[i] = cache.dram[i];
                }
            }
        }
        self.cache = Some(cache);
        lost
    }
}

/// Reads every sync FIFO; each newline-terminated write becomes one [`SyncRecord`], is applied
/// to the cache model, and is acknowledged.
pub(super) fn drain_syncs(mems: &mut [Mem], ctl: &Control) -> bool {
    let mut any = false;
    for m in mems.iter_mut() {
        let mut lines = Vec::new();
        for (which, file, buf) in &mut m.fifos {
            let mut chunk = [0u8; 512];
            loop {
                match file.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                lines.push((*which, String::from_utf8_lossy(&line).trim().to_owned()));
            }
        }
        for (which, text) in lines {
            any = true;
            match record(&m.name, &m.class_dir, which, &text) {
                Some(r) => {
                    let lost = m.maintain(r.which, r.offset, r.size);
                    if lost > 0 {
                        ctl.violate(
                            None,
                            Rule::CpuWritesDiscarded,
                            format!("sync_for_cpu of {}+{:#x} in {} dropped {lost} words the CPU had written and never cleaned", r.offset, r.size, m.name),
                        );
                    }
                    ctl.log_sync(r);
                }
                None => {
                    tracing::warn!(memory = %m.name, write = %text, "emulator: unparsable sync write")
                }
            }
            m.done().fetch_add(1, Ordering::AcqRel);
        }
    }
    any
}

pub(super) fn record(
    memory: &str,
    class_dir: &Path,
    which: SyncFor,
    text: &str,
) -> Option<SyncRecord> {
    let value = parse_number(text)?;
    if value == 1 {
        // The attribute method: the driver holds its lock and waits for the acknowledgement,
        // so the attributes still hold this request's range.
        let attr = |name: &str| {
            std::fs::read_to_string(class_dir.join(name))
                .ok()
                .and_then(|t| parse_number(&t))
        };
        return Some(SyncRecord {
            memory: memory.to_owned(),
            which,
            offset: attr("sync_offset").unwrap_or(0),
            size: attr("sync_size").unwrap_or(0),
            direction: attr("sync_direction").and_then(SyncDirection::from_number),
            packed: false,
        });
    }
    let (offset, size, direction) = decode_packed(value)?;
    Some(SyncRecord {
        memory: memory.to_owned(),
        which,
        offset,
        size,
        direction: Some(direction),
        packed: true,
    })
}

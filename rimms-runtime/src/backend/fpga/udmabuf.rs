//! A u-dma-buf region: the memory the CPU and the FPGA share.
//!
//! u-dma-buf (ikwzm's kernel module) allocates a physically contiguous buffer, exposes it as
//! `/dev/<name>` for `mmap`, and publishes its `size` and `phys_addr` (the address a DMA engine
//! uses) in sysfs under `/sys/class/u-dma-buf/<name>/` (older versions: `/sys/class/udmabuf/`).
//! On a Zynq the CPU caches are not coherent with the DMA, so ownership of a byte range moves
//! by cache maintenance: `sync_for_device` (clean the CPU's lines so the device reads what the
//! CPU wrote) before the device reads or writes a range, `sync_for_cpu` (invalidate, so the CPU
//! reads what the device wrote) after the device wrote it. Doing this for exactly the ranges that
//! change hands, instead of the whole buffer or a copy, is what makes the zero-copy pipeline
//! cheap.
//!
//! Two ways to ask for it are supported, chosen by configuration ([`SyncMethod`]):
//!
//! - **packed** (u-dma-buf 3.x and later): one write of `0xOOOOOOOOSSSSSSSS` to `sync_for_cpu`
//!   or `sync_for_device`, the high 32 bits the offset, the low 32 bits the size with its low 4
//!   bits replaced by `direction << 2 | 1`. The size field therefore has 16-byte granularity:
//!   the range is widened outwards to 16-byte boundaries (cache lines are 64 bytes, so the
//!   kernel widens it further anyway). One `open` + `write` + `close` per call. Offsets beyond
//!   4 GiB do not fit the format and fall back to the attribute method, and so does a
//!   `sync_for_cpu` whose ends are off the 16-byte grid: widening an invalidation can make a
//!   partial cache line whole, and the kernel invalidates a whole line without cleaning it,
//!   dropping a neighbour's bytes the CPU wrote.
//! - **attributes** (every version): write `sync_offset`, `sync_size`, `sync_direction`, then
//!   `1` to `sync_for_cpu` / `sync_for_device`; exact byte range, four writes, and a lock so two
//!   threads cannot interleave their attribute writes.
//!
//! With [`CacheMode::Uncached`] the device is opened with `O_SYNC` (u-dma-buf's default
//! `sync_mode` then maps it uncached) and no maintenance is needed: the sync calls return at
//! once. CPU access to an uncached mapping is much slower; that is the trade.
//!
//! Against the emulator (`sync_ack` in the configuration) each request is followed by a wait,
//! bounded, for the emulator's acknowledgement in a small mapped counter file: a sysfs write
//! returns once the kernel has done the maintenance, a FIFO write at once, and the emulator's
//! cache model must have applied a request before the CPU or the DMA touches the range.
//!
//! Every write to a sysfs attribute opens it with `O_NONBLOCK`, which changes nothing for sysfs
//! but makes a write to the emulator's FIFO attributes fail with a clear error, instead of
//! blocking, when no emulator is running.
//!
//! CPU-side helpers ([`Udmabuf::write_f32`], [`Udmabuf::read_f32`], …) access the mapping
//! with relaxed atomic 32-bit loads and stores, so even a caller that races with itself gets
//! wrong numbers, never undefined behaviour.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};

use super::config::UdmabufConfig;
use super::fault::{file_error, rejected, Result};
use num_complex::Complex32;

/// Whether the CPU maps the buffer cached (explicit maintenance) or uncached (`O_SYNC`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Cached mapping; ranges are handed over with `sync_for_cpu` / `sync_for_device`.
    #[default]
    Cached,
    /// Opened with `O_SYNC`: uncached, no maintenance, slow CPU access.
    Uncached,
}

/// How cache maintenance is asked of the u-dma-buf driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMethod {
    /// One packed write of offset, size and direction to `sync_for_cpu` / `sync_for_device`.
    #[default]
    Packed,
    /// `sync_offset`, `sync_size`, `sync_direction`, then `1` to the trigger attribute.
    Attributes,
}

/// The DMA direction handed to the kernel (`enum dma_data_direction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncDirection {
    /// `DMA_BIDIRECTIONAL` (0).
    Bidirectional = 0,
    /// `DMA_TO_DEVICE` (1): the device reads the range.
    ToDevice = 1,
    /// `DMA_FROM_DEVICE` (2): the device writes the range.
    FromDevice = 2,
}

impl SyncDirection {
    /// The direction from its kernel number.
    pub fn from_number(n: u64) -> Option<Self> {
        match n {
            0 => Some(Self::Bidirectional),
            1 => Some(Self::ToDevice),
            2 => Some(Self::FromDevice),
            _ => None,
        }
    }
}

/// Which way ownership moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncFor {
    /// To the CPU, after the device wrote (`sync_for_cpu`).
    Cpu,
    /// To the device, before it reads or writes (`sync_for_device`).
    Device,
}

impl SyncFor {
    /// The sysfs attribute that triggers it.
    pub fn attribute(self) -> &'static str {
        match self {
            SyncFor::Cpu => "sync_for_cpu",
            SyncFor::Device => "sync_for_device",
        }
    }
}

/// The two sysfs class folders u-dma-buf has used, newest first.
pub const CLASS_DIRS: [&str; 2] = ["class/u-dma-buf", "class/udmabuf"];

/// The emulator's acknowledgement file in a buffer's sysfs folder.
pub(crate) const ACK_FILE: &str = "rimms_emu_sync";
/// How long a sync waits for the emulator's acknowledgement.
const ACK_WAIT: Duration = Duration::from_secs(2);

/// The packed sync format's widest size field.
const PACKED_MAX_SIZE: u64 = 0xFFFF_FFF0;

/// Encodes one packed sync request: offset in the high 32 bits, size (16-byte granular) with
/// `direction << 2 | 1` in the low bits. `None` when the range does not fit the format.
pub fn encode_packed(offset: u64, size: u64, direction: SyncDirection) -> Option<u64> {
    if offset > u64::from(u32::MAX) || size > PACKED_MAX_SIZE || size % 16 != 0 {
        return None;
    }
    Some((offset << 32) | size | ((direction as u64) << 2) | 1)
}

/// Decodes a packed sync request into offset, size and direction; `None` when the low bit (the
/// "do it" flag) is clear or the direction is not 0, 1 or 2.
pub fn decode_packed(value: u64) -> Option<(u64, u64, SyncDirection)> {
    if value & 1 == 0 {
        return None;
    }
    let offset = value >> 32;
    let size = value & 0xFFFF_FFF0;
    let direction = SyncDirection::from_number((value >> 2) & 3)?;
    Some((offset, size, direction))
}

/// Parses a sysfs number: decimal, or hex with a `0x` prefix, surrounding whitespace ignored.
pub fn parse_number(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse().ok()
    }
}

/// Reads and parses one sysfs number, naming the file in the error.
pub(crate) fn read_number(device: &str, path: &Path) -> Result<u64> {
    let text = fs::read_to_string(path)
        .map_err(|e| file_error(device, path, format!("cannot read: {e}")))?;
    parse_number(&text).ok_or_else(|| {
        file_error(
            device,
            path,
            format!(
                "not a number: {:?}",
                text.trim().chars().take(40).collect::<String>()
            ),
        )
    })
}

/// Writes one sysfs attribute the way `echo` does: open, one write, close.
fn write_attribute(device: &str, path: &Path, text: &str) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| {
            let hint = if e.raw_os_error() == Some(nix::libc::ENXIO) {
                " (a FIFO nobody reads: is the emulator running?)"
            } else {
                ""
            };
            file_error(device, path, format!("cannot open for writing: {e}{hint}"))
        })?;
    f.write_all(text.as_bytes()).map_err(|e| {
        file_error(
            device,
            path,
            format!("write of {:?} failed: {e}", text.trim()),
        )
    })
}

/// A mapped u-dma-buf region.
#[derive(Debug)]
pub struct Udmabuf {
    name: String,
    class_dir: PathBuf,
    dev_path: PathBuf,
    map: MmapRaw,
    len: usize,
    phys_addr: u64,
    cache: CacheMode,
    sync: SyncMethod,
    /// Serialises the four writes of the attribute method, and a request with its
    /// acknowledgement.
    attr_lock: Mutex<()>,
    /// The emulator's `[requested, done]` counters, when the configuration asks to wait.
    ack: Option<MmapRaw>,
    syncs_for_cpu: AtomicU64,
    syncs_for_device: AtomicU64,
}

impl Udmabuf {
    /// Finds the device's sysfs folder, reads `size` and `phys_addr`, opens `/dev/<name>` (with
    /// `O_SYNC` for [`CacheMode::Uncached`]) and maps exactly `size` bytes of it.
    pub fn open(cfg: &UdmabufConfig) -> Result<Self> {
        let name = cfg.name.as_str();
        let candidates: Vec<PathBuf> = CLASS_DIRS
            .iter()
            .map(|c| cfg.sysfs_root.join(c).join(name))
            .collect();
        let class_dir = candidates
            .iter()
            .find(|p| p.is_dir())
            .cloned()
            .ok_or_else(|| {
                file_error(
                    name,
                    &candidates[0],
                    format!(
                        "no such u-dma-buf device in sysfs (looked in {} and {}); is the module loaded?",
                        candidates[0].display(),
                        candidates[1].display()
                    ),
                )
            })?;
        let size_path = class_dir.join("size");
        let size = read_number(name, &size_path)?;
        let phys_addr = read_number(name, &class_dir.join("phys_addr"))?;
        if size == 0 {
            return Err(file_error(name, size_path, "size is 0"));
        }
        if let Some(expected) = cfg.size {
            if expected != size {
                return Err(file_error(
                    name,
                    size_path,
                    format!("size mismatch: sysfs says {size} bytes, the configuration {expected}"),
                ));
            }
        }
        let len = usize::try_from(size)
            .map_err(|_| file_error(name, &size_path, format!("size {size} does not fit")))?;
        if phys_addr % 8 != 0 || phys_addr.checked_add(size).is_none() {
            return Err(file_error(
                name,
                class_dir.join("phys_addr"),
                format!("phys_addr {phys_addr:#x} is not 8-byte aligned or the region overflows"),
            ));
        }

        let dev_path = cfg.dev_root.join(name);
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if cfg.cache == CacheMode::Uncached {
            opts.custom_flags(OFlag::O_SYNC.bits());
        }
        let file: File = opts
            .open(&dev_path)
            .map_err(|e| file_error(name, &dev_path, format!("cannot open: {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| file_error(name, &dev_path, format!("cannot stat: {e}")))?;
        // A character device reports no length; a regular file (the emulator's) must be long
        // enough, or touching its end would raise SIGBUS.
        if meta.is_file() && meta.len() < size {
            return Err(file_error(
                name,
                &dev_path,
                format!(
                    "size mismatch: the file has {} bytes, sysfs says {size}",
                    meta.len()
                ),
            ));
        }
        let map = MmapOptions::new()
            .len(len)
            .map_raw(&file)
            .map_err(|e| file_error(name, &dev_path, format!("mmap of {len} bytes failed: {e}")))?;
        let ack = if cfg.sync_ack {
            let p = class_dir.join(ACK_FILE);
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .map_err(|e| file_error(name, &p, format!("cannot open: {e}")))?;
            if f.metadata().map(|m| m.len()).unwrap_or(0) < 16 {
                return Err(file_error(name, &p, "shorter than 16 bytes"));
            }
            Some(
                MmapOptions::new()
                    .len(16)
                    .map_raw(&f)
                    .map_err(|e| file_error(name, &p, format!("mmap failed: {e}")))?,
            )
        } else {
            None
        };
        tracing::debug!(device = name, len, phys_addr, "u-dma-buf mapped");
        Ok(Self {
            name: name.to_owned(),
            class_dir,
            dev_path,
            map,
            len,
            phys_addr,
            cache: cfg.cache,
            sync: cfg.sync,
            attr_lock: Mutex::new(()),
            ack,
            syncs_for_cpu: AtomicU64::new(0),
            syncs_for_device: AtomicU64::new(0),
        })
    }

    /// The device name (`udmabuf0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sysfs folder the attributes were found in.
    pub fn class_dir(&self) -> &Path {
        &self.class_dir
    }

    /// The device node that was mapped.
    pub fn dev_path(&self) -> &Path {
        &self.dev_path
    }

    /// Start of the mapping. Reading or writing through it is the caller's `unsafe` business;
    /// the helpers below are the safe way.
    pub fn base(&self) -> NonNull<u8> {
        // A successful mmap never returns null.
        NonNull::new(self.map.as_mut_ptr()).unwrap_or(NonNull::dangling())
    }

    /// Length in bytes (the sysfs `size`).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a zero-sized u-dma-buf is refused at open.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The physical (bus) address of byte 0.
    pub fn phys_addr(&self) -> u64 {
        self.phys_addr
    }

    /// The cache mode it was opened with.
    pub fn cache_mode(&self) -> CacheMode {
        self.cache
    }

    /// The sync method in use.
    pub fn sync_method(&self) -> SyncMethod {
        self.sync
    }

    /// The physical address of byte `offset` (`offset == len()` allowed, as an end address).
    pub fn phys_of(&self, offset: usize) -> Result<u64> {
        self.check_range(offset, 0)?;
        Ok(self.phys_addr + offset as u64)
    }

    /// Refuses a range that does not lie inside the buffer.
    pub fn check_range(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(rejected(
                &self.name,
                format!(
                    "range {offset:#x}+{len:#x} is outside the {} bytes of {}",
                    self.len, self.name
                ),
            )),
        }
    }

    /// Hands `offset..offset+len` to the CPU after the device wrote it (`DMA_FROM_DEVICE`).
    pub fn sync_for_cpu(&self, offset: usize, len: usize) -> Result<()> {
        self.sync(SyncFor::Cpu, offset, len, SyncDirection::FromDevice)
    }

    /// Hands `offset..offset+len` to the device before it reads or overwrites it
    /// (`DMA_TO_DEVICE`: the CPU's dirty lines are cleaned to memory, so neither a stale read
    /// nor a late eviction over the device's output can happen).
    pub fn sync_for_device(&self, offset: usize, len: usize) -> Result<()> {
        self.sync(SyncFor::Device, offset, len, SyncDirection::ToDevice)
    }

    /// Cache maintenance for one range with an explicit direction. Zero-length ranges and
    /// uncached mappings need nothing and write nothing.
    pub fn sync(
        &self,
        which: SyncFor,
        offset: usize,
        len: usize,
        dir: SyncDirection,
    ) -> Result<()> {
        self.check_range(offset, len)?;
        if len == 0 || self.cache == CacheMode::Uncached {
            return Ok(());
        }
        // Under a timing model the request costs its modelled time, not the emulator's.
        if let Some(c) = crate::vclock::costs() {
            crate::vclock::charge(crate::vclock::Term::CacheSync, c.sync(len));
        }
        crate::vclock::exclude(|| self.sync_request(which, offset, len, dir))
    }

    fn sync_request(
        &self,
        which: SyncFor,
        offset: usize,
        len: usize,
        dir: SyncDirection,
    ) -> Result<()> {
        let trigger = self.class_dir.join(which.attribute());
        let _guard = self.attr_lock.lock().unwrap_or_else(|p| p.into_inner());
        // Widening an invalidation is not harmless: where the exact range starts or ends
        // inside a cache line, the kernel cleans and invalidates that line (the CPU's dirty
        // bytes of a neighbour survive), but a range widened onto a line boundary makes the
        // line whole, and a whole line is only invalidated, which drops a neighbour's bytes
        // the CPU wrote and has not cleaned. So a hand-over to the CPU whose ends are not on
        // the packed format's 16-byte grid takes the exact attribute method. A clean
        // (`ToDevice`) may widen: 16 divides a line, so it touches no line it would not.
        let exact_only = dir == SyncDirection::FromDevice && (offset % 16 != 0 || len % 16 != 0);
        let packed = if self.sync == SyncMethod::Packed && !exact_only {
            // Widen to 16-byte boundaries, never past the end of the buffer.
            let start = (offset & !15) as u64;
            let end = ((offset + len) as u64).div_ceil(16) * 16;
            let end = end.min(self.len as u64);
            let size = (end - start).div_ceil(16) * 16;
            // Rounding the size up to 16 bytes can still reach past the end of a buffer whose
            // size is not a multiple of 16 (u-dma-buf takes any byte count), and u-dma-buf
            // refuses `offset + size > size` with EINVAL: such a range takes the exact
            // attribute method instead.
            if start + size <= self.len as u64 {
                encode_packed(start, size, dir)
            } else {
                None
            }
        } else {
            None
        };
        match packed {
            Some(value) => write_attribute(&self.name, &trigger, &format!("{value:#018X}\n"))?,
            None => {
                let dir_num = dir as u32;
                write_attribute(
                    &self.name,
                    &self.class_dir.join("sync_offset"),
                    &format!("{offset}\n"),
                )?;
                write_attribute(
                    &self.name,
                    &self.class_dir.join("sync_size"),
                    &format!("{len}\n"),
                )?;
                write_attribute(
                    &self.name,
                    &self.class_dir.join("sync_direction"),
                    &format!("{dir_num}\n"),
                )?;
                write_attribute(&self.name, &trigger, "1\n")?;
            }
        }
        // Counted only once the request was written, so a failed write never leaves a ticket
        // the emulator cannot answer; the lock keeps requests and tickets in the same order.
        let ticket = self
            .ack_word(0)
            .map(|w| w.fetch_add(1, Ordering::AcqRel) + 1);
        if let (Some(ticket), Some(done)) = (ticket, self.ack_word(1)) {
            let start = Instant::now();
            while done.load(Ordering::Acquire) < ticket {
                if start.elapsed() > ACK_WAIT {
                    return Err(file_error(
                        &self.name,
                        &trigger,
                        format!(
                            "the emulator did not acknowledge the {} request within {} ms",
                            which.attribute(),
                            ACK_WAIT.as_millis()
                        ),
                    ));
                }
                std::thread::yield_now();
            }
        }
        match which {
            SyncFor::Cpu => self.syncs_for_cpu.fetch_add(1, Ordering::Relaxed),
            SyncFor::Device => self.syncs_for_device.fetch_add(1, Ordering::Relaxed),
        };
        Ok(())
    }

    /// Word `i` (0 requested, 1 done) of the emulator's acknowledgement counters.
    fn ack_word(&self, i: usize) -> Option<&AtomicU64> {
        let map = self.ack.as_ref()?;
        // SAFETY: the mapping is 16 bytes (checked at open), page aligned, so words 0 and 1 are
        // in bounds and 8-byte aligned; every process maps the file and uses it only through
        // these atomics.
        Some(unsafe { AtomicU64::from_ptr(map.as_mut_ptr().add(8 * i.min(1)).cast::<u64>()) })
    }

    /// How many `sync_for_cpu` and `sync_for_device` requests this mapping has written.
    pub fn sync_counts(&self) -> (u64, u64) {
        (
            self.syncs_for_cpu.load(Ordering::Relaxed),
            self.syncs_for_device.load(Ordering::Relaxed),
        )
    }

    /// The 32-bit words of a 4-byte aligned range, as atomics.
    fn words(&self, offset: usize, words: usize) -> Result<&[AtomicU32]> {
        let bytes = words
            .checked_mul(4)
            .ok_or_else(|| rejected(&self.name, "range length overflows"))?;
        self.check_range(offset, bytes)?;
        if offset % 4 != 0 {
            return Err(rejected(
                &self.name,
                format!("offset {offset:#x} is not 4-byte aligned"),
            ));
        }
        if words == 0 {
            return Ok(&[]);
        }
        // SAFETY: the range is inside the mapping (checked above), 4-byte aligned (the mapping
        // is page aligned and `offset` is a multiple of 4), and lives as long as `self`. All CPU
        // access the backend makes goes through atomics, so shared access is race-free from the
        // language's point of view; the device writes behind the CPU's back are what the cache
        // maintenance calls hand over.
        Ok(unsafe {
            std::slice::from_raw_parts(self.map.as_mut_ptr().add(offset).cast::<AtomicU32>(), words)
        })
    }

    /// Writes `data` at `offset` (4-byte aligned).
    pub fn write_f32(&self, offset: usize, data: &[f32]) -> Result<()> {
        for (w, v) in self.words(offset, data.len())?.iter().zip(data) {
            w.store(v.to_bits(), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Reads `out.len()` floats from `offset` (4-byte aligned).
    pub fn read_f32(&self, offset: usize, out: &mut [f32]) -> Result<()> {
        for (w, v) in self.words(offset, out.len())?.iter().zip(out.iter_mut()) {
            *v = f32::from_bits(w.load(Ordering::Relaxed));
        }
        Ok(())
    }

    /// Writes complex values (interleaved re, im) at `offset`.
    pub fn write_complex(&self, offset: usize, data: &[Complex32]) -> Result<()> {
        self.write_f32(offset, bytemuck::cast_slice(data))
    }

    /// Reads complex values (interleaved re, im) from `offset`.
    pub fn read_complex(&self, offset: usize, out: &mut [Complex32]) -> Result<()> {
        self.read_f32(offset, bytemuck::cast_slice_mut(out))
    }

    /// Writes raw 32-bit words (test patterns, sentinels).
    pub fn write_words(&self, offset: usize, data: &[u32]) -> Result<()> {
        for (w, v) in self.words(offset, data.len())?.iter().zip(data) {
            w.store(*v, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Reads raw 32-bit words.
    pub fn read_words(&self, offset: usize, out: &mut [u32]) -> Result<()> {
        for (w, v) in self.words(offset, out.len())?.iter().zip(out.iter_mut()) {
            *v = w.load(Ordering::Relaxed);
        }
        Ok(())
    }

    /// Copies `bytes` (a multiple of 4) from `src` to `dst` inside the buffer, CPU side. The
    /// ranges must not overlap.
    pub(crate) fn copy_within(&self, src: usize, dst: usize, bytes: usize) -> Result<()> {
        if bytes % 4 != 0 {
            return Err(rejected(
                &self.name,
                format!("copy of {bytes} bytes is not whole words"),
            ));
        }
        let (s, d) = (self.words(src, bytes / 4)?, self.words(dst, bytes / 4)?);
        if src < dst + bytes && dst < src + bytes && bytes > 0 {
            return Err(rejected(&self.name, "overlapping copy"));
        }
        for (a, b) in s.iter().zip(d) {
            b.store(a.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.charge_cpu_pass(bytes);
        Ok(())
    }

    /// Multiplies `count` floats at `offset` by `factor`, CPU side.
    pub(crate) fn scale_f32(&self, offset: usize, count: usize, factor: f32) -> Result<()> {
        for w in self.words(offset, count)? {
            w.store(
                (f32::from_bits(w.load(Ordering::Relaxed)) * factor).to_bits(),
                Ordering::Relaxed,
            );
        }
        self.charge_cpu_pass(count * 4);
        Ok(())
    }

    /// Under a timing model: the A53 reading and writing `bytes` of this buffer in place (one
    /// copy's worth at the buffer's cached or uncached memcpy rate).
    fn charge_cpu_pass(&self, bytes: usize) {
        if let Some(c) = crate::vclock::costs() {
            crate::vclock::charge(
                crate::vclock::Term::CpuPass,
                c.copy(bytes, self.cache == CacheMode::Cached),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_format_round_trips_and_matches_the_documented_layout() {
        let v = encode_packed(0x1000, 0x2000, SyncDirection::FromDevice).unwrap();
        assert_eq!(v, 0x0000_1000_0000_2009);
        assert_eq!(
            decode_packed(v),
            Some((0x1000, 0x2000, SyncDirection::FromDevice))
        );
        assert_eq!(
            encode_packed(0, 24, SyncDirection::ToDevice),
            None,
            "size not 16-granular"
        );
        assert_eq!(encode_packed(1 << 32, 16, SyncDirection::ToDevice), None);
        assert_eq!(decode_packed(0x10), None, "flag bit clear");
    }

    #[test]
    fn numbers_parse_in_both_bases() {
        assert_eq!(parse_number("4194304\n"), Some(4_194_304));
        assert_eq!(parse_number(" 0x0000000070000000\n"), Some(0x7000_0000));
        assert_eq!(parse_number("0X1f"), Some(31));
        assert_eq!(parse_number("seventy"), None);
        assert_eq!(parse_number(""), None);
    }

    /// The packed format's 16-byte grid never widens a hand-over to the CPU (an
    /// invalidation, which would drop a neighbour's unwritten-back bytes where the widened
    /// range makes a cache line whole); a hand-over to the device may be widened.
    #[test]
    fn an_invalidation_off_the_16_byte_grid_is_exact_and_a_clean_may_widen() {
        let (_dir, class, buf) = packed_buffer(256);
        let read =
            |name: &str| parse_number(&std::fs::read_to_string(class.join(name)).unwrap()).unwrap();
        for (offset, len) in [(72, 56), (64, 8), (8, 64), (136, 24)] {
            for attr in [
                "sync_offset",
                "sync_size",
                "sync_for_cpu",
                "sync_for_device",
            ] {
                std::fs::write(class.join(attr), "0\n").unwrap();
            }
            buf.sync_for_cpu(offset, len).unwrap();
            assert_eq!(
                read("sync_for_cpu"),
                1,
                "{offset}+{len}: not the attribute method"
            );
            assert_eq!(
                (read("sync_offset"), read("sync_size")),
                (offset as u64, len as u64),
                "{offset}+{len}: the invalidation is not the exact range"
            );
            buf.sync_for_device(offset, len).unwrap();
            let (start, size, dir) =
                decode_packed(read("sync_for_device")).expect("a clean takes the packed format");
            assert_eq!(dir, SyncDirection::ToDevice);
            assert!(start <= offset as u64 && start + size >= (offset + len) as u64);
        }
        // On the grid, the hand-over to the CPU is one packed write of exactly the range.
        buf.sync_for_cpu(64, 128).unwrap();
        assert_eq!(
            decode_packed(read("sync_for_cpu")),
            Some((64, 128, SyncDirection::FromDevice))
        );
    }

    /// A packed-sync u-dma-buf of `size` bytes over files in a temporary folder: the folder
    /// (kept alive by the caller), the buffer's sysfs class folder, the buffer.
    fn packed_buffer(size: usize) -> (tempfile::TempDir, PathBuf, Udmabuf) {
        let dir = tempfile::tempdir().unwrap();
        let class = dir.path().join("sys").join(CLASS_DIRS[0]).join("ub");
        std::fs::create_dir_all(&class).unwrap();
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        std::fs::write(dir.path().join("dev").join("ub"), vec![0u8; size]).unwrap();
        std::fs::write(class.join("size"), format!("{size}\n")).unwrap();
        std::fs::write(class.join("phys_addr"), "0x70000000\n").unwrap();
        for attr in [
            "sync_offset",
            "sync_size",
            "sync_direction",
            "sync_for_cpu",
            "sync_for_device",
        ] {
            std::fs::write(class.join(attr), "0\n").unwrap();
        }
        let buf = Udmabuf::open(&UdmabufConfig {
            name: "ub".into(),
            dev_root: dir.path().join("dev"),
            sysfs_root: dir.path().join("sys"),
            cache: CacheMode::Cached,
            sync: SyncMethod::Packed,
            size: None,
            sync_ack: false,
        })
        .unwrap();
        (dir, class, buf)
    }

    /// A u-dma-buf whose `size` (a module parameter, any byte count) is not a multiple of 16:
    /// the packed format's 16-byte granularity must not stretch a sync of its last bytes past
    /// its end. u-dma-buf answers `offset + size > this->size` with EINVAL, so such a request
    /// would fail every FFT or ZIP whose output ends in the last 16 bytes.
    #[test]
    fn a_packed_sync_never_reaches_past_the_end_of_an_odd_sized_buffer() {
        let (_dir, class, buf) = packed_buffer(100);
        for (offset, len) in [(96, 4), (88, 12), (0, 100), (80, 16)] {
            buf.sync_for_device(offset, len).unwrap();
            let read = |name: &str| {
                parse_number(&std::fs::read_to_string(class.join(name)).unwrap()).unwrap()
            };
            let trigger = read("sync_for_device");
            let (start, size) = match decode_packed(trigger) {
                Some((start, size, _)) if trigger != 1 => (start, size),
                _ => (read("sync_offset"), read("sync_size")),
            };
            assert!(
                start <= offset as u64 && start + size >= (offset + len) as u64,
                "{offset}+{len}: the request {start}+{size} does not cover the range"
            );
            assert!(
                start + size <= 100,
                "{offset}+{len}: the request {start}+{size} reaches past the 100-byte buffer"
            );
        }
    }
}

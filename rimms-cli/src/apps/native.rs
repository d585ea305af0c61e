//! The `native` mode: each app hand-written with plain buffers and the devices' own code, the
//! way a programmer who knows the data flow would write it with no runtime at all — inputs
//! copied to the device once, intermediates left there, results copied back once. It is the
//! floor that the `rimms` mode is measured against, so it does the least it can: no tracking,
//! no dispatch, whole-matrix kernel calls, and on the CPU no copies at all.
//!
//! A simulated card's memory is a second set of host vectors, and every copy to or from it is
//! a real `memcpy`, counted per link and, when the sim config models its link, held for the
//! modelled time, exactly as the runtime's sim backend does, so the figures of the three modes
//! can be compared line by line.
//!
//! On the FPGA mappings native code is driver code: every buffer is carved from the board's
//! u-dma-buf, which the CPU and the cores share, so nothing is ever copied; FFTs run on the
//! first FFT core and, where the mapping puts ZIPs on the FPGA, ZIPs on the first ZIP core,
//! both given byte offsets into that memory; every other step runs on the CPU in place.

use super::error::AppError;
use super::mapping::{Mapping, Step};
use super::report::Link;
use rimms::drivers::cpu::kernels::{self, FftPlans};
use rimms::drivers::fpga::{Accelerator, FpgaParts, Udmabuf};
use rimms::{Complex32, Device, FftDirection, LinkModel, SimConfig, Target, ZipOp};
use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

/// The devices native code runs on.
pub(crate) struct Native {
    place: Place,
    plans: FftPlans,
    /// (copies, bytes) host → device and device → host.
    to_device: Cell<(u64, u64)>,
    from_device: Cell<(u64, u64)>,
    allocations: Cell<u64>,
}

enum Place {
    /// Everything on the CPU, in host memory.
    Host,
    /// A card with memory of its own (`name` in link figures), its copies held for `link`'s
    /// modelled time if the sim config asks for it.
    Card {
        name: String,
        link: Option<LinkModel>,
    },
    /// The FPGA board, its u-dma-buf shared with the CPU (boxed: it is far larger than the
    /// other places).
    Fpga(Box<Board>),
}

struct Board {
    parts: FpgaParts,
    /// The accelerator FFTs run on, and the one ZIPs run on if the mapping puts them there.
    fft: usize,
    zip: Option<usize>,
    memory: Arc<Udmabuf>,
    /// Next free byte of the u-dma-buf, and the end of what buffers may use.
    next: Cell<usize>,
    end: usize,
}

/// A buffer of native code: a vector, or a piece of the FPGA's u-dma-buf.
pub(crate) struct Buf<T> {
    storage: Storage<T>,
}

enum Storage<T> {
    Heap(Vec<T>),
    Shared {
        ptr: NonNull<T>,
        len: usize,
        /// Keeps the mapping alive.
        _memory: Arc<Udmabuf>,
    },
}

impl<T> Deref for Buf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.storage {
            Storage::Heap(v) => v,
            // SAFETY: the range was carved for this buffer alone from a mapping `_memory`
            // keeps alive, aligned for `T` and initialised (zeroed) when it was carved.
            Storage::Shared { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Heap(v) => v,
            // SAFETY: as for `deref`, and `&mut self` makes this the only view.
            Storage::Shared { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }
}

/// A buffer the host fills or reads, with its copy in device memory when the device has its
/// own (on the CPU and on the FPGA's shared memory the two are one buffer).
pub(crate) struct Mirror<T> {
    host: Buf<T>,
    device: Option<Buf<T>>,
}

impl<T> Mirror<T> {
    /// The host copy.
    pub fn host(&self) -> &[T] {
        &self.host
    }

    /// The host copy, to fill before an upload.
    pub fn host_mut(&mut self) -> &mut [T] {
        &mut self.host
    }

    /// The copy the kernels use.
    pub fn dev(&self) -> &[T] {
        self.device.as_deref().unwrap_or(&self.host)
    }

    /// The copy the kernels write, to download afterwards.
    pub fn dev_mut(&mut self) -> &mut [T] {
        match &mut self.device {
            Some(d) => d,
            None => &mut self.host,
        }
    }
}

impl Native {
    pub fn new(mapping: Mapping, sim: &SimConfig) -> Result<Native, AppError> {
        let place = match (mapping, mapping.device(Step::Fft)) {
            (Mapping::Fpga | Mapping::FpgaCpu, _) => Place::Fpga(Box::new(Board::open(mapping)?)),
            (_, Target::On(Device::Cpu)) => Place::Host,
            // Native code for the other mappings runs on the one device their FFTs run on;
            // they place every step there.
            (_, other) => Place::Card {
                name: other.to_string(),
                link: sim.simulate_link.then_some(sim.link),
            },
        };
        Ok(Native {
            place,
            plans: FftPlans::new(),
            to_device: Cell::new((0, 0)),
            from_device: Cell::new((0, 0)),
            allocations: Cell::new(0),
        })
    }

    /// A buffer that lives only where the kernels run.
    pub fn buffer<T: bytemuck::Pod>(&self, len: usize) -> Result<Buf<T>, AppError> {
        self.allocations.set(self.allocations.get() + 1);
        let storage = match &self.place {
            Place::Fpga(board) => board.carve(len)?,
            Place::Host | Place::Card { .. } => Storage::Heap(vec![T::zeroed(); len]),
        };
        Ok(Buf { storage })
    }

    /// A buffer the host and the kernels both use.
    pub fn mirror<T: bytemuck::Pod>(&self, len: usize) -> Result<Mirror<T>, AppError> {
        let device = match self.place {
            Place::Card { .. } => Some(self.buffer(len)?),
            Place::Host | Place::Fpga(_) => None,
        };
        Ok(Mirror {
            host: self.buffer(len)?,
            device,
        })
    }

    /// Copies the host copy to the device (nothing on the CPU).
    pub fn upload<T: Copy>(&self, m: &mut Mirror<T>) {
        if let Some(device) = &mut m.device {
            self.copy(&m.host, device, &self.to_device);
        }
    }

    /// Copies the device copy to the host (nothing on the CPU).
    pub fn download<T: Copy>(&self, m: &mut Mirror<T>) {
        if let Some(device) = &m.device {
            self.copy(device, &mut m.host, &self.from_device);
        }
    }

    fn copy<T: Copy>(&self, from: &[T], to: &mut [T], counter: &Cell<(u64, u64)>) {
        let started = Instant::now();
        to.copy_from_slice(from);
        let bytes = std::mem::size_of_val(from);
        if let Place::Card {
            link: Some(link), ..
        } = &self.place
        {
            link.hold(started, bytes);
        }
        let (copies, total) = counter.get();
        counter.set((copies + 1, total + bytes as u64));
    }

    /// Batched FFT of every row of `points` (inverse scaled by 1/N): on the FFT core on the
    /// FPGA mappings, else with this device's plans.
    pub fn fft(
        &self,
        dir: FftDirection,
        points: usize,
        input: &[Complex32],
        out: &mut [Complex32],
    ) -> Result<(), AppError> {
        match &self.place {
            Place::Fpga(board) => {
                let acc = board.accelerator(board.fft);
                let (i, o) = (board.offset_of(input)?, board.offset_of(out)?);
                acc.fft(dir, points, input.len() / points, i, o)?;
            }
            Place::Host | Place::Card { .. } => {
                kernels::fft_rows(&self.plans, dir, points, input, out)
            }
        }
        Ok(())
    }

    /// `out = a op b` for an app's ZIP step (not its multiply-by-conjugate, which stays on the
    /// device's CPU code): on the ZIP core where the mapping puts ZIPs on the FPGA.
    pub fn zip(
        &self,
        op: ZipOp,
        a: &[Complex32],
        b: &[Complex32],
        out: &mut [Complex32],
    ) -> Result<(), AppError> {
        let on_fpga = match &self.place {
            Place::Fpga(board) => board.zip.map(|zip| (board, zip)),
            _ => None,
        };
        let Some((board, zip)) = on_fpga else {
            kernels::zip(op, a, b, out);
            return Ok(());
        };
        let (a, b, o) = (
            board.offset_of(a)?,
            board.offset_of(b)?,
            board.offset_of(out)?,
        );
        board
            .accelerator(zip)
            .zip_in_pieces(op, out.len(), a, b, o)?;
        Ok(())
    }

    /// The links that carried something, as the runtime names them.
    pub fn links(&self) -> Vec<Link> {
        let Place::Card { name: device, .. } = &self.place else {
            return Vec::new();
        };
        [
            ("host", device.as_str(), self.to_device.get()),
            (device.as_str(), "host", self.from_device.get()),
        ]
        .into_iter()
        .filter(|(_, _, (copies, _))| *copies > 0)
        .map(|(from, to, (copies, bytes))| Link {
            from: from.to_string(),
            to: to.to_string(),
            copies,
            bytes,
        })
        .collect()
    }

    /// Buffers allocated so far (a mirror on a card counts two).
    pub fn allocations(&self) -> u64 {
        self.allocations.get()
    }
}

impl Board {
    /// Opens the board the FPGA mappings use (`RIMMS_FPGA_BOARD`, else the emulator) with the
    /// accelerators the runtime's `fpga(n)` numbering gives those mappings.
    fn open(mapping: Mapping) -> Result<Board, AppError> {
        let parts = super::mapping::with_board(FpgaParts::open)?;
        let index = |step| match mapping.device(step) {
            Target::On(Device::Fpga(n)) => Some(usize::from(n)),
            _ => None,
        };
        let fft = index(Step::Fft).ok_or_else(|| {
            AppError::Unsupported(format!("{} puts no FFT on the FPGA", mapping.name()))
        })?;
        let accelerators = parts.board().accelerators();
        let acc = accelerators.get(fft).ok_or_else(|| {
            AppError::Unsupported(format!("the board has no accelerator fpga{fft}"))
        })?;
        let memory = Arc::clone(acc.memory());
        let end = parts.board().pool_range(memory.name()).map_or(0, |r| r.end);
        Ok(Board {
            zip: index(Step::Zip),
            fft,
            memory,
            next: Cell::new(0),
            end,
            parts,
        })
    }

    fn accelerator(&self, index: usize) -> &Accelerator {
        // `open` checked the FFT index, and the mapping's ZIP core sits on the same board.
        &self.parts.board().accelerators()[index]
    }

    /// `len` zeroed elements of the u-dma-buf, 64-byte aligned (the DMA needs 8).
    fn carve<T: bytemuck::Pod>(&self, len: usize) -> Result<Storage<T>, AppError> {
        let bytes = len * std::mem::size_of::<T>();
        let start = self.next.get().next_multiple_of(64);
        if start + bytes > self.end {
            return Err(AppError::Param(format!(
                "native buffers need more than the {} bytes of {}",
                self.end,
                self.memory.name()
            )));
        }
        self.next.set(start + bytes);
        // SAFETY: `start..start + bytes` lies inside the mapping (checked against the pool
        // end) and no other buffer gets those bytes; the base is page aligned, so the pointer
        // is aligned for any `T` up to 64 bytes.
        let ptr = unsafe { self.memory.base().as_ptr().add(start) } as *mut T;
        // SAFETY: as above; zeroing makes the bytes valid for a Pod `T`.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(Storage::Shared {
            // The base is non-null, so an offset into the mapping is too.
            ptr: NonNull::new(ptr).unwrap_or(NonNull::dangling()),
            len,
            _memory: Arc::clone(&self.memory),
        })
    }

    /// The byte offset of `data` in the u-dma-buf, which every native buffer lies in.
    fn offset_of(&self, data: &[Complex32]) -> Result<usize, AppError> {
        let base = self.memory.base().as_ptr() as usize;
        (data.as_ptr() as usize)
            .checked_sub(base)
            .filter(|offset| offset + std::mem::size_of_val(data) <= self.end)
            .ok_or_else(|| {
                AppError::Param("a native FPGA argument is not in the u-dma-buf".to_string())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the `fpga` mapping native buffers are u-dma-buf memory and the cores do the work:
    /// the FFT of an impulse at 1 is e^(-2πik/N), its square (on the ZIP core) e^(-4πik/N),
    /// and the driver synced the memory for the device on the way.
    #[test]
    fn fpga_native_runs_fft_and_zip_on_the_cores_in_shared_memory() {
        let n = 1024;
        let dev = Native::new(Mapping::Fpga, &SimConfig::default()).expect("emulated board");
        let Place::Fpga(board) = &dev.place else {
            panic!("the fpga mapping opens the board");
        };
        let (_, device_syncs) = board.memory.sync_counts();
        let mut x = dev.buffer::<Complex32>(n).expect("x");
        x[1] = Complex32::new(1.0, 0.0);
        let mut y = dev.buffer(n).expect("y");
        let mut z = dev.buffer(n).expect("z");
        dev.fft(FftDirection::Forward, n, &x, &mut y).expect("fft");
        dev.zip(ZipOp::Mul, &y, &y, &mut z).expect("zip");
        let turn = |k: usize, times: f64| {
            let angle = -2.0 * std::f64::consts::PI * times * k as f64 / n as f64;
            Complex32::new(angle.cos() as f32, angle.sin() as f32)
        };
        for k in 0..n {
            assert!((y[k] - turn(k, 1.0)).norm() < 1e-4, "fft bin {k}: {}", y[k]);
            assert!(
                (z[k] - turn(k, 2.0)).norm() < 1e-4,
                "zip element {k}: {}",
                z[k]
            );
        }
        assert!(board.memory.sync_counts().1 > device_syncs);
        assert!(dev.links().is_empty(), "nothing is copied on the FPGA");
        assert_eq!(dev.allocations(), 3);
    }
}

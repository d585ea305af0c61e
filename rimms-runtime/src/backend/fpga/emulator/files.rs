//! The emulator's stand-in files: the buffer, its sysfs folder, the register pages, and the
//! board configuration that points at them.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Component, Path, PathBuf};

use nix::sys::stat::Mode;

use super::model::DMACR_RESET_VALUE;
use super::EmulatorLayout;
use crate::backend::fpga::axi_dma::{DMASR_HALTED, MM2S_DMACR, MM2S_DMASR, S2MM_DMACR, S2MM_DMASR};
use crate::backend::fpga::buslog::LOG_BYTES;
use crate::backend::fpga::config::{
    AccelKind, AcceleratorConfig, BoardConfig, RegisterBlock, UdmabufConfig,
};
use crate::backend::fpga::udmabuf::CLASS_DIRS;
use crate::hal::{Error, Result};

/// The generated board configuration's file name.
pub(crate) const CONFIG_FILE: &str = "board.toml";
/// Bytes of one register page file.
pub(crate) const PAGE_BYTES: usize = 4096;
pub(crate) use crate::backend::fpga::udmabuf::ACK_FILE;
/// The bus log's file name under `regs/`.
const BUS_FILE: &str = "bus.log";

/// The bus log of an emulator folder (every generated block names it).
pub(crate) fn bus_path(dir: &Path) -> PathBuf {
    dir.join("regs").join(BUS_FILE)
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return link_refused(path);
    }
    Error::Config(format!("emulator: cannot {what} {}: {e}", path.display()))
}

fn link_refused(path: &Path) -> Error {
    Error::Config(format!(
        "emulator: {} is a symbolic link; the emulator writes only to files of its own and \
         would write through it to what it points at: remove the link",
        path.display()
    ))
}

/// Opens the emulator's file at `path` empty, creating it: never through a symbolic link
/// (`O_NOFOLLOW`), and never a file that is not a plain file of its own (a FIFO, a device,
/// a file with other hard links), whose contents would be the user's. Nothing is truncated
/// before those checks.
fn create_file(path: &Path) -> Result<fs::File> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        // Non-blocking: a FIFO put here fails the open instead of hanging it.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io("create", path, e))?;
    let meta = file.metadata().map_err(|e| io("look at", path, e))?;
    if !meta.is_file() || meta.nlink() > 1 {
        return Err(Error::Config(format!(
            "emulator: {} is not a plain file of its own (a FIFO, a device, or a file with \
             other links), so it is not the emulator's to replace: remove it",
            path.display()
        )));
    }
    file.set_len(0).map_err(|e| io("empty", path, e))?;
    Ok(file)
}

/// Opens a file the emulator made, to map or to read: like [`create_file`], never through a
/// symbolic link put in its place since (`O_NOFOLLOW`), because the model writes where it
/// maps; non-blocking, as the sync FIFOs need.
pub(crate) fn open_made(path: &Path, write: bool) -> Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io("open", path, e))
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    create_file(path)?
        .write_all(bytes.as_ref())
        .map_err(|e| io("write", path, e))
}

/// Makes the folder `dir/rel` one component at a time, refusing a symbolic link (or a file)
/// at any of them: `create_dir_all` would follow a link, and the files made below it would
/// land in the folder it points at. `dir` itself is the caller's and may be anything.
fn make_dirs(dir: &Path, rel: &Path) -> Result<PathBuf> {
    let mut path = dir.to_path_buf();
    for part in rel.components() {
        let Component::Normal(part) = part else {
            return Err(Error::Config(format!(
                "emulator: {} is not a path inside the folder",
                rel.display()
            )));
        };
        path.push(part);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => return Err(link_refused(&path)),
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::Config(format!(
                    "emulator: {} is not a folder; the emulator makes its files there",
                    path.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir(&path).map_err(|e| io("create", &path, e))?;
            }
            Err(e) => return Err(io("look at", &path, e)),
        }
    }
    Ok(path)
}

/// The sysfs folder of a buffer in the layout.
pub(crate) fn class_dir(dir: &Path, name: &str, old: bool) -> PathBuf {
    dir.join("sys")
        .join(CLASS_DIRS[usize::from(old)])
        .join(name)
}

/// The register page files of an accelerator.
pub(crate) fn page_paths(dir: &Path, accel: &str) -> (PathBuf, PathBuf, PathBuf) {
    let regs = dir.join("regs");
    (
        regs.join(format!("{accel}.ctrl")),
        regs.join(format!("{accel}.dma")),
        regs.join(format!("{accel}.reset")),
    )
}

fn check_layout(layout: &EmulatorLayout) -> Result<()> {
    layout.check_names()?;
    // The model times every transfer with it on the emulator's thread: a rate it cannot
    // divide by would panic there at the first transfer instead of failing here.
    if let Some(t) = &layout.timing {
        t.check()
            .map_err(|why| Error::Config(format!("emulator: {why}")))?;
    }
    for u in &layout.udmabufs {
        if u.size == 0 || u.size % 4096 != 0 {
            return Err(Error::Config(format!(
                "emulator: udmabuf {}: size {} is not a non-zero multiple of 4096",
                u.name, u.size
            )));
        }
        if u.phys_addr % 4096 != 0 || u.phys_addr.checked_add(u.size as u64).is_none() {
            return Err(Error::Config(format!(
                "emulator: udmabuf {}: phys_addr {:#x} is not 4 KiB aligned or overflows",
                u.name, u.phys_addr
            )));
        }
    }
    for (i, a) in layout.udmabufs.iter().enumerate() {
        let (a0, a1) = (a.phys_addr, a.phys_addr + a.size as u64);
        for b in &layout.udmabufs[i + 1..] {
            if a0 < b.phys_addr + b.size as u64 && b.phys_addr < a1 {
                return Err(Error::Config(format!(
                    "emulator: udmabufs {} and {} overlap in physical addresses",
                    a.name, b.name
                )));
            }
        }
    }
    Ok(())
}

/// Creates every file but the configuration, and returns the configuration.
pub(crate) fn create_without_config(dir: &Path, layout: &EmulatorLayout) -> Result<BoardConfig> {
    check_layout(layout)?;
    let dev = make_dirs(dir, Path::new("dev"))?;
    make_dirs(dir, Path::new("regs"))?;
    // Removing a link removes the link, not what it points at.
    let _ = fs::remove_file(dir.join(CONFIG_FILE));

    let mut udmabufs = Vec::new();
    for u in &layout.udmabufs {
        let dev_file = dev.join(&u.name);
        create_file(&dev_file)?
            .set_len(u.size as u64)
            .map_err(|e| io("size", &dev_file, e))?;
        let class = make_dirs(dir, &class_dir(Path::new(""), &u.name, u.old_class_path))?;
        write(&class.join("size"), format!("{}\n", u.size))?;
        write(&class.join("phys_addr"), format!("{:#018x}\n", u.phys_addr))?;
        for (attr, value) in [
            ("sync_mode", "1"),
            ("dma_coherent", "0"),
            ("sync_offset", "0"),
            ("sync_size", "0"),
            ("sync_direction", "0"),
            ("sync_owner", "0"),
        ] {
            write(&class.join(attr), format!("{value}\n"))?;
        }
        write(&class.join(ACK_FILE), [0u8; 16])?;
        for trigger in ["sync_for_cpu", "sync_for_device"] {
            let p = class.join(trigger);
            let _ = fs::remove_file(&p);
            nix::unistd::mkfifo(&p, Mode::S_IRUSR | Mode::S_IWUSR)
                .map_err(|e| io("make the FIFO", &p, e.into()))?;
        }
        udmabufs.push(UdmabufConfig {
            name: u.name.clone(),
            dev_root: dev.clone(),
            sysfs_root: dir.join("sys"),
            cache: u.cache,
            sync: u.sync,
            size: Some(u.size as u64),
            sync_ack: true,
        });
    }

    let bus = bus_path(dir);
    create_file(&bus)?
        .set_len(LOG_BYTES as u64)
        .map_err(|e| io("size", &bus, e))?;
    let mut accelerators = Vec::new();
    for (i, a) in layout.accelerators.iter().enumerate() {
        let (ctrl, dma, reset) = page_paths(dir, &a.name);
        write_page(&ctrl, &[])?;
        write_page(
            &dma,
            &[
                (MM2S_DMACR, DMACR_RESET_VALUE),
                (S2MM_DMACR, DMACR_RESET_VALUE),
                (MM2S_DMASR, DMASR_HALTED),
                (S2MM_DMASR, DMASR_HALTED),
            ],
        )?;
        // Tags: 3i the DMA, 3i + 1 the control page, 3i + 2 the reset GPIO.
        let block = |path: PathBuf, page: usize| RegisterBlock {
            path,
            offset: 0,
            len: PAGE_BYTES,
            bus_log: Some(bus.clone()),
            bus_tag: u16::try_from(3 * i + page).unwrap_or(u16::MAX),
            model_access_ns: layout
                .timing
                .as_ref()
                .map(|t| [t.register_write_ns, t.register_read_ns]),
        };
        let fft = a.kind == AccelKind::Fft;
        let reset = if fft && !a.no_reset_gpio {
            write_page(&reset, &[(0, 1)])?;
            Some(block(reset, 2))
        } else {
            None
        };
        accelerators.push(AcceleratorConfig {
            kind: a.kind,
            name: a.name.clone(),
            memory: a.memory.clone(),
            control: block(ctrl, 1),
            dma: block(dma, 0),
            reset,
            fft_config: if fft { a.fft_config } else { None },
            max_points: a.max_points,
            config_offset: None,
            max_floats: a.max_floats,
            dma_length_bits: 26,
            dma_address_bits: 32,
        });
    }
    if layout.accelerators.len() > usize::from(u16::MAX) / 3 {
        return Err(Error::Config(
            "emulator: too many accelerators for the bus log's tags".to_owned(),
        ));
    }
    let config = BoardConfig {
        poll_timeout_ms: layout.poll_timeout_ms,
        udmabufs,
        accelerators,
    };
    config.validate("emulator layout")?;
    Ok(config)
}

fn write_page(path: &Path, words: &[(usize, u32)]) -> Result<()> {
    let mut bytes = vec![0u8; PAGE_BYTES];
    for &(off, v) in words {
        bytes[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    write(path, bytes)
}

/// Writes the configuration atomically (a temporary file renamed into place).
pub(crate) fn write_config(dir: &Path, config: &BoardConfig) -> Result<()> {
    let text = config.to_toml()?;
    let tmp = dir.join(format!("{CONFIG_FILE}.tmp"));
    write(&tmp, text)?;
    let dst = dir.join(CONFIG_FILE);
    fs::rename(&tmp, &dst).map_err(|e| io("rename into", &dst, e))
}

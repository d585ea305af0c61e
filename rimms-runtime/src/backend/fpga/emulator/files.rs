//! The emulator's stand-in files: the buffer, its sysfs folder, the register pages, and the
//! board configuration that points at them.

use std::fs;
use std::path::{Path, PathBuf};

use nix::sys::stat::Mode;

use super::model::DMACR_RESET_VALUE;
use super::EmulatorLayout;
use crate::backend::fpga::axi_dma::{DMASR_HALTED, MM2S_DMACR, MM2S_DMASR, S2MM_DMACR, S2MM_DMASR};
use crate::backend::fpga::buslog::BusLog;
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
    Error::Config(format!("emulator: cannot {what} {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).map_err(|e| io("write", path, e))
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
    let dev = dir.join("dev");
    let regs = dir.join("regs");
    for d in [&dev, &regs] {
        fs::create_dir_all(d).map_err(|e| io("create", d, e))?;
    }
    let _ = fs::remove_file(dir.join(CONFIG_FILE));

    let mut udmabufs = Vec::new();
    for u in &layout.udmabufs {
        let dev_file = dev.join(&u.name);
        let f = fs::File::create(&dev_file).map_err(|e| io("create", &dev_file, e))?;
        f.set_len(u.size as u64)
            .map_err(|e| io("size", &dev_file, e))?;
        let class = class_dir(dir, &u.name, u.old_class_path);
        fs::create_dir_all(&class).map_err(|e| io("create", &class, e))?;
        write(&class.join("size"), &format!("{}\n", u.size))?;
        write(
            &class.join("phys_addr"),
            &format!("{:#018x}\n", u.phys_addr),
        )?;
        for (attr, value) in [
            ("sync_mode", "1"),
            ("dma_coherent", "0"),
            ("sync_offset", "0"),
            ("sync_size", "0"),
            ("sync_direction", "0"),
            ("sync_owner", "0"),
        ] {
            write(&class.join(attr), &format!("{value}\n"))?;
        }
        let ack = class.join(ACK_FILE);
        fs::write(&ack, [0u8; 16]).map_err(|e| io("write", &ack, e))?;
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
    BusLog::create(&bus).map_err(|e| io("create", &bus, e))?;
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
    fs::write(path, bytes).map_err(|e| io("write", path, e))
}

/// Writes the configuration atomically (a temporary file renamed into place).
pub(crate) fn write_config(dir: &Path, config: &BoardConfig) -> Result<()> {
    let text = config.to_toml()?;
    let tmp = dir.join(format!("{CONFIG_FILE}.tmp"));
    write(&tmp, &text)?;
    let dst = dir.join(CONFIG_FILE);
    fs::rename(&tmp, &dst).map_err(|e| io("rename into", &dst, e))
}

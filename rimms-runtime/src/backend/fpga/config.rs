//! The board configuration: which u-dma-buf devices, which accelerators, where their registers
//! are, their limits, and how long a wait may last.
//!
//! Everything device-specific comes from this file, so the same driver runs on a ZCU102-like
//! board (`/dev/mem` at the addresses of the block design, `/sys` for u-dma-buf) and against the
//! emulator (files in a temporary folder). The format is TOML; `docs/board-example.toml` is a
//! commented example for a 2-FFT + 2-ZIP board. Unknown keys are refused (a typo is an error,
//! not a silent default) and every error names the key and the file.
//!
//! ```toml
//! poll_timeout_ms = 200            # bound on every wait for the hardware, 1 … 60000
//!
//! [[udmabuf]]
//! name = "udmabuf0"                # /dev/udmabuf0, /sys/class/u-dma-buf/udmabuf0
//! dev_root = "/dev"                # default
//! sysfs_root = "/sys"              # default
//! cache = "cached"                 # cached (explicit sync) | uncached (O_SYNC)
//! sync = "packed"                  # packed | attributes
//!
//! [[accelerator]]
//! kind = "fft"                     # fft | zip
//! name = "fft0"
//! memory = "udmabuf0"              # the u-dma-buf its DMA reads and writes
//! control = { path = "/dev/mem", offset = 0xA000_0000 }
//! dma = { path = "/dev/mem", offset = 0xA001_0000 }
//! reset = { path = "/dev/mem", offset = 0xA002_0000 }  # the FFT's reset GPIO
//! fft_config = "gpio"              # gpio (CEDR's ZCU102 images) | register (fft_axi_config)
//! max_points = 2048
//! ```
//!
//! `docs/boards/` holds the files for CEDR's published ZCU102 images.
//!
//! Relative paths are taken from the configuration file's folder when it is loaded with
//! [`BoardConfig::load`].

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::axi_dma::{DmaLimits, S2MM_LENGTH};
use super::fft_ip::{FFT_MAX_POINTS, FFT_MIN_POINTS};
use super::udmabuf::{CacheMode, SyncMethod};
use super::zip_ip::{ZIP_DEFAULT_MAX_FLOATS, ZIP_OP_REG};
use crate::hal::{Error, Result};
use crate::input_file::{read_text_capped, InputFileError};

/// The most bytes a board file may have: 4 MiB, a thousand times the commented example of
/// a 2-FFT + 2-ZIP board (`docs/board-example.toml`, 4 KiB), so that a board of hundreds of
/// accelerators fits and a path to a runaway file is refused instead of read.
pub const MAX_BOARD_FILE_BYTES: u64 = 4 << 20;

/// What an accelerator instance computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccelKind {
    /// The FFT core.
    Fft,
    /// The ZIP core.
    Zip,
}

impl std::fmt::Display for AccelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AccelKind::Fft => "fft",
            AccelKind::Zip => "zip",
        })
    }
}

fn default_timeout_ms() -> u64 {
    200
}

/// The longest `poll_timeout_ms` taken: one minute. Every wait for the hardware lasts up to
/// this when nothing answers (no emulator running, a board that is not there), so a larger
/// value would read to the user as a hang rather than as an error.
pub const MAX_POLL_TIMEOUT_MS: u64 = 60_000;
fn default_dev_root() -> PathBuf {
    PathBuf::from("/dev")
}
fn default_sysfs_root() -> PathBuf {
    PathBuf::from("/sys")
}
fn default_page_len() -> usize {
    0x1000
}
fn default_length_bits() -> u32 {
    26
}
fn default_address_bits() -> u32 {
    32
}

/// A whole board.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardConfig {
    /// Bound on every wait for the hardware (reset, start, completion), in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub poll_timeout_ms: u64,
    /// The u-dma-buf devices (`[[udmabuf]]` tables).
    #[serde(rename = "udmabuf")]
    pub udmabufs: Vec<UdmabufConfig>,
    /// The accelerator instances (`[[accelerator]]` tables), in device order: the n-th is
    /// `fpga(n)`.
    #[serde(rename = "accelerator", default)]
    pub accelerators: Vec<AcceleratorConfig>,
}

/// One u-dma-buf device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdmabufConfig {
    /// Device name: `/dev/<name>` and the sysfs folder `<name>`.
    pub name: String,
    /// Folder holding the device node.
    #[serde(default = "default_dev_root")]
    pub dev_root: PathBuf,
    /// The sysfs root (`class/u-dma-buf/<name>` or `class/udmabuf/<name>` below it).
    #[serde(default = "default_sysfs_root")]
    pub sysfs_root: PathBuf,
    /// Cached with explicit maintenance, or uncached.
    #[serde(default)]
    pub cache: CacheMode,
    /// How maintenance is asked for.
    #[serde(default)]
    pub sync: SyncMethod,
    /// Expected size in bytes; when given, sysfs must agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Emulator only: after each sync write, wait for the emulator's acknowledgement (a
    /// board's sysfs write returns when the maintenance is done; the emulator's FIFO does not).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sync_ack: bool,
}

/// Whether `name` can be one component of a path: not empty, no `/` or NUL, not `.` or `..`.
/// A u-dma-buf's name is a file under `dev_root` and a folder under `sysfs_root`, and the
/// emulator makes files named for every buffer and core: any other name would reach outside
/// the folder it is joined to.
pub(crate) fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// Where one control block's registers are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterBlock {
    /// The file to map: `/dev/mem`, `/dev/uioN`, or an emulator page file.
    pub path: PathBuf,
    /// Byte offset in it: the physical address for `/dev/mem`, N × page size for UIO map N.
    #[serde(default)]
    pub offset: u64,
    /// Bytes to map.
    #[serde(default = "default_page_len")]
    pub len: usize,
    /// Emulator only: the bus log every write to this page is appended to
    /// ([`super::buslog`]). A board has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_log: Option<PathBuf>,
    /// Emulator only: this page's tag in the bus log.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bus_tag: u16,
    /// Emulator with a timing model only: the modelled time of one register write and one
    /// read, in nanoseconds; the driver waits that long on each access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_access_ns: Option<[u64; 2]>,
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

impl RegisterBlock {
    /// A block of `len` bytes at `offset` in `path`, with no bus log.
    pub fn new(path: impl Into<PathBuf>, offset: u64, len: usize) -> Self {
        Self {
            path: path.into(),
            offset,
            len,
            bus_log: None,
            bus_tag: 0,
            model_access_ns: None,
        }
    }
}

/// How an FFT core's configuration channel (`s_axis_config`) is driven.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FftConfigPath {
    /// An AXI GPIO (CEDR's ZCU102 images, `FFT_CONFIG_VIA_GPIO`): channel 1 (data 0x00, tri
    /// 0x04) is `tvalid`, channel 2 (data 0x08, tri 0x0C) is `tdata`.
    #[default]
    Gpio,
    /// A register that pushes the word when written (CEDR's `fft_axi_config` IP), at
    /// `config_offset` in the control page.
    Register,
}

/// One accelerator instance: a core and its AXI DMA.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceleratorConfig {
    /// FFT or ZIP.
    pub kind: AccelKind,
    /// Instance name, unique on the board.
    pub name: String,
    /// Name of the u-dma-buf its DMA uses.
    pub memory: String,
    /// The core's control page.
    pub control: RegisterBlock,
    /// The AXI DMA's register page.
    pub dma: RegisterBlock,
    /// FFT only: the reset GPIO that resets the core together with its DMA (active low, on
    /// channel 1). Strongly advised: without it a fault can leave a partial frame in the core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<RegisterBlock>,
    /// FFT only: how the configuration word reaches the core (default `gpio`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fft_config: Option<FftConfigPath>,
    /// FFT only: largest transform (power of two, 8..=2048; default 2048).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_points: Option<usize>,
    /// FFT only, `fft_config = "register"`: offset of the configuration register in the
    /// control page (default 0x00).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_offset: Option<usize>,
    /// ZIP only: the most floats per input the core holds (default 4096, CEDR's image). A
    /// complex element is two floats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_floats: Option<usize>,
    /// Width of the DMA's LENGTH field (8..=26, default 26).
    #[serde(default = "default_length_bits")]
    pub dma_length_bits: u32,
    /// The DMA's address width (32..=64, default 32).
    #[serde(default = "default_address_bits")]
    pub dma_address_bits: u32,
}

impl AcceleratorConfig {
    /// The DMA limits it configures.
    pub fn dma_limits(&self) -> DmaLimits {
        DmaLimits {
            length_bits: self.dma_length_bits,
            address_bits: self.dma_address_bits,
        }
    }

    /// Largest FFT (default 2048).
    pub fn fft_max_points(&self) -> usize {
        self.max_points.unwrap_or(FFT_MAX_POINTS)
    }

    /// Most floats per ZIP input (default 4096).
    pub fn zip_max_floats(&self) -> usize {
        self.max_floats.unwrap_or(ZIP_DEFAULT_MAX_FLOATS)
    }

    /// What names this instance's timeline on the virtual clock: its DMA register file, the
    /// one thing the driver and an in-process emulator both know it by that no other board in
    /// the process shares (two emulated boards both have an `fft0`).
    pub fn clock_key(&self) -> String {
        self.dma.path.display().to_string()
    }

    /// How the FFT configuration is written (default GPIO).
    pub fn fft_config_path(&self) -> FftConfigPath {
        self.fft_config.unwrap_or_default()
    }
}

impl BoardConfig {
    /// Parses and checks a configuration; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self> {
        let cfg: BoardConfig =
            toml::from_str(text).map_err(|e| Error::Config(format!("{origin}: {e}")))?;
        cfg.validate(origin)?;
        Ok(cfg)
    }

    /// Reads, parses and checks a configuration file; relative paths in it are resolved
    /// against the file's folder. Anything but a regular file of at most
    /// [`MAX_BOARD_FILE_BYTES`] is refused without being read (see [`crate::input_file`]).
    pub fn load(path: &Path) -> Result<Self> {
        let text = read_text_capped(path, MAX_BOARD_FILE_BYTES, "board file").map_err(|e| {
            Error::Config(match e {
                InputFileError::Io { source, .. } => {
                    format!("{}: cannot read: {source}", path.display())
                }
                other => other.to_string(),
            })
        })?;
        let mut cfg = Self::from_toml_str(&text, &path.display().to_string())?;
        if let Some(dir) = path.parent() {
            cfg.resolve_relative(dir);
        }
        Ok(cfg)
    }

    /// The configuration as TOML.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string_pretty(self).map_err(|e| Error::Config(format!("cannot write TOML: {e}")))
    }

    /// The bound on every wait.
    pub fn poll_timeout(&self) -> Duration {
        Duration::from_millis(self.poll_timeout_ms)
    }

    fn resolve_relative(&mut self, dir: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        for u in &mut self.udmabufs {
            fix(&mut u.dev_root);
            fix(&mut u.sysfs_root);
        }
        for a in &mut self.accelerators {
            for block in [Some(&mut a.control), Some(&mut a.dma), a.reset.as_mut()]
                .into_iter()
                .flatten()
            {
                fix(&mut block.path);
                if let Some(log) = &mut block.bus_log {
                    fix(log);
                }
            }
        }
    }

    /// Checks what serde cannot: names unique and resolvable, limits within the hardware's.
    pub fn validate(&self, origin: &str) -> Result<()> {
        let bad = |key: String, why: String| Err(Error::Config(format!("{origin}: {key}: {why}")));
        if self.poll_timeout_ms == 0 {
            return bad("poll_timeout_ms".into(), "must be at least 1".into());
        }
        if self.poll_timeout_ms > MAX_POLL_TIMEOUT_MS {
            return bad(
                "poll_timeout_ms".into(),
                format!(
                    "{} ms is more than the longest wait taken, {MAX_POLL_TIMEOUT_MS} ms (one minute)",
                    self.poll_timeout_ms
                ),
            );
        }
        if self.udmabufs.is_empty() {
            return bad(
                "udmabuf".into(),
                "at least one [[udmabuf]] is needed".into(),
            );
        }
        let mut names = HashSet::new();
        for (i, u) in self.udmabufs.iter().enumerate() {
            if !is_plain_file_name(&u.name) {
                return bad(
                    format!("udmabuf[{i}].name"),
                    format!(
                        "{:?} is not a device name (a plain file name: not empty, no `/` or NUL, not `.` or `..`)",
                        u.name
                    ),
                );
            }
            if !names.insert(u.name.as_str()) {
                return bad(
                    format!("udmabuf[{i}].name"),
                    format!("{:?} appears twice", u.name),
                );
            }
        }
        let mut accel_names = HashSet::new();
        for (i, a) in self.accelerators.iter().enumerate() {
            let key = |k: &str| format!("accelerator[{i}].{k}");
            if !is_plain_file_name(&a.name) {
                return bad(
                    key("name"),
                    format!(
                        "{:?} is not a plain file name (not empty, no `/` or NUL, not `.` or `..`): the emulator names files for it",
                        a.name
                    ),
                );
            }
            if !accel_names.insert(a.name.as_str()) {
                return bad(key("name"), format!("{:?} appears twice", a.name));
            }
            if !names.contains(a.memory.as_str()) {
                return bad(
                    key("memory"),
                    format!("no [[udmabuf]] is named {:?}", a.memory),
                );
            }
            if !(8..=26).contains(&a.dma_length_bits) {
                return bad(
                    key("dma_length_bits"),
                    format!("{} is not in 8..=26", a.dma_length_bits),
                );
            }
            if !(32..=64).contains(&a.dma_address_bits) {
                return bad(
                    key("dma_address_bits"),
                    format!("{} is not in 32..=64", a.dma_address_bits),
                );
            }
            let blocks = [
                ("dma", Some(&a.dma), S2MM_LENGTH + 4),
                ("control", Some(&a.control), 4),
                ("reset", a.reset.as_ref(), 8),
            ];
            for (k, block, min) in blocks
                .into_iter()
                .filter_map(|(k, b, m)| b.map(|b| (k, b, m)))
            {
                if block.len < min || block.len % 4 != 0 {
                    return bad(
                        format!("{}.len", key(k)),
                        format!("{} bytes cannot hold the block's registers (at least {min}, a multiple of 4)", block.len),
                    );
                }
            }
            match a.kind {
                AccelKind::Fft => {
                    if a.max_floats.is_some() {
                        return bad(key("max_floats"), "applies to zip accelerators only".into());
                    }
                    let gpio = a.fft_config_path() == FftConfigPath::Gpio;
                    if gpio && a.config_offset.is_some() {
                        return bad(
                            key("config_offset"),
                            "applies to fft_config = \"register\" only (the GPIO's registers are fixed)".into(),
                        );
                    }
                    if gpio && a.control.len < 0x10 {
                        return bad(
                            key("control.len"),
                            format!(
                                "{} bytes cannot hold the config GPIO's registers (0x00..0x10)",
                                a.control.len
                            ),
                        );
                    }
                    let n = a.fft_max_points();
                    if !n.is_power_of_two() || !(FFT_MIN_POINTS..=FFT_MAX_POINTS).contains(&n) {
                        return bad(
                            key("max_points"),
                            format!(
                                "{n} is not a power of two in {FFT_MIN_POINTS}..={FFT_MAX_POINTS}"
                            ),
                        );
                    }
                    let off = a.config_offset.unwrap_or(0);
                    // Checked: a configuration built in code can hold any usize here.
                    if off % 4 != 0 || off.checked_add(4).is_none_or(|end| end > a.control.len) {
                        return bad(
                            key("config_offset"),
                            format!("{off:#x} is not an aligned register inside the control page"),
                        );
                    }
                }
                AccelKind::Zip => {
                    if a.max_points.is_some() {
                        return bad(key("max_points"), "applies to fft accelerators only".into());
                    }
                    for (k, set) in [
                        ("config_offset", a.config_offset.is_some()),
                        ("fft_config", a.fft_config.is_some()),
                        ("reset", a.reset.is_some()),
                    ] {
                        if set {
                            return bad(key(k), "applies to fft accelerators only".into());
                        }
                    }
                    let n = a.zip_max_floats();
                    if !(2..=(1 << 24)).contains(&n) {
                        return bad(key("max_floats"), format!("{n} is not in 2..=16777216"));
                    }
                    if a.control.len < ZIP_OP_REG + 4 {
                        return bad(
                            key("control.len"),
                            format!(
                                "{} bytes cannot hold the op register at {ZIP_OP_REG:#x}",
                                a.control.len
                            ),
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        [[udmabuf]]
        name = "udmabuf0"

        [[accelerator]]
        kind = "zip"
        name = "zip0"
        memory = "udmabuf0"
        control = { path = "/dev/mem", offset = 0xA002_0000 }
        dma = { path = "/dev/mem", offset = 0xA003_0000 }
    "#;

    #[test]
    fn defaults_fill_in() {
        let c = BoardConfig::from_toml_str(MINIMAL, "minimal").unwrap();
        assert_eq!(c.poll_timeout(), Duration::from_millis(200));
        assert_eq!(c.udmabufs[0].dev_root, PathBuf::from("/dev"));
        assert_eq!(c.udmabufs[0].cache, CacheMode::Cached);
        assert_eq!(c.udmabufs[0].sync, SyncMethod::Packed);
        let a = &c.accelerators[0];
        assert_eq!(
            (a.kind, a.zip_max_floats(), a.dma.len),
            (AccelKind::Zip, 4096, 4096)
        );
        assert_eq!(a.control.offset, 0xA002_0000);
        assert_eq!(a.dma_limits(), DmaLimits::default());
        // Round trip through TOML.
        let again = BoardConfig::from_toml_str(&c.to_toml().unwrap(), "again").unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn bad_values_name_their_key() {
        let e = |text: &str| {
            BoardConfig::from_toml_str(text, "t.toml")
                .unwrap_err()
                .to_string()
        };
        let m = e(&MINIMAL.replace("memory = \"udmabuf0\"", "memory = \"udmabuf9\""));
        assert!(
            m.contains("accelerator[0].memory") && m.contains("udmabuf9"),
            "{m}"
        );
        let m = e(&MINIMAL.replace("kind = \"zip\"", "kind = \"fft\"\n max_points = 4096"));
        assert!(m.contains("accelerator[0].max_points"), "{m}");
        let m = e(&MINIMAL.replace("kind = \"zip\"", "kind = \"gemm\""));
        assert!(m.contains("gemm") && m.contains("t.toml"), "{m}");
        let m = e(&MINIMAL.replace("name = \"zip0\"", "name = \"zip0\"\n colour = 3"));
        assert!(m.contains("colour"), "{m}");
        let m = e(&format!("poll_timeout_ms = 0\n{MINIMAL}"));
        assert!(m.contains("poll_timeout_ms"), "{m}");
        let m = e(&format!("poll_timeout_ms = {}\n{MINIMAL}", i64::MAX));
        assert!(
            m.contains("poll_timeout_ms") && m.contains("60000 ms") && m.contains("t.toml"),
            "{m}"
        );
    }

    /// The fields are public, so a program can build a configuration TOML cannot express: a
    /// `config_offset` near `usize::MAX` overflowed `off + 4` in `validate` (a panic in a debug
    /// build, a wrapped sum that passed the check in a release build). It must be an error
    /// naming the key.
    #[test]
    fn a_config_offset_at_the_top_of_usize_is_an_error_not_an_overflow() {
        let text = MINIMAL.replace(
            "kind = \"zip\"",
            "kind = \"fft\"\n fft_config = \"register\"",
        );
        let mut c = BoardConfig::from_toml_str(&text, "t.toml").unwrap();
        c.accelerators[0].config_offset = Some(usize::MAX - 3);
        let m = c.validate("t.toml").unwrap_err().to_string();
        assert!(m.contains("accelerator[0].config_offset"), "{m}");
    }
}

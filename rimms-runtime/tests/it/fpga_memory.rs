//! u-dma-buf memory and the board configuration, against hand-made sysfs trees (no emulator):
//! both sysfs class paths, the errors for missing and malformed files, the exact text every
//! cache-maintenance request writes, and the example configuration.

use std::fs;
use std::path::{Path, PathBuf};

use rimms_runtime::backend::fpga::udmabuf::{decode_packed, parse_number};
use rimms_runtime::backend::fpga::{
    AccelKind, BoardConfig, CacheMode, FpgaFault, SyncDirection, SyncMethod, Udmabuf, UdmabufConfig,
};
use rimms_runtime::BackendError;

const SIZE: usize = 64 * 1024;

/// Writes a u-dma-buf's sysfs folder and device file; returns the folder.
fn fake(root: &Path, class: &str, name: &str, size: &str, phys: &str) -> PathBuf {
    let class_dir = root.join("sys").join(class).join(name);
    fs::create_dir_all(&class_dir).unwrap();
    fs::write(class_dir.join("size"), size).unwrap();
    fs::write(class_dir.join("phys_addr"), phys).unwrap();
    for a in [
        "sync_for_cpu",
        "sync_for_device",
        "sync_offset",
        "sync_size",
        "sync_direction",
    ] {
        fs::write(class_dir.join(a), "").unwrap();
    }
    fs::create_dir_all(root.join("dev")).unwrap();
    let f = fs::File::create(root.join("dev").join(name)).unwrap();
    f.set_len(SIZE as u64).unwrap();
    class_dir
}

fn config(root: &Path, name: &str, sync: SyncMethod) -> UdmabufConfig {
    UdmabufConfig {
        name: name.to_owned(),
        dev_root: root.join("dev"),
        sysfs_root: root.join("sys"),
        cache: CacheMode::Cached,
        sync,
        size: None,
        sync_ack: false,
    }
}

fn file_fault(e: BackendError) -> (PathBuf, String) {
    match e.fpga_fault() {
        Some((_, FpgaFault::File { path, what })) => (path.clone(), what.clone()),
        _ => panic!("expected a file fault, got {e:?}"),
    }
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

#[test]
fn the_new_class_path_is_read_and_the_mapping_is_the_device() {
    let dir = tempfile::tempdir().unwrap();
    fake(
        dir.path(),
        "class/u-dma-buf",
        "udmabuf0",
        "65536\n",
        "0x0000000070000000\n",
    );
    let buf = Udmabuf::open(&config(dir.path(), "udmabuf0", SyncMethod::Packed)).unwrap();
    assert_eq!(buf.len(), SIZE);
    assert_eq!(buf.phys_addr(), 0x7000_0000);
    assert_eq!(buf.phys_of(0x100).unwrap(), 0x7000_0100);
    assert_eq!(
        buf.phys_of(SIZE).unwrap(),
        0x7001_0000,
        "the end address is allowed"
    );
    assert!(buf.phys_of(SIZE + 1).is_err());
    assert!(buf.class_dir().ends_with("class/u-dma-buf/udmabuf0"));

    buf.write_f32(0x40, &[1.5, -2.0]).unwrap();
    let mut back = [0.0f32; 2];
    buf.read_f32(0x40, &mut back).unwrap();
    assert_eq!(back, [1.5, -2.0]);
    assert!(
        buf.write_f32(SIZE - 4, &[1.0, 2.0]).is_err(),
        "past the end"
    );
    assert!(buf.write_f32(2, &[1.0]).is_err(), "misaligned");
    drop(buf);
    // The mapping is the device file itself (MAP_SHARED), as a u-dma-buf mapping is its memory.
    let bytes = fs::read(dir.path().join("dev/udmabuf0")).unwrap();
    assert_eq!(&bytes[0x40..0x44], &1.5f32.to_ne_bytes());
}

#[test]
fn the_old_class_path_is_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    fake(
        dir.path(),
        "class/udmabuf",
        "udmabuf1",
        "65536",
        "1879048192",
    );
    let buf = Udmabuf::open(&config(dir.path(), "udmabuf1", SyncMethod::Packed)).unwrap();
    assert!(buf.class_dir().ends_with("class/udmabuf/udmabuf1"));
    assert_eq!(buf.phys_addr(), 0x7000_0000, "decimal phys_addr parses too");
}

#[test]
fn missing_and_malformed_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();

    let (path, what) =
        file_fault(Udmabuf::open(&config(root, "nothere", SyncMethod::Packed)).unwrap_err());
    assert!(path.ends_with("class/u-dma-buf/nothere"), "{path:?}");
    assert!(
        what.contains("class/udmabuf/nothere"),
        "both places named: {what}"
    );

    let class = fake(root, "class/u-dma-buf", "u0", "65536", "0x70000000");
    fs::remove_file(class.join("size")).unwrap();
    let (path, what) =
        file_fault(Udmabuf::open(&config(root, "u0", SyncMethod::Packed)).unwrap_err());
    assert_eq!(path, class.join("size"));
    assert!(what.contains("cannot read"), "{what}");

    fs::write(class.join("size"), "65536").unwrap();
    fs::write(class.join("phys_addr"), "garbage\n").unwrap();
    let (path, what) =
        file_fault(Udmabuf::open(&config(root, "u0", SyncMethod::Packed)).unwrap_err());
    assert_eq!(path, class.join("phys_addr"));
    assert!(
        what.contains("not a number") && what.contains("garbage"),
        "{what}"
    );

    fs::write(class.join("phys_addr"), "0x70000000").unwrap();
    let mut cfg = config(root, "u0", SyncMethod::Packed);
    cfg.size = Some(1 << 20);
    let (path, what) = file_fault(Udmabuf::open(&cfg).unwrap_err());
    assert_eq!(path, class.join("size"));
    assert!(
        what.contains("size mismatch") && what.contains("1048576"),
        "{what}"
    );

    fs::write(class.join("size"), "131072").unwrap();
    let (path, what) =
        file_fault(Udmabuf::open(&config(root, "u0", SyncMethod::Packed)).unwrap_err());
    assert_eq!(
        path,
        root.join("dev/u0"),
        "the device file is shorter than sysfs says"
    );
    assert!(what.contains("size mismatch"), "{what}");

    fs::write(class.join("size"), "65536").unwrap();
    fs::remove_file(root.join("dev/u0")).unwrap();
    let (path, what) =
        file_fault(Udmabuf::open(&config(root, "u0", SyncMethod::Packed)).unwrap_err());
    assert_eq!(path, root.join("dev/u0"));
    assert!(what.contains("cannot open"), "{what}");
}

#[test]
fn packed_sync_writes_exactly_the_range_asked() {
    let dir = tempfile::tempdir().unwrap();
    let class = fake(
        dir.path(),
        "class/u-dma-buf",
        "udmabuf0",
        "65536",
        "0x70000000",
    );
    let buf = Udmabuf::open(&config(dir.path(), "udmabuf0", SyncMethod::Packed)).unwrap();
    let decoded = |attr: &str| decode_packed(parse_number(&read(&class.join(attr))).unwrap());

    buf.sync_for_device(0x1000, 0x800).unwrap();
    assert_eq!(read(&class.join("sync_for_device")), "0x0000100000000805\n");
    assert_eq!(
        decoded("sync_for_device"),
        Some((0x1000, 0x800, SyncDirection::ToDevice))
    );

    buf.sync_for_cpu(0x2000, 0x40).unwrap();
    assert_eq!(read(&class.join("sync_for_cpu")), "0x0000200000000049\n");
    assert_eq!(
        decoded("sync_for_cpu"),
        Some((0x2000, 0x40, SyncDirection::FromDevice))
    );

    // The format's size field is 16-byte granular: a clean of 0x18..0x28 widens to
    // 0x10..0x30 (an invalidation off the grid takes the exact attribute method instead).
    buf.sync_for_device(0x18, 0x10).unwrap();
    assert_eq!(
        decoded("sync_for_device"),
        Some((0x10, 0x20, SyncDirection::ToDevice))
    );

    // Zero length and a range past the end write nothing.
    let before = read(&class.join("sync_for_cpu"));
    buf.sync_for_cpu(0x100, 0).unwrap();
    assert!(buf.sync_for_cpu(SIZE - 16, 32).is_err());
    assert_eq!(read(&class.join("sync_for_cpu")), before);
    assert_eq!(buf.sync_counts(), (1, 2));
    // The attribute files were not touched.
    assert_eq!(read(&class.join("sync_offset")), "");
}

#[test]
fn attribute_sync_writes_offset_size_direction_then_the_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let class = fake(
        dir.path(),
        "class/u-dma-buf",
        "udmabuf0",
        "65536",
        "0x70000000",
    );
    let buf = Udmabuf::open(&config(dir.path(), "udmabuf0", SyncMethod::Attributes)).unwrap();
    buf.sync_for_device(0x1234, 0x56).unwrap();
    assert_eq!(read(&class.join("sync_offset")), "4660\n");
    assert_eq!(read(&class.join("sync_size")), "86\n");
    assert_eq!(read(&class.join("sync_direction")), "1\n");
    assert_eq!(read(&class.join("sync_for_device")), "1\n");
    assert_eq!(read(&class.join("sync_for_cpu")), "");
    buf.sync_for_cpu(0x8000, 0x2000).unwrap();
    assert_eq!(read(&class.join("sync_offset")), "32768\n");
    assert_eq!(read(&class.join("sync_size")), "8192\n");
    assert_eq!(read(&class.join("sync_direction")), "2\n");
    assert_eq!(read(&class.join("sync_for_cpu")), "1\n");
}

#[test]
fn an_uncached_mapping_needs_no_maintenance() {
    let dir = tempfile::tempdir().unwrap();
    let class = fake(
        dir.path(),
        "class/u-dma-buf",
        "udmabuf0",
        "65536",
        "0x70000000",
    );
    fs::remove_file(class.join("sync_for_cpu")).unwrap();
    let mut cfg = config(dir.path(), "udmabuf0", SyncMethod::Packed);
    cfg.cache = CacheMode::Uncached;
    let buf = Udmabuf::open(&cfg).unwrap();
    buf.sync_for_cpu(0, 4096).unwrap();
    assert_eq!(buf.sync_counts(), (0, 0));
    assert!(!class.join("sync_for_cpu").exists());
}

#[test]
fn a_sync_fifo_nobody_reads_is_a_clear_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let class = fake(
        dir.path(),
        "class/u-dma-buf",
        "udmabuf0",
        "65536",
        "0x70000000",
    );
    fs::remove_file(class.join("sync_for_cpu")).unwrap();
    nix::unistd::mkfifo(&class.join("sync_for_cpu"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let buf = Udmabuf::open(&config(dir.path(), "udmabuf0", SyncMethod::Packed)).unwrap();
    let (path, what) = file_fault(buf.sync_for_cpu(0, 64).unwrap_err());
    assert_eq!(path, class.join("sync_for_cpu"));
    assert!(what.contains("emulator"), "{what}");
}

fn example_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/board-example.toml")
}

#[test]
fn the_example_configuration_parses() {
    let cfg = BoardConfig::load(&example_path()).unwrap();
    assert_eq!(cfg.poll_timeout_ms, 200);
    assert_eq!(cfg.udmabufs.len(), 1);
    assert_eq!(cfg.udmabufs[0].size, Some(1 << 20));
    let kinds: Vec<_> = cfg
        .accelerators
        .iter()
        .map(|a| (a.kind, a.name.as_str()))
        .collect();
    assert_eq!(kinds, [(AccelKind::Fft, "fft0"), (AccelKind::Fft, "fft1")]);
    assert_eq!(cfg.accelerators[0].dma.path, PathBuf::from("/dev/mem"));
    assert_eq!(cfg.accelerators[0].fft_max_points(), 2048);
    // The addresses themselves are checked against CEDR's in fpga_boards.rs.
}

#[test]
fn a_missing_key_is_named() {
    let text = read(&example_path());
    // Drop the first accelerator's `memory` line.
    let broken = text.replacen("memory = \"udmabuf0\"", "", 1);
    let e = BoardConfig::from_toml_str(&broken, "example")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing field `memory`"), "{e}");
    let broken = text.replacen("kind = \"fft\"", "", 1);
    let e = BoardConfig::from_toml_str(&broken, "example")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing field `kind`"), "{e}");
    let broken = text.replacen("name = \"udmabuf0\"", "", 1);
    let e = BoardConfig::from_toml_str(&broken, "example")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing field `name`"), "{e}");
}

#[test]
fn relative_paths_are_taken_from_the_configuration_folder() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[[udmabuf]]\nname = \"u0\"\ndev_root = \"dev\"\nsysfs_root = \"sys\"\n\n\
                [[accelerator]]\nkind = \"fft\"\nname = \"f\"\nmemory = \"u0\"\n\
                control = { path = \"regs/f.ctrl\" }\ndma = { path = \"/abs/f.dma\" }\n";
    let path = dir.path().join("board.toml");
    fs::write(&path, text).unwrap();
    let cfg = BoardConfig::load(&path).unwrap();
    assert_eq!(cfg.udmabufs[0].dev_root, dir.path().join("dev"));
    assert_eq!(
        cfg.accelerators[0].control.path,
        dir.path().join("regs/f.ctrl")
    );
    assert_eq!(cfg.accelerators[0].dma.path, PathBuf::from("/abs/f.dma"));
    let e = BoardConfig::load(&dir.path().join("none.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("none.toml"), "{e}");
}

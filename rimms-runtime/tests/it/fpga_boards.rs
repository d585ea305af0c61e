//! The shipped board files reproduce CEDR's published address maps exactly. The reference
//! numbers below are copied by hand from CEDR's `libdash/platform.h` (the
//! `DASH_ZCU102_2020_2` and `DASH_ZCU102_10FFT_2MMULT_2ZIP_HWSCHEDULER` blocks) and `zip.h`
//! (`REQUIRED_BUFFER_SIZE = 4096*3*sizeof(float)`: 4,096 floats per input), not derived from the
//! files under test.

use std::path::{Path, PathBuf};

use rimms_runtime::backend::fpga::{AccelKind, BoardConfig, FftConfigPath};

fn docs(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(rel)
}

const MIB: u64 = 1 << 20;

/// One FFT of an image: control (config GPIO), DMA, reset GPIO.
type Fft = (u64, u64, u64);

fn check_ffts(cfg: &BoardConfig, memory: &str, want: &[Fft]) {
    let ffts: Vec<_> = cfg
        .accelerators
        .iter()
        .filter(|a| a.kind == AccelKind::Fft)
        .collect();
    assert_eq!(ffts.len(), want.len());
    for (i, (a, &(ctrl, dma, reset))) in ffts.iter().zip(want).enumerate() {
        assert_eq!(a.name, format!("fft{i}"));
        assert_eq!(a.memory, memory, "fft{i}");
        assert_eq!(a.control.offset, ctrl, "fft{i} control");
        assert_eq!(a.dma.offset, dma, "fft{i} DMA");
        assert_eq!(
            a.reset.as_ref().map(|r| r.offset),
            Some(reset),
            "fft{i} reset GPIO"
        );
        for block in [&a.control, &a.dma] {
            assert_eq!(block.path, PathBuf::from("/dev/mem"));
            assert_eq!(block.bus_log, None, "a board has no bus log");
        }
        assert_eq!(
            a.fft_config_path(),
            FftConfigPath::Gpio,
            "FFT_CONFIG_VIA_GPIO"
        );
        assert_eq!(a.fft_max_points(), 2048);
        assert_eq!(a.dma_limits().length_bits, 26);
    }
}

#[test]
fn zcu102_2020_2_matches_cedrs_platform_header() {
    let cfg = BoardConfig::load(&docs("board-example.toml")).unwrap();
    assert_eq!(cfg.udmabufs.len(), 1);
    assert_eq!(cfg.udmabufs[0].name, "udmabuf0", "FFT_UDMABUF_NUM 0");
    assert_eq!(cfg.udmabufs[0].size, Some(MIB), "GLOBAL_UDMABUF_SIZE");
    check_ffts(
        &cfg,
        "udmabuf0",
        &[
            (0xA000_0000, 0xA001_0000, 0xA002_0000),
            (0xA003_0000, 0xA004_0000, 0xA005_0000),
        ],
    );
    assert_eq!(cfg.accelerators.len(), 2, "the image has no ZIP core");
}

#[test]
fn zcu102_10fft_2zip_matches_cedrs_platform_header() {
    let cfg = BoardConfig::load(&docs("boards/zcu102-10fft-2zip.toml")).unwrap();
    let mems: Vec<_> = cfg
        .udmabufs
        .iter()
        .map(|u| (u.name.as_str(), u.size))
        .collect();
    assert_eq!(mems, [("udmabuf0", Some(MIB)), ("udmabuf4", Some(MIB))]);
    let ctrl = [
        0xA002_0000,
        0xA005_0000,
        0xA008_0000,
        0xA00B_0000,
        0xA00E_0000,
        0xB002_0000,
        0xB005_0000,
        0xB008_0000,
        0xB00B_0000,
        0xB00E_0000,
    ];
    let dma = [
        0xA001_0000,
        0xA004_0000,
        0xA007_0000,
        0xA00A_0000,
        0xA00D_0000,
        0xB001_0000,
        0xB004_0000,
        0xB007_0000,
        0xB00A_0000,
        0xB00D_0000,
    ];
    let reset = [
        0xA003_0000,
        0xA006_0000,
        0xA009_0000,
        0xA00C_0000,
        0xA00F_0000,
        0xB003_0000,
        0xB006_0000,
        0xB009_0000,
        0xB00C_0000,
        0xB00F_0000,
    ];
    let want: Vec<Fft> = (0..10).map(|i| (ctrl[i], dma[i], reset[i])).collect();
    check_ffts(&cfg, "udmabuf0", &want);
    let zips: Vec<_> = cfg
        .accelerators
        .iter()
        .filter(|a| a.kind == AccelKind::Zip)
        .map(|a| {
            (
                a.name.as_str(),
                a.memory.as_str(),
                a.control.offset,
                a.dma.offset,
                a.zip_max_floats(),
            )
        })
        .collect();
    assert_eq!(
        zips,
        [
            ("zip0", "udmabuf4", 0xA000_0000, 0xA012_0000, 4096),
            ("zip1", "udmabuf4", 0xB000_0000, 0xB011_0000, 4096),
        ]
    );
    // fpga(n) numbering: the FFTs first, then the ZIPs.
    assert_eq!(cfg.accelerators[10].name, "zip0");
}

//! The files `rimms fpga-emu --dir DIR` writes, as a hostile or careless user meets them: a
//! folder holding files of the user's own where the emulator writes (`board.toml`, `stop`,
//! `dev/…`) is refused and the files kept; a layout whose names would reach outside DIR is
//! refused before anything is created; a symbolic link where the emulator writes is refused,
//! not followed to the file it points at.

use crate::common::command::rimms;
use crate::common::output_within;
use std::path::Path;
use std::time::Duration;

/// Runs `rimms fpga-emu --seconds 1 --dir DIR [--config LAYOUT]` to its end; returns its exit
/// code and standard error, checking that nothing panicked.
fn emulate(dir: &Path, layout: Option<&Path>) -> (Option<i32>, String) {
    let mut cmd = rimms();
    cmd.args(["fpga-emu", "--seconds", "1", "--dir"]).arg(dir);
    if let Some(layout) = layout {
        cmd.arg("--config").arg(layout);
    }
    let out = output_within(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    (out.status.code(), stderr)
}

/// Fails unless `path` still holds `kept`, saying what it holds instead (its size and start:
/// a device file the emulator sized is 64 MiB of zeros).
fn assert_kept(path: &Path, kept: &str, context: &str) {
    match std::fs::read(path) {
        Ok(bytes) if bytes == kept.as_bytes() => {}
        Ok(bytes) => panic!(
            "{} was overwritten: {} bytes, starting {:?}; {context}",
            path.display(),
            bytes.len(),
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        ),
        Err(e) => panic!("{} is gone ({e}); {context}", path.display()),
    }
}

/// `rimms fpga-emu --dir ~/project`: a folder the emulator never ran on, holding a file of the
/// user's own by a name the emulator writes (its board file, its stop file, a device file).
/// The emulator used to remove or replace it (and run); it is refused, naming the file.
#[test]
fn a_folder_holding_the_users_own_board_toml_stop_or_dev_files_is_refused_and_kept() {
    for mine in ["board.toml", "stop", "dev/udmabuf0", "regs/fft0.ctrl"] {
        let tmp = tempfile::tempdir().expect("dir");
        let dir = tmp.path().join("project");
        let file = dir.join(mine);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("dir");
        std::fs::write(&file, "the user's own\n").expect("write");
        let (code, stderr) = emulate(&dir, None);
        assert_kept(&file, "the user's own\n", &stderr);
        assert_eq!(code, Some(1), "{mine}: {stderr}");
        let entry = mine.split('/').next().expect("a name");
        assert!(
            stderr.contains("--dir") && stderr.contains(&format!("/project/{entry}")),
            "the message names the file: {stderr}"
        );
        assert!(
            !dir.join("emulator.lock").exists(),
            "{mine}: nothing is created in the refused folder"
        );
    }
}

/// A layout (`--config`) whose buffer or core names climb out of DIR (`../../victim.txt`): the
/// emulator made `dev/NAME` (truncated, then sized to the buffer) or `regs/NAME.ctrl` before
/// checking the names, so a command that then failed, or one that ran, had overwritten a file
/// outside its folder. Refused before anything is created, naming the layout and the key.
#[test]
fn a_layout_whose_names_reach_outside_the_folder_is_refused_and_the_file_kept() {
    let buffer = |name: &str| {
        format!(
            "[[udmabuf]]\nname = {name:?}\nsize = 4194304\nphys_addr = 1879048192\n\n\
             [[accelerator]]\nkind = \"fft\"\nname = \"fft0\"\nmemory = {name:?}\n"
        )
    };
    let core = |name: &str| {
        format!(
            "[[udmabuf]]\nname = \"udmabuf0\"\nsize = 4194304\nphys_addr = 1879048192\n\n\
             [[accelerator]]\nkind = \"fft\"\nname = {name:?}\nmemory = \"udmabuf0\"\n"
        )
    };
    // DIR is tmp/emu: dev/../../victim.txt and regs/../../victim.ctrl are tmp's files.
    for (layout, victim, key) in [
        (buffer("../../victim.txt"), "victim.txt", "udmabuf[0].name"),
        (core("../../victim"), "victim.ctrl", "accelerator[0].name"),
    ] {
        let tmp = tempfile::tempdir().expect("dir");
        let victim = tmp.path().join(victim);
        std::fs::write(&victim, "precious\n").expect("write");
        let config = tmp.path().join("layout.toml");
        std::fs::write(&config, &layout).expect("layout");
        let (code, stderr) = emulate(&tmp.path().join("emu"), Some(&config));
        assert_kept(&victim, "precious\n", &format!("{key}: {stderr}"));
        assert_eq!(code, Some(1), "{key}: {stderr}");
        assert!(
            stderr.contains("--config") && stderr.contains(key) && stderr.contains("layout.toml"),
            "the message names the layout and the key: {stderr}"
        );
    }
}

/// A folder an emulator ran on, where `dev` or a register page has since become a symbolic
/// link to the user's files: the emulator wrote through the link (truncating the user's file
/// to a buffer's size, or to a page of zeros). Refused, naming the link.
#[test]
fn a_link_where_the_emulator_writes_is_refused_not_followed() {
    for link in ["dev", "regs/fft0.ctrl"] {
        let tmp = tempfile::tempdir().expect("dir");
        let dir = tmp.path().join("emu");
        let (code, stderr) = emulate(&dir, None);
        assert_eq!(code, Some(0), "the first run: {stderr}");
        let link_path = dir.join(link);
        // The user's own: a folder holding `udmabuf0`, or a file, where the link points.
        let mine = tmp.path().join("mine");
        let precious = if link == "dev" {
            std::fs::create_dir(&mine).expect("dir");
            std::fs::write(mine.join("udmabuf0"), "precious\n").expect("write");
            std::fs::remove_dir_all(&link_path).expect("remove dev");
            mine.join("udmabuf0")
        } else {
            std::fs::write(&mine, "precious\n").expect("write");
            std::fs::remove_file(&link_path).expect("remove the page");
            mine.clone()
        };
        std::os::unix::fs::symlink(&mine, &link_path).expect("symlink");
        let (code, stderr) = emulate(&dir, None);
        assert_kept(&precious, "precious\n", &format!("{link}: {stderr}"));
        assert_eq!(code, Some(1), "{link}: {stderr}");
        assert!(
            stderr.contains(&format!("emu/{link}")) && stderr.contains("symbolic link"),
            "the message names the link: {stderr}"
        );
    }
}

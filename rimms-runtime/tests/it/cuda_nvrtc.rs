//! NVRTC without a GPU: every built-in kernel compiles for the H200's architecture (sm_90,
//! machine code) and for a generic one (compute_75, PTX every GPU from Turing on loads), with
//! no error and no warning, on the NVRTC the backend finds; and the backend finds NVRTC where
//! CUDA installs it (a toolkit folder, pip's wheel next to a `python3`), saying which file.
//!
//! CI fetches a pinned NVRTC wheel and names its folder in `RIMMS_CUDA_LIB_DIRS`
//! (`scripts/nvrtc-check.sh`), and sets `RIMMS_REQUIRE_NVRTC=1` so that a missing library
//! fails instead of skipping.
#![cfg(feature = "cuda")]

use rimms_runtime::backend::cuda::{self, Found, LIB_DIRS_ENV};
use std::path::{Path, PathBuf};

const ENTRIES: [&str; 7] = [
    "rimms_zip",
    "rimms_conj",
    "rimms_magnitude",
    "rimms_scale",
    "rimms_fftshift_rows",
    "rimms_transpose",
    "rimms_gemm",
];

/// The NVRTC file, or `None` after saying why the test is skipped.
fn nvrtc() -> Option<PathBuf> {
    let report = cuda::library_report();
    match &report.nvrtc {
        Found::Loaded(l) => Some(l.path.clone()),
        Found::Missing { why, looked_in } => {
            let required =
                std::env::var("RIMMS_REQUIRE_NVRTC").is_ok_and(|v| !v.is_empty() && v != "0");
            assert!(
                !required,
                "RIMMS_REQUIRE_NVRTC is set but libnvrtc is {why}; looked in {looked_in:?}"
            );
            println!("skipped: no libnvrtc ({why})");
            None
        }
    }
}

#[test]
fn every_kernel_compiles_for_sm_90_and_a_generic_arch_without_warnings() {
    let Some(path) = nvrtc() else { return };
    for arch in ["sm_90", "compute_75"] {
        let (used, compiled) =
            cuda::compile_kernels(arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(used.path, path);
        assert!(
            compiled.log.is_empty(),
            "NVRTC {}.{} warned for {arch}:\n{}",
            used.version.0,
            used.version.1,
            compiled.log
        );
        if arch.starts_with("sm_") {
            assert!(compiled.ptx.is_empty());
            // An ELF file whose symbol table names every kernel.
            assert_eq!(&compiled.cubin[..4], b"\x7fELF", "{arch}: not machine code");
            for name in ENTRIES {
                assert!(
                    compiled
                        .cubin
                        .windows(name.len() + 1)
                        .any(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0),
                    "{arch}: {name} missing from the machine code"
                );
            }
            println!(
                "NVRTC {}.{} ({}): {arch}: {} bytes of machine code, no warnings",
                used.version.0,
                used.version.1,
                used.path.display(),
                compiled.cubin.len()
            );
        } else {
            assert!(compiled.cubin.is_empty());
            for name in ENTRIES {
                assert!(
                    compiled.ptx.contains(&format!(".entry {name}(")),
                    "{arch}: {name} missing from the PTX"
                );
            }
            let target = compiled.ptx.lines().find(|l| l.starts_with(".target"));
            assert_eq!(target, Some(".target sm_75"), "{arch}");
            println!(
                "NVRTC {}.{} ({}): {arch}: {} bytes of PTX, no warnings",
                used.version.0,
                used.version.1,
                used.path.display(),
                compiled.ptx.len()
            );
        }
    }
}

#[test]
fn a_compile_error_is_an_error_naming_the_arch() {
    if nvrtc().is_none() {
        return;
    }
    // NVRTC has no such architecture: it refuses the option, with its message.
    let err = cuda::compile_kernels("sm_1").unwrap_err().to_string();
    assert!(err.contains("sm_1"), "{err}");
}

/// Set in the child processes this test starts.
const CHILD_ENV: &str = "RIMMS_CUDA_NVRTC_CHILD";

/// The body the child processes run: prints where the backend found NVRTC.
#[test]
fn child_body() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    match &cuda::library_report().nvrtc {
        Found::Loaded(l) => println!("CHILD-RESULT {}", l.path.display()),
        Found::Missing { why, .. } => println!("CHILD-RESULT missing: {why}"),
    }
}

/// Where a child process with `env` (and no `RIMMS_CUDA_LIB_DIRS`) finds NVRTC.
fn found_by_child(env: &[(&str, &std::ffi::OsStr)]) -> String {
    let mut cmd = crate::rerun_test(module_path!(), "child_body");
    cmd.env(CHILD_ENV, "1")
        .env_remove(LIB_DIRS_ENV)
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env_remove("LD_LIBRARY_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the child starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}");
    stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-RESULT ").map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| panic!("no result: {stdout}"))
}

fn link(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(from, to).unwrap();
}

/// Copies of the found NVRTC laid out as pip's wheel next to a `python3`, and as a toolkit
/// under `$CUDA_HOME`: a fresh process finds each, where the machine has no NVRTC of its own
/// that comes first (on the loader's cache or in `/usr/local/cuda*`).
#[test]
fn nvrtc_is_found_in_pip_wheels_and_toolkit_folders() {
    let Some(real) = nvrtc() else { return };
    if !real.is_absolute() {
        println!("skipped: NVRTC was found through the loader path, which a child inherits");
        return;
    }
    let real = std::fs::canonicalize(real).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let name = real.file_name().unwrap();

    // A virtual environment: bin/python3 and its site-packages.
    let venv = dir.path().join("venv");
    let python = venv.join("bin/python3");
    std::fs::create_dir_all(python.parent().unwrap()).unwrap();
    std::fs::write(&python, "#!/bin/sh\n").unwrap();
    let wheel = venv.join("lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib");
    link(&real, &wheel.join(name));
    let path = std::env::join_paths([venv.join("bin"), PathBuf::from("/usr/bin")]).unwrap();
    let got_wheel = found_by_child(&[("PATH", path.as_os_str())]);

    // A toolkit.
    let toolkit = dir.path().join("cuda-13.0");
    link(&real, &toolkit.join("lib64").join(name));
    let got_toolkit = found_by_child(&[
        ("CUDA_HOME", toolkit.as_os_str()),
        ("PATH", std::ffi::OsStr::new("/usr/bin")),
    ]);

    // What a child finds with neither: the loader's cache (`ld.so.cache`, which no variable
    // turns off) and `/usr/local/cuda*` come before pip's folders, and the loader's before
    // `$CUDA_HOME` (the documented order), so where the machine has an NVRTC of its own the
    // wheel cannot win, and the toolkit only over `/usr/local`.
    let system = found_by_child(&[("PATH", std::ffi::OsStr::new("/usr/bin"))]);
    let wheel_file = wheel.join(name).display().to_string();
    let toolkit_file = toolkit.join("lib64").join(name).display().to_string();
    if system.starts_with("missing") {
        assert_eq!(got_wheel, wheel_file);
        assert_eq!(got_toolkit, toolkit_file);
    } else {
        println!("this machine has an NVRTC of its own ({system}): the wheel cannot win");
        assert_eq!(got_wheel, system, "pip's folders come last");
        assert!(
            got_toolkit == toolkit_file || got_toolkit == system,
            "$CUDA_HOME gave {got_toolkit}"
        );
    }
}

/// A library the backend found off the loader path and opened by full path serves cudarc's
/// opening by bare name (the loader matches the name against what is loaded): how cuFFT,
/// found in a toolkit or pip folder, reaches cudarc. Shown with NVRTC, and with cuFFT where
/// one was found (its nvJitLink then of the same CUDA major).
#[test]
fn libraries_found_by_path_serve_cudarcs_bare_names() {
    let Some(_) = nvrtc() else { return };
    cuda::compile_kernels("compute_75").unwrap();
    // SAFETY: opens and closes the library, calling nothing in it.
    assert!(unsafe { cudarc::nvrtc::sys::is_culib_present() });
    let report = cuda::library_report();
    println!("{report}");
    if let Found::Loaded(fft) = &report.cufft {
        // SAFETY: as above.
        assert!(unsafe { cudarc::cufft::sys::is_culib_present() });
        if let Found::Loaded(jit) = &report.nvjitlink {
            assert_eq!(jit.version.0, fft.version.0 + 1, "{report}");
        }
    }
}

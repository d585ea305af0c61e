//! The clean "no GPU" path of the CUDA backend: on a machine without a driver or a device,
//! the probe says so with a reason, a runtime asking for `gpu(0)` fails with that reason,
//! one asking for whatever GPUs there are builds with none, and nothing panics or aborts. Runs everywhere: where a GPU is present, the same path is forced in a child
//! process with `RIMMS_NO_GPU=1`.
#![cfg(feature = "cuda")]

use rimms_runtime::backend::cuda::{self, Probe};
use rimms_runtime::{Device, Error, Runtime};
use std::process::Command;

/// Set in the child processes this test starts.
const CHILD_ENV: &str = "RIMMS_CUDA_NO_GPU_CHILD";

#[test]
fn probe_and_backend_agree_in_process() {
    let detailed = cuda::probe_detailed().expect("the probe never fails without a broken driver");
    let libs = cuda::libraries();
    match detailed {
        Probe::NoGpu(why) => {
            assert!(!why.trim().is_empty(), "a no-GPU answer carries a reason");
            assert_eq!(cuda::probe().unwrap(), None);
            assert_eq!(cuda::no_gpu_reason().as_deref(), Some(why.as_str()));
            match Runtime::builder().gpu(0).gpu_pool(1 << 20).build() {
                Err(Error::NoGpu { why: required }) => {
                    assert_eq!(required, why);
                    let shown = Error::NoGpu { why: required }.to_string();
                    assert!(shown.starts_with("no GPU: "), "{shown}");
                }
                other => panic!("gpu(0) without a GPU: {:?}", other.map(|_| "a runtime")),
            }
            println!("no GPU here, as expected: {why} (libraries: {libs:?})");
        }
        Probe::Found(info) => {
            assert!(!info.devices.is_empty());
            assert!(libs.driver);
            println!(
                "this machine has {} GPU(s); the no-GPU path is checked in a child process",
                info.devices.len()
            );
        }
    }
}

/// `.gpu(n)` names the device by the driver's ordinal; asking twice for one is a mistake in
/// the configuration, said before any GPU is looked for.
#[test]
fn a_gpu_asked_for_twice_is_a_configuration_error() {
    match Runtime::builder().gpu(0).gpu(0).build() {
        Err(Error::Config(why)) => assert!(why.contains("gpu0 is asked for twice"), "{why}"),
        other => panic!("{:?}", other.map(|_| "a runtime")),
    }
}

#[test]
fn a_missing_index_is_no_gpu_not_an_error() {
    // Whatever the machine has, it does not have 4096 GPUs.
    match Runtime::builder().gpu(4096).gpu_pool(1 << 20).build() {
        Err(Error::NoGpu { why }) => assert!(!why.is_empty()),
        other => panic!("{:?}", other.map(|_| "a runtime")),
    }
}

/// The body the child processes run; does nothing in a normal test run.
#[test]
fn child_body() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    if let Err(e) = cuda::probe() {
        println!("CHILD-RESULT error: {e}");
        return;
    }
    let reason = cuda::no_gpu_reason();
    // GPU 0 required: `Some(true)` opened, `Some(false)` no GPU, `None` another error.
    let backend = match Runtime::builder().gpu(0).gpu_pool(1 << 20).build() {
        Ok(_) => Some(true),
        Err(Error::NoGpu { .. }) => Some(false),
        Err(e) => {
            println!("CHILD-RESULT error: {e}");
            return;
        }
    };
    // Asking for whatever GPUs there are never fails for want of one.
    let runtime = Runtime::builder()
        .gpu_if_available()
        .gpu_pool(1 << 20)
        .build()
        .map(|rt| {
            rt.devices()
                .iter()
                .filter(|d| matches!(d, Device::Gpu(_)))
                .count()
        });
    match (&reason, &backend, &runtime) {
        (Some(why), Some(false), Ok(0)) => println!("CHILD-RESULT no GPU: {why}"),
        (None, Some(true), Ok(n)) if *n > 0 => println!("CHILD-RESULT GPU found"),
        _ => println!("CHILD-RESULT inconsistent: {reason:?} / {backend:?} / {runtime:?}"),
    }
}

fn run_child(extra_env: &[(&str, &str)]) -> String {
    run_child_with(extra_env, false)
}

/// Runs `child_body` in a new process; `may_panic_caught`: the child may print a panic that
/// the backend caught (a library missing a symbol), as long as it still exits normally.
fn run_child_with(extra_env: &[(&str, &str)], may_panic_caught: bool) -> String {
    let mut cmd = crate::rerun_test(module_path!(), "child_body");
    cmd.env(CHILD_ENV, "1").env_remove(cuda::NO_GPU_ENV);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the child process starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // An abort (SIGABRT) or a panic both show here: no exit code 0.
    assert!(
        out.status.success(),
        "child exited with {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        may_panic_caught || !stderr.contains("panicked"),
        "the child panicked somewhere:\n{stderr}"
    );
    stdout
        .lines()
        .find_map(|l| {
            l.split_once("CHILD-RESULT ")
                .map(|(_, r)| r.trim().to_string())
        })
        .unwrap_or_else(|| panic!("the child printed no result:\n{stdout}"))
}

#[test]
fn child_process_neither_panics_nor_aborts() {
    let natural = run_child(&[]);
    assert!(!natural.starts_with("inconsistent"), "{natural}");
    if cuda::probe().ok().flatten().is_none() {
        assert!(natural.starts_with("no GPU: "), "{natural}");
    }
    let forced = run_child(&[(cuda::NO_GPU_ENV, "1")]);
    assert_eq!(forced, format!("no GPU: {}=1 is set", cuda::NO_GPU_ENV));
}

/// Builds a stand-in `libcuda.so` from C source with the system C compiler, in its own
/// folder; `None` where there is no compiler.
fn fake_driver(name: &str, source: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("rimms-fake-cuda-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let c = dir.join("fake.c");
    std::fs::write(&c, source).ok()?;
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libcuda.so"))
        .arg(&c)
        .status()
        .ok()?;
    status.success().then_some(dir)
}

/// Drivers that load but cannot serve, each a stand-in `libcuda` whose `cuInit` answers as
/// the real one does in that situation: no device, zero devices, the toolkit's stub library,
/// a driver older than its library, a missing kernel module, and a library missing every
/// symbol. Each is "no GPU" with its reason, in a child process that exits normally, and a
/// runtime asking for whatever GPUs there are builds with none.
#[test]
fn stand_in_drivers_give_no_gpu_with_a_reason() {
    let init = |code: i32| format!("int cuInit(unsigned int f) {{ (void)f; return {code}; }}\n");
    let cases = [
        (
            "no-device",
            init(100),
            "no GPU: the CUDA driver is installed but reports no device",
        ),
        (
            "zero-devices",
            "int cuInit(unsigned int f) { (void)f; return 0; }\n\
             int cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n\
             int cuDeviceGetCount(int *n) { *n = 0; return 0; }\n"
                .to_string(),
            "no GPU: the CUDA driver is installed but sees no device",
        ),
        (
            "stub",
            init(34),
            "no GPU: the libcuda found is the CUDA toolkit's stub",
        ),
        (
            "old-driver",
            "int cuInit(unsigned int f) { (void)f; return 0; }\n\
             int cuDriverGetVersion(int *v) { *v = 11040; return 0; }\n\
             int cuDeviceGetCount(int *n) { *n = 1; return 0; }\n"
                .to_string(),
            "no GPU: the NVIDIA driver is too old: it supports CUDA 11.4, the backend needs 12.0",
        ),
        (
            "driver-mismatch",
            init(803),
            "no GPU: the NVIDIA kernel module and the libcuda found are of different",
        ),
        (
            "no-kernel-module",
            init(999),
            "no GPU: the CUDA driver could not start: the NVIDIA kernel module",
        ),
        (
            "no-symbols",
            "int rimms_nothing_here;\n".to_string(),
            "no GPU: the CUDA driver library (libcuda) cannot be used",
        ),
    ];
    for (name, source, expect) in cases {
        let Some(dir) = fake_driver(name, &source) else {
            println!("skipped: no C compiler to build a stand-in libcuda");
            return;
        };
        let path = match std::env::var("LD_LIBRARY_PATH") {
            Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
            _ => dir.display().to_string(),
        };
        let got = run_child_with(&[("LD_LIBRARY_PATH", &path)], name == "no-symbols");
        assert!(got.starts_with(expect), "{name}: {got}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The built-in kernels compile with NVRTC wherever `libnvrtc` can be loaded, GPU or not.
#[test]
fn kernels_compile_where_nvrtc_is_present() {
    if !cuda::libraries().nvrtc {
        println!("skipped: no libnvrtc to compile the kernels with");
        return;
    }
    let ptx = cuda::kernel_ptx().unwrap_or_else(|e| panic!("{e}"));
    for name in [
        "rimms_zip",
        "rimms_conj",
        "rimms_magnitude",
        "rimms_scale",
        "rimms_fftshift_rows",
        "rimms_transpose",
        "rimms_gemm",
    ] {
        assert!(
            ptx.contains(&format!(".entry {name}(")),
            "{name} missing from the PTX"
        );
    }
    println!("the built-in kernels compile: {} bytes of PTX", ptx.len());
}

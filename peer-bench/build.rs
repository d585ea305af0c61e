//! Builds the C harnesses against StarPU-MPI and Open MPI, with the flags pkg-config gives:
//! `c/peer.c` (the corner turn across ranks, `src/main.rs`) and `c/rows.c` (the single-node
//! row pipeline and 3-argument task, `src/bin/rows.rs`, which needs plain StarPU only).

use std::process::Command;

fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .output()
        .expect("pkg-config runs (apt-get install pkg-config)");
    assert!(
        out.status.success(),
        "pkg-config {args:?} failed: install libstarpu-dev and libopenmpi-dev ({})",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn main() {
    let cflags = pkg_config(&["--cflags", "starpumpi-1.3", "ompi-c"]);
    for harness in ["peer", "rows"] {
        println!("cargo:rerun-if-changed=c/{harness}.c");
        let mut build = cc::Build::new();
        build
            .file(format!("c/{harness}.c"))
            .flag_if_supported("-O2");
        for flag in &cflags {
            if let Some(dir) = flag.strip_prefix("-I") {
                build.include(dir);
            }
        }
        build.compile(harness);
    }
    for flag in pkg_config(&["--libs", "starpumpi-1.3", "ompi-c"]) {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
}

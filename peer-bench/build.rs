//! Builds the C harness against StarPU-MPI and Open MPI, with the flags pkg-config gives.

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
    println!("cargo:rerun-if-changed=c/peer.c");
    let mut build = cc::Build::new();
    build.file("c/peer.c").flag_if_supported("-O2");
    for flag in pkg_config(&["--cflags", "starpumpi-1.3", "ompi-c"]) {
        if let Some(dir) = flag.strip_prefix("-I") {
            build.include(dir);
        }
    }
    build.compile("peer");
    for flag in pkg_config(&["--libs", "starpumpi-1.3", "ompi-c"]) {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
}

//! Finding the CUDA libraries the backend loads at run time: NVRTC (to compile the kernels),
//! cuFFT (for `fft`) and nvJitLink (which recent cuFFT loads when it makes a plan), of CUDA 12
//! or 13, wherever a machine keeps them.
//!
//! cudarc opens its libraries by bare names (`libcufft.so`, `.so.12`, `.so.11`, …) through
//! the loader path alone, and its pinned CUDA 12 binding does not know CUDA 13's
//! `libnvrtc.so.13`, so a toolkit outside the loader path, pip's `nvidia-*` wheels, or CUDA
//! 13 would all read as "no GPU". This module looks in the usual places itself, in order:
//!
//! 1. the folders in `RIMMS_CUDA_LIB_DIRS` (`:`-separated), for a user or a kit to say where;
//! 2. the loader path (what the bare names open: `LD_LIBRARY_PATH`, `ld.so.cache`);
//! 3. `$CUDA_HOME`/`$CUDA_PATH`, `/usr/local/cuda*`, `/opt/cuda*` (`lib64`, `targets/*/lib`);
//! 4. pip's `nvidia/*/lib` folders in the site-packages next to every `python3` on `PATH`
//!    (a virtual environment's and the system's) and in the user's site-packages.
//!
//! and then makes the choice stick:
//! - NVRTC is called through our own small binding (`super::nvrtc`) on the file chosen,
//!   of whichever version: the newest not newer than the driver, since the driver cannot load
//!   PTX of a newer CUDA;
//! - nvJitLink and cuFFT are opened by full path and kept open, so cudarc's and cuFFT's own
//!   opening by bare name finds the library already loaded (the loader matches a requested
//!   name against the `SONAME` of what is loaded): `libcufft.so.11` (CUDA 12) and
//!   `libcufft.so.12` (CUDA 13) are both names cudarc asks for. nvJitLink is taken of the
//!   same CUDA major as cuFFT.
//!
//! [`report`] says which file was loaded for each library and its version, or every place it
//! looked.

use super::Unusable;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Folders searched first, `:`-separated.
pub const LIB_DIRS_ENV: &str = "RIMMS_CUDA_LIB_DIRS";

/// A library found and loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// The file, as found (a symbolic link is not resolved).
    pub path: PathBuf,
    /// The version the library reports (NVRTC and nvJitLink: CUDA major.minor; cuFFT: its
    /// own, 11.x for CUDA 12 and 12.x for CUDA 13).
    pub version: (i32, i32),
}

/// The outcome for one library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Loaded from this file.
    Loaded(Loaded),
    /// Not usable; why, and every place looked in.
    Missing {
        /// Why none was taken (none found, or each one found refused, and why).
        why: String,
        /// Where it was looked for.
        looked_in: Vec<String>,
    },
}

impl Found {
    /// The loaded file, if any.
    pub fn loaded(&self) -> Option<&Loaded> {
        match self {
            Found::Loaded(l) => Some(l),
            Found::Missing { .. } => None,
        }
    }
}

/// Which CUDA libraries the backend uses, from where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryReport {
    /// NVRTC.
    pub nvrtc: Found,
    /// cuFFT.
    pub cufft: Found,
    /// nvJitLink (optional: cuFFT of CUDA 12.0 to 12.3 does not use it).
    pub nvjitlink: Found,
}

impl std::fmt::Display for LibraryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, found) in [
            ("libnvrtc", &self.nvrtc),
            ("libcufft", &self.cufft),
            ("libnvJitLink", &self.nvjitlink),
        ] {
            match found {
                Found::Loaded(l) => writeln!(
                    f,
                    "{name}: {} ({}.{})",
                    l.path.display(),
                    l.version.0,
                    l.version.1
                )?,
                Found::Missing { why, looked_in } if looked_in.is_empty() => {
                    writeln!(f, "{name}: {why}")?
                }
                Found::Missing { why, looked_in } => {
                    writeln!(f, "{name}: {why}; looked in: {}", looked_in.join(", "))?
                }
            }
        }
        Ok(())
    }
}

/// A library of interest, by its file name stem (`libnvrtc` for `libnvrtc.so.12`).
#[derive(Clone, Copy)]
struct Kind {
    stem: &'static str,
}

const NVRTC: Kind = Kind { stem: "libnvrtc" };
const CUFFT: Kind = Kind { stem: "libcufft" };
const NVJITLINK: Kind = Kind {
    stem: "libnvJitLink",
};

/// The folders to look in, in order (the loader path is searched separately, by name).
fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(list) = std::env::var_os(LIB_DIRS_ENV) {
        dirs.extend(std::env::split_paths(&list));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            dirs.extend(toolkit_lib_dirs(Path::new(&home)));
        }
    }
    for root in ["/usr/local", "/opt"] {
        let mut found: Vec<PathBuf> = read_dir_names(Path::new(root))
            .into_iter()
            .filter(|n| n == "cuda" || n.starts_with("cuda-"))
            .map(|n| Path::new(root).join(n))
            .collect();
        // `cuda` (the default link) first, then newest version first.
        found.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
        for home in found {
            dirs.extend(toolkit_lib_dirs(&home));
        }
    }
    for site in python_site_dirs() {
        let nvidia = site.join("nvidia");
        for sub in read_dir_names(&nvidia) {
            dirs.push(nvidia.join(sub).join("lib"));
        }
    }
    let mut unique = Vec::new();
    for d in dirs {
        if d.is_dir() && !unique.contains(&d) {
            unique.push(d);
        }
    }
    unique
}

/// Sorts `cuda` before any `cuda-X.Y`, and newer versions before older.
fn version_key(p: &Path) -> (bool, Vec<u32>) {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let nums = name
        .trim_start_matches("cuda")
        .trim_start_matches('-')
        .split('.')
        .filter_map(|x| x.parse().ok())
        .collect();
    (name == "cuda", nums)
}

fn toolkit_lib_dirs(home: &Path) -> Vec<PathBuf> {
    let mut out = vec![home.join("lib64"), home.join("lib")];
    let targets = home.join("targets");
    for t in read_dir_names(&targets) {
        out.push(targets.join(t).join("lib"));
    }
    out
}

fn read_dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Site-packages folders next to every `python3` on `PATH` (as found and with links
/// resolved, so both a virtual environment's and its base interpreter's count), and the
/// user's.
fn python_site_dirs() -> Vec<PathBuf> {
    let mut prefixes = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let exe = dir.join("python3");
            if !exe.is_file() {
                continue;
            }
            prefixes.extend(dir.parent().map(Path::to_path_buf));
            if let Some(real) = std::fs::canonicalize(&exe)
                .ok()
                .and_then(|r| r.parent()?.parent().map(Path::to_path_buf))
            {
                prefixes.push(real);
            }
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(Path::new(&home).join(".local"));
    }
    let mut sites = Vec::new();
    for prefix in prefixes {
        for lib in [prefix.join("lib"), prefix.join("local/lib")] {
            for py in read_dir_names(&lib) {
                if !py.starts_with("python3") {
                    continue;
                }
                for kind in ["site-packages", "dist-packages"] {
                    sites.push(lib.join(&py).join(kind));
                }
            }
        }
    }
    sites
}

/// The versioned files of `kind` in `dir` (`libnvrtc.so.12`, `libnvrtc.so.13.0.48`, …), the
/// plain `.so` link last.
fn files_in(dir: &Path, kind: Kind) -> Vec<PathBuf> {
    let prefix = format!("{}.so.", kind.stem);
    let mut versioned: Vec<PathBuf> = read_dir_names(dir)
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .map(|n| dir.join(n))
        .collect();
    // Shortest first: the SONAME link (`.so.12`) before the full version (`.so.12.6.77`).
    versioned.sort_by_key(|p| p.as_os_str().len());
    let plain = dir.join(format!("{}.so", kind.stem));
    if plain.exists() {
        versioned.push(plain);
    }
    versioned
}

/// The file a bare name opens through the loader path, if it opens: the loader has mapped
/// it, so `/proc/self/maps` names it.
fn through_loader(name: &str) -> Option<PathBuf> {
    // SAFETY: opening a CUDA library runs only its initialisers, as using it at all does;
    // the handle is closed at once (the library stays loaded if anything else holds it).
    let lib = unsafe { libloading::Library::new(name) }.ok()?;
    let stem = name.split(".so").next().unwrap_or(name);
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let found = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(&format!("{stem}.so")))
        })
        .map(PathBuf::from);
    drop(lib);
    found
}

/// The bare names cudarc's binding tries for `stem` (without `lib`), and CUDA 13's.
fn bare_names(stem: &str) -> Vec<String> {
    let short = stem.trim_start_matches("lib");
    let mut names = cudarc::get_lib_name_candidates(short);
    names.push(format!("{stem}.so.13"));
    names
}

/// Candidate files of `kind`, in search order, and the places looked in. `loader_first`: the
/// loader path before `RIMMS_CUDA_LIB_DIRS`.
fn candidates(kind: Kind, loader_first: bool) -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut looked = Vec::new();
    let dirs = search_dirs();
    let env_dirs = std::env::var_os(LIB_DIRS_ENV)
        .map(|l| std::env::split_paths(&l).collect::<Vec<_>>())
        .unwrap_or_default();
    // The folders the user named come before the loader path, unless what the loader finds
    // wins anyway (cudarc opens cuFFT by bare name); the rest come after it.
    let (named, rest): (Vec<_>, Vec<_>) = dirs
        .into_iter()
        .partition(|d| env_dirs.contains(d) && !loader_first);
    for d in &named {
        looked.push(d.display().to_string());
        files.extend(files_in(d, kind));
    }
    looked.push(format!("the loader path ({}.so*)", kind.stem));
    for name in bare_names(kind.stem) {
        if let Some(p) = through_loader(&name) {
            files.push(p);
        }
    }
    for d in &rest {
        looked.push(d.display().to_string());
        files.extend(files_in(d, kind));
    }
    let mut unique = Vec::new();
    for f in files {
        if !unique.contains(&f) {
            unique.push(f);
        }
    }
    (unique, looked)
}

/// Libraries opened by full path and kept open for the life of the process, so that later
/// opening by bare name (cudarc's, cuFFT's) finds them.
fn keep(lib: libloading::Library) {
    static KEPT: std::sync::Mutex<Vec<libloading::Library>> = std::sync::Mutex::new(Vec::new());
    KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(lib);
}

/// Opens `path` and asks its version with `version`.
fn open_versioned(
    path: &Path,
    version: impl FnOnce(&libloading::Library) -> Option<(i32, i32)>,
) -> Result<(libloading::Library, (i32, i32)), Unusable> {
    // SAFETY: as in `through_loader`: opening runs only the library's initialisers.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    let v = version(&lib).ok_or("it does not report its version")?;
    Ok((lib, v))
}

/// Calls `int f(int*, int*)` (the NVRTC and nvJitLink version call) named `symbol`.
fn major_minor(lib: &libloading::Library, symbol: &[u8]) -> Option<(i32, i32)> {
    type F = unsafe extern "C" fn(*mut i32, *mut i32) -> i32;
    // SAFETY: `nvrtcVersion` and `nvJitLinkVersion` have this signature.
    let f = unsafe { lib.get::<F>(symbol) }.ok()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: both out-pointers are live locals.
    (unsafe { f(&mut major, &mut minor) } == 0).then_some((major, minor))
}

/// cuFFT's version, `cufftGetVersion` (11300 → 11.3).
fn cufft_version(lib: &libloading::Library) -> Option<(i32, i32)> {
    type F = unsafe extern "C" fn(*mut i32) -> i32;
    // SAFETY: `cufftGetVersion(int*)` has this signature.
    let f = unsafe { lib.get::<F>(b"cufftGetVersion\0") }.ok()?;
    let mut v = 0;
    // SAFETY: the out-pointer is a live local.
    (unsafe { f(&mut v) } == 0).then_some((v / 1000, (v % 1000) / 100))
}

/// The CUDA major a cuFFT belongs to: cuFFT 11 ships with CUDA 12, 12 with 13.
fn cuda_major_of_cufft(v: (i32, i32)) -> i32 {
    v.0 + 1
}

/// The SONAME of a library file (`libcufft.so.11.3.0.4` → `libcufft.so.11`), from its name.
fn soname(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let (stem, rest) = name.split_once(".so")?;
    let major = rest.trim_start_matches('.').split('.').next().unwrap_or("");
    Some(if major.is_empty() {
        format!("{stem}.so")
    } else {
        format!("{stem}.so.{major}")
    })
}

/// Takes the first candidate `accept` takes; the report says why every other was refused.
fn choose(
    kind: Kind,
    loader_first: bool,
    mut accept: impl FnMut(&Path) -> Result<(i32, i32), Unusable>,
) -> Found {
    let (files, looked_in) = candidates(kind, loader_first);
    let mut refused = Vec::new();
    for f in files {
        match accept(&f) {
            Ok(version) => return Found::Loaded(Loaded { path: f, version }),
            Err(why) => refused.push(format!("{} ({why})", f.display())),
        }
    }
    let why = if refused.is_empty() {
        "not found".to_string()
    } else {
        format!("none usable: {}", refused.join("; "))
    };
    Found::Missing { why, looked_in }
}

/// NVRTC: the newest one found that is not newer than `driver` (a CUDA version as the driver
/// reports it, 13000 for 13.0), or the first found when the driver is not known. Only its
/// file is chosen here; [`super::nvrtc`] opens it.
fn find_nvrtc(driver: Option<i32>) -> Found {
    let (files, looked_in) = candidates(NVRTC, false);
    let mut refused = Vec::new();
    let mut best: Option<Loaded> = None;
    for f in files {
        match open_versioned(&f, |l| major_minor(l, b"nvrtcVersion\0")).map(|(_, v)| v) {
            Ok(v) if driver.is_some_and(|d| v.0 * 1000 + v.1 * 10 > d) => refused.push(format!(
                "{} (NVRTC {}.{} is newer than the driver's CUDA {}: the driver could not \
                 load its PTX)",
                f.display(),
                v.0,
                v.1,
                super::probe::cuda_version(driver.unwrap_or(0))
            )),
            Ok(v) => {
                if driver.is_none() {
                    return Found::Loaded(Loaded {
                        path: f,
                        version: v,
                    });
                }
                if best.as_ref().is_none_or(|b| v > b.version) {
                    best = Some(Loaded {
                        path: f,
                        version: v,
                    });
                }
            }
            Err(why) => refused.push(format!("{} ({why})", f.display())),
        }
    }
    match best {
        Some(l) => Found::Loaded(l),
        None => Found::Missing {
            why: if refused.is_empty() {
                "not found".to_string()
            } else {
                format!("none usable: {}", refused.join("; "))
            },
            looked_in,
        },
    }
}

/// The nvJitLink of CUDA `major`, opened and kept open (so cuFFT's own opening of it, by
/// bare name, finds it).
fn find_nvjitlink(major: i32) -> Found {
    choose(NVJITLINK, false, |j| {
        let (lib, v) = open_versioned(j, |l| major_minor(l, b"nvJitLinkVersion\0"))?;
        if v.0 == major {
            keep(lib);
            Ok(v)
        } else {
            Err(format!("CUDA {} nvJitLink, not {major}", v.0).into())
        }
    })
}

/// cuFFT and the nvJitLink it needs: a cuFFT cudarc opens by one of its names (what the
/// loader path gives first, as cudarc would find it itself), with an nvJitLink of the same
/// CUDA major loaded before it, where there is one (cuFFT of CUDA 12.0 to 12.3 needs none).
fn find_cufft() -> (Found, Found) {
    let names = bare_names(CUFFT.stem);
    let mut jit = Found::Missing {
        why: "not needed: no cuFFT found".to_string(),
        looked_in: Vec::new(),
    };
    let cufft = choose(CUFFT, true, |f| {
        let so = soname(f).ok_or("not a library file name")?;
        if !names.contains(&so) {
            return Err(format!(
                "{so} is not a name the CUDA 12 binding opens ({})",
                names.join(", ")
            )
            .into());
        }
        // The CUDA major from the name (cuFFT 11 is CUDA 12's), so that its nvJitLink is
        // loaded before cuFFT, whether cuFFT links it or opens it when planning.
        let named_major = so
            .rsplit('.')
            .next()
            .and_then(|m| m.parse::<i32>().ok())
            .map(|m| cuda_major_of_cufft((m, 0)));
        if let Some(major) = named_major {
            jit = find_nvjitlink(major);
        }
        // SAFETY: as in `through_loader`.
        let lib = unsafe { libloading::Library::new(f) }.map_err(|e| e.to_string())?;
        let v = cufft_version(&lib).ok_or("it does not report its version")?;
        let major = cuda_major_of_cufft(v);
        if named_major != Some(major) {
            jit = find_nvjitlink(major);
        }
        keep(lib);
        Ok(v)
    });
    (cufft, jit)
}

/// Finds and loads the libraries (once per process; `driver` is the driver's CUDA version,
/// if known, and only the first call's counts).
pub(crate) fn load(driver: Option<i32>) -> &'static LibraryReport {
    static REPORT: OnceLock<LibraryReport> = OnceLock::new();
    REPORT.get_or_init(|| {
        let nvrtc = find_nvrtc(driver);
        let (cufft, nvjitlink) = find_cufft();
        let report = LibraryReport {
            nvrtc,
            cufft,
            nvjitlink,
        };
        tracing::info!("CUDA libraries:\n{report}");
        report
    })
}

/// Which CUDA libraries the backend loads, from which files, or where it looked; finds them
/// on the first call (with the driver's version, where there is a driver, to pick NVRTC).
pub fn report() -> &'static LibraryReport {
    load(super::probe::driver_version())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sonames_come_from_file_names() {
        let so = |p: &str| soname(Path::new(p));
        assert_eq!(
            so("/x/libcufft.so.11.3.0.4").as_deref(),
            Some("libcufft.so.11")
        );
        assert_eq!(so("/x/libcufft.so.12").as_deref(), Some("libcufft.so.12"));
        assert_eq!(so("/x/libcufft.so").as_deref(), Some("libcufft.so"));
    }

    #[test]
    fn cuda_13_libraries_are_among_the_names_tried() {
        let names = bare_names("libnvrtc");
        for n in ["libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13"] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        // cuFFT of CUDA 12 (libcufft.so.11) and 13 (libcufft.so.12) are both opened by cudarc.
        let names = bare_names("libcufft");
        assert!(names.iter().any(|x| x == "libcufft.so.11"));
        assert!(names.iter().any(|x| x == "libcufft.so.12"));
    }

    #[test]
    fn toolkit_folders_sort_default_then_newest() {
        let mut v = ["cuda-12.4", "cuda", "cuda-13.0", "cuda-12.10"]
            .map(|n| PathBuf::from("/usr/local").join(n))
            .to_vec();
        v.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
        let names: Vec<_> = v
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["cuda", "cuda-13.0", "cuda-12.10", "cuda-12.4"]);
    }

    #[test]
    fn files_are_found_by_version_in_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "libnvrtc.so.13.0.48",
            "libnvrtc.so.13",
            "libnvrtc.so",
            "libcufft.so.12",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let got: Vec<_> = files_in(dir.path(), NVRTC)
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            got,
            ["libnvrtc.so.13", "libnvrtc.so.13.0.48", "libnvrtc.so"]
        );
    }

    /// Where an NVRTC is found (CI names the wheel's folder): a driver older than it refuses
    /// it, saying so, and a driver as new takes it.
    #[test]
    fn nvrtc_newer_than_the_driver_is_refused() {
        let Found::Loaded(l) = find_nvrtc(None) else {
            println!("skipped: no libnvrtc");
            return;
        };
        let (major, minor) = l.version;
        let same = major * 1000 + minor * 10;
        assert_eq!(
            find_nvrtc(Some(same)).loaded().map(|x| x.version),
            Some(l.version)
        );
        match find_nvrtc(Some(same - 10)) {
            Found::Missing { why, .. } => {
                assert!(why.contains("newer than the driver"), "{why}")
            }
            Found::Loaded(other) => {
                // Another, older NVRTC on this machine may serve the older driver.
                assert!(other.version < l.version, "{other:?}")
            }
        }
    }
}

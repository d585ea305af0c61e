//! NVRTC, called on the file [`super::libs`] chose.
//!
//! cudarc's NVRTC binding opens the library by bare name, and its CUDA 12 binding does not
//! know CUDA 13's `libnvrtc.so.13`, so the backend calls the seven NVRTC functions it needs
//! itself, on the library it found (CUDA 12 or 13: the calls are the same in both). It also
//! returns the compiler's log, so that a check can refuse warnings, and can produce machine
//! code (`sm_XX`) as well as PTX (`compute_XX`).
//!
//! NVRTC opens its `libnvrtc-builtins` at compile time by bare name; the builtins found next
//! to the chosen library are opened first, so that name finds them even off the loader path.

use super::libs::{self, Loaded};
use super::Unusable;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::OnceLock;

type Program = *mut c_void;
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type CreateFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type GetFn = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyFn = unsafe extern "C" fn(*mut Program) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// NVRTC, loaded.
pub(crate) struct Nvrtc {
    /// The library file and its version.
    pub(crate) loaded: Loaded,
    create: CreateFn,
    compile: CompileFn,
    ptx_size: SizeFn,
    ptx: GetFn,
    cubin_size: SizeFn,
    cubin: GetFn,
    log_size: SizeFn,
    log: GetFn,
    destroy: DestroyFn,
    error_string: ErrorStringFn,
    // Keeps the functions above valid; never dropped while they are in use (the `Nvrtc`
    // lives in a static for the rest of the process).
    _libs: Vec<libloading::Library>,
}

/// What NVRTC made of a source.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// PTX text (for a virtual architecture, `compute_XX`), or empty.
    pub ptx: String,
    /// Machine code (for a real architecture, `sm_XX`), or empty.
    pub cubin: Vec<u8>,
    /// The compiler's messages: empty when it had nothing to say (no warning).
    pub log: String,
}

impl Nvrtc {
    /// NVRTC as [`libs::report`] found it, opened once per process; why not otherwise.
    pub(crate) fn get() -> Result<&'static Nvrtc, Unusable> {
        static NVRTC: OnceLock<Result<Nvrtc, Unusable>> = OnceLock::new();
        NVRTC
            .get_or_init(|| match &libs::report().nvrtc {
                libs::Found::Loaded(l) => Nvrtc::open(l.clone()),
                libs::Found::Missing { why, looked_in } => {
                    Err(format!("libnvrtc: {why}; looked in: {}", looked_in.join(", ")).into())
                }
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn open(loaded: Loaded) -> Result<Nvrtc, Unusable> {
        let mut libs = Vec::new();
        if let Some(dir) = std::fs::canonicalize(&loaded.path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
        {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
                {
                    // SAFETY: opening the builtins runs only their initialisers; NVRTC
                    // would open the same library itself.
                    if let Ok(b) = unsafe { libloading::Library::new(entry.path()) } {
                        libs.push(b);
                    }
                }
            }
        }
        let what = |e: libloading::Error| format!("{}: {e}", loaded.path.display());
        // SAFETY: opening NVRTC runs only its initialisers.
        let lib = unsafe { libloading::Library::new(&loaded.path) }.map_err(what)?;
        macro_rules! sym {
            ($t:ty, $name:literal) => {
                // SAFETY: the symbol is NVRTC's function of that name, whose C signature is
                // `$t` in CUDA 12 and 13 alike; the library stays loaded in `_libs`.
                *unsafe { lib.get::<$t>(concat!($name, "\0").as_bytes()) }.map_err(what)?
            };
        }
        let _: VersionFn = sym!(VersionFn, "nvrtcVersion");
        let nvrtc = Nvrtc {
            create: sym!(CreateFn, "nvrtcCreateProgram"),
            compile: sym!(CompileFn, "nvrtcCompileProgram"),
            ptx_size: sym!(SizeFn, "nvrtcGetPTXSize"),
            ptx: sym!(GetFn, "nvrtcGetPTX"),
            cubin_size: sym!(SizeFn, "nvrtcGetCUBINSize"),
            cubin: sym!(GetFn, "nvrtcGetCUBIN"),
            log_size: sym!(SizeFn, "nvrtcGetProgramLogSize"),
            log: sym!(GetFn, "nvrtcGetProgramLog"),
            destroy: sym!(DestroyFn, "nvrtcDestroyProgram"),
            error_string: sym!(ErrorStringFn, "nvrtcGetErrorString"),
            loaded,
            _libs: Vec::new(),
        };
        libs.push(lib);
        Ok(Nvrtc {
            _libs: libs,
            ..nvrtc
        })
    }

    fn error(&self, call: &str, code: c_int) -> String {
        // SAFETY: nvrtcGetErrorString returns a static C string for any code.
        let text = unsafe { (self.error_string)(code) };
        let text = if text.is_null() {
            "unknown error".into()
        } else {
            // SAFETY: non-null, NUL-terminated and static (NVRTC's documentation).
            unsafe { CStr::from_ptr(text) }.to_string_lossy()
        };
        format!("{call}: {text} ({code})")
    }

    /// Compiles `source` (named `name` in messages) with `options`. A compile error is the
    /// error, with the log.
    pub(crate) fn compile(
        &self,
        source: &str,
        name: &str,
        options: &[&str],
    ) -> Result<Compiled, Unusable> {
        let c = |s: &str| CString::new(s).map_err(|_| format!("{s:?} holds a NUL byte"));
        let (src, cname) = (c(source)?, c(name)?);
        let opts = options
            .iter()
            .map(|o| c(o))
            .collect::<Result<Vec<_>, _>>()?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: the strings are live NUL-terminated C strings; no headers are passed.
        let rc = unsafe {
            (self.create)(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(self.error("nvrtcCreateProgram", rc).into());
        }
        let program = ProgramGuard { nvrtc: self, prog };
        let n = c_int::try_from(opt_ptrs.len()).map_err(|_| "too many options".to_string())?;
        // SAFETY: a live program; `opt_ptrs` holds `n` live C strings.
        let compiled = unsafe { (self.compile)(program.prog, n, opt_ptrs.as_ptr()) };
        let log = program.read(self.log_size, self.log, "log")?;
        let log = String::from_utf8_lossy(&log)
            .trim_end_matches('\0')
            .trim()
            .to_string();
        if compiled != 0 {
            return Err(format!("{}\n{log}", self.error("nvrtcCompileProgram", compiled)).into());
        }
        let virtual_arch = !options.iter().any(|o| o.contains("sm_"));
        let (ptx, cubin) = if virtual_arch {
            let ptx = program.read(self.ptx_size, self.ptx, "PTX")?;
            let ptx = String::from_utf8_lossy(&ptx)
                .trim_end_matches('\0')
                .to_string();
            (ptx, Vec::new())
        } else {
            (
                String::new(),
                program.read(self.cubin_size, self.cubin, "CUBIN")?,
            )
        };
        Ok(Compiled { ptx, cubin, log })
    }
}

// SAFETY: the function pointers are plain C functions that NVRTC documents as thread-safe
// (each call works on its own program); the libraries are only kept open.
unsafe impl Send for Nvrtc {}
// SAFETY: as above.
unsafe impl Sync for Nvrtc {}

/// A program, destroyed when dropped.
struct ProgramGuard<'a> {
    nvrtc: &'a Nvrtc,
    prog: Program,
}

impl ProgramGuard<'_> {
    /// One of the program's outputs, through its size and get calls.
    fn read(&self, size: SizeFn, get: GetFn, what: &str) -> Result<Vec<u8>, Unusable> {
        let mut len = 0usize;
        // SAFETY: a live program and a live out-pointer.
        let rc = unsafe { size(self.prog, &mut len) };
        if rc != 0 {
            return Err(self
                .nvrtc
                .error(&format!("reading the {what} size"), rc)
                .into());
        }
        let mut buf = vec![0u8; len];
        if len > 0 {
            // SAFETY: `buf` holds the `len` bytes NVRTC just said it writes.
            let rc = unsafe { get(self.prog, buf.as_mut_ptr().cast()) };
            if rc != 0 {
                return Err(self.nvrtc.error(&format!("reading the {what}"), rc).into());
            }
        }
        Ok(buf)
    }
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the program came from nvrtcCreateProgram and is destroyed once, here.
        unsafe { (self.nvrtc.destroy)(&mut self.prog) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where NVRTC is found (CI names the wheel's folder), its log carries warnings and a
    /// compile error carries the log.
    #[test]
    fn warnings_reach_the_log_and_errors_the_message() {
        let Ok(nvrtc) = Nvrtc::get() else {
            println!("skipped: no libnvrtc");
            return;
        };
        let warned = nvrtc
            .compile(
                "#warning \"rimms-test-warning\"\nextern \"C\" __global__ void k() {}\n",
                "w.cu",
                &[],
            )
            .unwrap();
        assert!(warned.log.contains("rimms-test-warning"), "{}", warned.log);
        let clean = nvrtc
            .compile("extern \"C\" __global__ void k() {}\n", "c.cu", &[])
            .unwrap();
        assert_eq!(clean.log, "");
        assert!(clean.ptx.contains(".entry k("), "{}", clean.ptx);
        let err = nvrtc
            .compile("__global__ void k() { undeclared(); }\n", "e.cu", &[])
            .unwrap_err();
        assert!(err.0.contains("undeclared"), "{err}");
    }
}

//! The layers of `rimms-runtime` (ARCHITECTURE.md's picture) as a test: reads every source
//! file under `src/`, resolves each `crate::…` and `super::…` path it names to the module it
//! lands in, and fails on an arrow the architecture says never exists — coherence and the
//! allocators reaching up into backends or the runtime, the memory spaces (the memory system
//! among them) reaching up into the runtime, the buffers or a backend, a backend reaching into
//! coherence, the runtime or another backend, the shared vocabulary (`device.rs`,
//! `backend/error.rs`) importing anything of the crate.
//!
//! Unit tests inside a module (`#[cfg(test)] mod tests`, `tests.rs`, `tests/`) are left out:
//! a test may build a whole runtime. Comments are left out too, so a doc link is no import.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// One module path, as segments below the crate root (`["backend", "sim", "staged"]`).
type ModPath = Vec<String>;

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The module a file defines: `src/backend/sim/mod.rs` is `backend::sim`.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: ModPath = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without its trailing `#[cfg(test)]` module.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let without_comment = match line.find("// ") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segment of every `crate::` path in `code`, braces of a `use crate::{…}` opened.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // `rimms_runtime::…` or another crate's `…crate::`
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            let group = &inner[..inner.find('}').unwrap_or(inner.len())];
            for item in group.split(',') {
                let name = ident_at(item.trim());
                if !name.is_empty() {
                    found.push(name.to_string());
                }
            }
        } else {
            found.push(ident_at(rest).to_string());
        }
    }
    found
}

/// Where each `super::…` path of a file in `module` lands, down to its first real segment.
fn super_paths(code: &str, module: &ModPath) -> Vec<ModPath> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("super::") {
        if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // the inner links of a `super::super::` chain
        }
        let mut rest = &code[at..];
        let mut base = module.clone();
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        let name = ident_at(rest);
        if !name.is_empty() && name != "super" {
            base.push(name.to_string());
            found.push(base);
        }
    }
    found
}

/// The crate root's re-exports (`Error` → `error`), so `crate::Error` resolves to its module.
fn root_reexports(lib: &str) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for statement in code_of(lib).split(';') {
        let s = statement.trim();
        let Some(path) = s
            .strip_prefix("pub use ")
            .filter(|p| !p.starts_with("crate::__private"))
        else {
            continue;
        };
        let module = ident_at(path).to_string();
        let names = match path.find('{') {
            Some(open) => path[open + 1..].trim_end_matches('}').to_string(),
            None => path.rsplit("::").next().unwrap_or("").to_string(),
        };
        for name in names.split(',') {
            let name = name.split(" as ").last().unwrap_or("").trim();
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() {
                map.insert(name.to_string(), module.clone());
            }
        }
    }
    map
}

/// Every module each module's code names, as module paths below the root.
fn dependencies() -> Vec<(ModPath, ModPath)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let reexports = root_reexports(&lib);
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let mut edges = Vec::new();
    for file in files {
        let module = module_of(&src, &file);
        let code = code_of(&fs::read_to_string(&file).expect("read"));
        for first in crate_paths(&code) {
            let target = reexports.get(&first).cloned().unwrap_or(first);
            // A nested path: `crate::backend::cpu::…` lands in `backend::cpu`.
            let rest = code
                .split(&format!("crate::{target}::"))
                .skip(1)
                .map(ident_at)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>();
            if rest.is_empty() {
                edges.push((module.clone(), vec![target]));
            } else {
                for second in rest {
                    edges.push((module.clone(), vec![target.clone(), second]));
                }
            }
        }
        for target in super_paths(&code, &module) {
            edges.push((module.clone(), target));
        }
    }
    edges
}

fn starts_with(path: &ModPath, prefix: &[&str]) -> bool {
    path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

fn show(path: &ModPath) -> String {
    path.join("::")
}

/// `from` may not name anything under `to`.
fn never(edges: &[(ModPath, ModPath)], from: &[&str], to: &[&str], violations: &mut Vec<String>) {
    for (a, b) in edges {
        if starts_with(a, from) && starts_with(b, to) && !starts_with(b, from) {
            violations.push(format!("{} imports {}", show(a), show(b)));
        }
    }
}

const BACKENDS: [&str; 4] = ["cpu", "sim", "fpga", "cuda"];

#[test]
fn the_never_arrows_of_the_architecture_hold() {
    let edges = dependencies();
    assert!(
        edges
            .iter()
            .any(|(a, b)| starts_with(a, &["runtime"]) && starts_with(b, &["backend"])),
        "the scan found no import of a backend by the runtime: it reads nothing"
    );
    let mut violations = Vec::new();
    for layer in ["coherence", "alloc"] {
        for above in ["backend", "runtime", "data", "kernel", "sched", "scope"] {
            never(&edges, &[layer], &[above], &mut violations);
        }
    }
    never(&edges, &["alloc"], &["space"], &mut violations);
    // The memory system lives in `space`, under the runtime and the buffers that use it.
    for above in [
        "runtime",
        "data",
        "kernel",
        "sched",
        "scope",
        "host_loop",
        "coherence",
    ] {
        never(&edges, &["space"], &[above], &mut violations);
    }
    for backend in BACKENDS.into_iter().chain(["host_kernels"]) {
        never(&edges, &["space"], &["backend", backend], &mut violations);
    }
    for above in [
        "coherence",
        "runtime",
        "data",
        "sched",
        "scope",
        "host_loop",
    ] {
        never(&edges, &["backend"], &[above], &mut violations);
    }
    for a in BACKENDS {
        for b in BACKENDS.into_iter().filter(|b| *b != a) {
            never(&edges, &["backend", a], &["backend", b], &mut violations);
        }
    }
    for leaf in [
        &["device"][..],
        &["space", "id"][..],
        &["backend", "error"][..],
    ] {
        for (a, b) in &edges {
            if starts_with(a, leaf) {
                violations.push(format!("{} is a leaf but imports {}", show(a), show(b)));
            }
        }
    }
    violations.sort();
    violations.dedup();
    assert!(
        violations.is_empty(),
        "imports against the layers of ARCHITECTURE.md:\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn the_scan_resolves_paths_the_way_rust_does() {
    let module: ModPath = vec!["backend".into(), "sim".into(), "staged".into()];
    let code = "use super::super::cpu::kernels;\nuse crate::{device::Device, error::Result};\nlet x = crate::Error::Config;";
    assert_eq!(
        super_paths(code, &module),
        vec![vec!["backend".to_string(), "cpu".to_string()]]
    );
    assert_eq!(crate_paths(code), ["device", "error", "Error"]);
    let lib = "pub use error::{Error, Result};\npub use device::Device;\n#[doc(hidden)]\npub mod __private {}";
    let map = root_reexports(lib);
    assert_eq!(map.get("Error").map(String::as_str), Some("error"));
    assert_eq!(map.get("Device").map(String::as_str), Some("device"));
    assert_eq!(
        code_of("use a;\n// use crate::runtime;\n#[cfg(test)]\nmod tests { use crate::runtime; }"),
        "use a;\n"
    );
}

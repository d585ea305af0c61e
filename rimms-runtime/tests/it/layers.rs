//! The layers of `rimms-runtime` (ARCHITECTURE.md's picture) as a test: reads every source
//! file under `src/`, resolves each `crate::…` and `super::…` path it names to the module it
//! lands in, prints the graph of top-level modules, and fails on a cycle in it or on an arrow
//! the architecture says never exists: the vocabulary (`hal`) or the built-in API declarations
//! (`apis`) importing the rest of the crate; coherence and the allocators reaching up; the
//! memory spaces reaching up into the runtime, the buffers or a backend; a backend importing
//! anything but the vocabulary, `space`'s link model, the API declarations, `input_file`
//! (a leaf reader of user-named files) and `vclock` (the virtual clock, a leaf), or another
//! backend; anything below the top importing
//! the runtime handle's module (`runtime/`); the buffers importing the runtime or what runs
//! calls; stats importing the kernels; the scheduler importing what it is handed.
//!
//! Unit tests inside a module (`#[cfg(test)] mod tests`, `tests.rs`, `tests/`) are left out:
//! a test may build a whole runtime. Comments are left out too, so a doc link is no import.
//! The scan is checked itself: each arrow is fed a synthetic source with one violation, which
//! must be reported.

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
        if trimmed.starts_with("#[cfg(test)]") {
            match lines.peek().map(|next| next.trim()) {
                // `mod tests;` declares a file the scan skips; the code after it still counts.
                Some(next) if next.starts_with("mod tests") && next.ends_with(';') => {
                    lines.next();
                    continue;
                }
                Some(next) if next.starts_with("mod tests") => break,
                _ => {}
            }
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

/// The crate root's re-exports (`Error` → `hal`), so `crate::Error` resolves to its module.
/// Only re-exports of the crate's own modules count, and a name that is a module stays one:
/// the root re-exports the `kernel` attribute macro beside the `kernel` module.
fn root_reexports(lib: &str) -> HashMap<String, String> {
    let code = code_of(lib);
    let modules: Vec<String> = code
        .split(';')
        .filter_map(|s| {
            let s = without_attributes(s);
            s.strip_prefix("pub mod ")
                .or_else(|| s.strip_prefix("mod "))
                .map(|m| ident_at(m).to_string())
        })
        .collect();
    let mut map = HashMap::new();
    for statement in code.split(';') {
        let s = without_attributes(statement);
        let Some(path) = s
            .strip_prefix("pub use ")
            .filter(|p| !p.starts_with("crate::__private"))
        else {
            continue;
        };
        let module = ident_at(path.trim_start_matches("crate::")).to_string();
        if !modules.contains(&module) {
            continue;
        }
        let names = match path.find('{') {
            Some(open) => path[open + 1..].trim_end_matches('}').to_string(),
            None => path.rsplit("::").next().unwrap_or("").to_string(),
        };
        for name in names.split(',') {
            let name = name.split(" as ").last().unwrap_or("").trim();
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() && !modules.iter().any(|m| m == name) {
                map.insert(name.to_string(), module.clone());
            }
        }
    }
    map
}

/// A statement without the attributes in front of it (`#[cfg(feature = "fpga")]`).
fn without_attributes(statement: &str) -> &str {
    let mut s = statement.trim();
    while s.starts_with("#[") {
        match s.find(']') {
            Some(end) => s = s[end + 1..].trim_start(),
            None => break,
        }
    }
    s
}

/// Every module each module's code names, as module paths below the root.
fn dependencies() -> Vec<(ModPath, ModPath)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let sources: Vec<(ModPath, String)> = files
        .iter()
        .map(|file| {
            let text = fs::read_to_string(file).expect("read");
            (module_of(&src, file), text)
        })
        .collect();
    dependencies_in(&lib, &sources)
}

/// Every module each of `sources` (a module and its file's text) names; `lib` is the crate
/// root's text, whose re-exports resolve `crate::Error` to its module.
fn dependencies_in(lib: &str, sources: &[(ModPath, String)]) -> Vec<(ModPath, ModPath)> {
    let reexports = root_reexports(lib);
    let mut edges = Vec::new();
    for (module, text) in sources {
        let code = code_of(text);
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
        for target in super_paths(&code, module) {
            edges.push((module.clone(), target));
        }
    }
    edges
}

/// The graph of top-level modules (`lib` for the crate root), without self-arrows.
fn module_graph(edges: &[(ModPath, ModPath)]) -> BTreeMap<String, BTreeSet<String>> {
    let top = |p: &ModPath| p.first().cloned().unwrap_or_else(|| "lib".to_string());
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in edges {
        let (a, b) = (top(a), top(b));
        if a != b {
            graph.entry(a).or_default().insert(b);
        }
    }
    graph
}

/// The strongly connected components of `graph` with more than one module: its cycles.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Reachability by depth-first search from each module; graphs here have a dozen nodes.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let nodes: BTreeSet<String> = graph
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a.clone()).chain(bs.iter().cloned()))
        .collect();
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (n, reach(n))).collect();
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for n in &nodes {
        let component: Vec<String> = nodes
            .iter()
            .filter(|m| reaches[n].contains(*m) && reaches[*m].contains(n))
            .cloned()
            .collect();
        if component.len() > 1 {
            found.insert(component);
        }
    }
    found.into_iter().collect()
}

/// The graph as `a -> b, c` lines and its cycles, as the test prints it.
fn show_graph(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    let mut out = String::new();
    for (a, bs) in graph {
        let targets: Vec<&str> = bs.iter().map(String::as_str).collect();
        out.push_str(&format!("{a} -> {}\n", targets.join(", ")));
    }
    out.push_str(&format!("cycles: {:?}\n", cycles(graph)));
    out
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

/// The top-level modules under the runtime handle's module, `runtime/`: they may import it.
const TOP: [&str; 1] = ["runtime"];

/// What a backend may import besides the other modules of `backend/`.
const BACKEND_MAY_IMPORT: [&[&str]; 6] = [
    &["hal"],
    &["apis"],
    &["space", "LinkModel"],
    &["space", "link"],
    &["input_file"],
    &["vclock"],
];

/// Every import in `edges` against the layers of ARCHITECTURE.md, sorted.
fn violations(edges: &[(ModPath, ModPath)]) -> Vec<String> {
    let mut violations = Vec::new();
    let graph = module_graph(edges);
    for cycle in cycles(&graph) {
        violations.push(format!("a cycle of modules: {}", cycle.join(" -> ")));
    }
    for layer in ["coherence", "alloc"] {
        for above in [
            "backend", "runtime", "machine", "data", "kernel", "sched", "scope",
        ] {
            never(edges, &[layer], &[above], &mut violations);
        }
    }
    never(edges, &["alloc"], &["space"], &mut violations);
    // The memory system lives in `space`, under the runtime and the buffers that use it.
    for above in [
        "runtime",
        "machine",
        "data",
        "kernel",
        "sched",
        "scope",
        "host_loop",
        "coherence",
        "backend",
    ] {
        never(edges, &["space"], &[above], &mut violations);
    }
    // Backends speak the vocabulary and register against the API declarations.
    for (a, b) in edges {
        if starts_with(a, &["backend"])
            && !starts_with(b, &["backend"])
            && !BACKEND_MAY_IMPORT.iter().any(|ok| starts_with(b, ok))
        {
            violations.push(format!("{} imports {}", show(a), show(b)));
        }
    }
    for a in BACKENDS {
        for b in BACKENDS.into_iter().filter(|b| *b != a) {
            never(edges, &["backend", a], &["backend", b], &mut violations);
        }
    }
    // Nothing below the top imports the runtime handle's module.
    for (a, b) in edges {
        if !a.is_empty()
            && !TOP.iter().any(|t| starts_with(a, &[t]))
            && TOP.iter().any(|t| starts_with(b, &[t]))
        {
            violations.push(format!("{} imports {}", show(a), show(b)));
        }
    }
    // Buffers reach the memory system, never the runtime or what runs calls.
    for above in ["runtime", "machine", "kernel", "sched", "scope"] {
        never(edges, &["data"], &[above], &mut violations);
    }
    never(edges, &["stats"], &["kernel"], &mut violations);
    // The scheduler is policy: it is handed the devices and the costs.
    for above in ["runtime", "machine", "kernel", "data", "scope"] {
        never(edges, &["sched"], &[above], &mut violations);
    }
    // What calls need of a runtime imports none of what it serves.
    for above in ["runtime", "kernel", "scope"] {
        never(edges, &["machine"], &[above], &mut violations);
    }
    // The vocabulary and the API declarations are leaves.
    // So is the virtual clock, which backends and the memory system charge.
    for (leaf, may) in [
        (&["hal"][..], &["hal"][..]),
        (&["apis"][..], &["hal"][..]),
        (&["vclock"][..], &["vclock"][..]),
    ] {
        for (a, b) in edges {
            if starts_with(a, leaf) && !starts_with(b, leaf) && !starts_with(b, may) {
                violations.push(format!("{} is a leaf but imports {}", show(a), show(b)));
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

#[test]
fn the_module_graph_has_no_cycle_and_the_never_arrows_hold() {
    let edges = dependencies();
    assert!(
        edges
            .iter()
            .any(|(a, b)| starts_with(a, &["runtime"]) && starts_with(b, &["backend"])),
        "the scan found no import of a backend by the runtime: it reads nothing"
    );
    // `cargo test layers -- --nocapture` shows it.
    println!("{}", show_graph(&module_graph(&edges)));
    let violations = violations(&edges);
    assert!(
        violations.is_empty(),
        "imports against the layers of ARCHITECTURE.md:\n  {}",
        violations.join("\n  ")
    );
}

/// The violations the scan reports in one synthetic file of module `module`.
fn violations_in(module: &[&str], code: &str) -> Vec<String> {
    let module: ModPath = module.iter().map(|s| s.to_string()).collect();
    let lib = "mod error;\npub use error::{Error, Result};";
    violations(&dependencies_in(lib, &[(module, code.to_string())]))
}

#[test]
fn each_never_arrow_fails_on_an_injected_violation() {
    let cases: [(&[&str], &str, &str); 9] = [
        (
            &["kernel", "dispatch"],
            "use crate::runtime::RuntimeBuilder;",
            "kernel::dispatch imports runtime::RuntimeBuilder",
        ),
        (
            &["scope"],
            "use crate::runtime::Runtime;",
            "scope imports runtime::Runtime",
        ),
        (
            &["data", "buffer"],
            "use crate::runtime::Runtime;",
            "data::buffer imports runtime::Runtime",
        ),
        (
            &["data"],
            "use crate::machine::Shared;",
            "data imports machine::Shared",
        ),
        (
            &["stats", "page"],
            "use crate::kernel::registry;",
            "stats::page imports kernel::registry",
        ),
        (
            &["backend", "sim"],
            "use crate::kernel::KernelArg;",
            "backend::sim imports kernel::KernelArg",
        ),
        (
            &["backend", "cuda", "device"],
            "use crate::space::Pool;",
            "backend::cuda::device imports space::Pool",
        ),
        (
            &["backend", "fpga"],
            "use crate::data::HeteData;",
            "backend::fpga imports data::HeteData",
        ),
        (
            &["hal", "ctx"],
            "use crate::backend::host_kernels::FftPlans;",
            "hal::ctx is a leaf but imports backend::host_kernels",
        ),
    ];
    for (module, code, expected) in cases {
        let found = violations_in(module, code);
        assert!(
            found.iter().any(|v| v == expected),
            "`{code}` in {module:?}: expected {expected:?}, the scan reported {found:?}"
        );
    }
    // What is allowed stays allowed.
    for (module, code) in [
        (
            &["backend", "sim"][..],
            "use crate::hal::{Error, KernelCtx};\nuse crate::apis;\nuse crate::space::LinkModel;",
        ),
        (
            &["kernel", "dispatch"][..],
            "use crate::machine::{Runtime, Shared};",
        ),
        (
            &["runtime", "builder"][..],
            "use crate::machine::Shared;\nuse crate::backend::sim::SimBackend;",
        ),
    ] {
        assert_eq!(
            violations_in(module, code),
            Vec::<String>::new(),
            "`{code}` in {module:?}"
        );
    }
}

#[test]
fn a_cycle_of_modules_is_reported() {
    let lib = "";
    let sources = [
        (
            vec!["sched".to_string()],
            "use crate::kernel::KernelArg;".to_string(),
        ),
        (
            vec!["kernel".to_string(), "choose".to_string()],
            "use crate::sched::Scheduler;".to_string(),
        ),
    ];
    let edges = dependencies_in(lib, &sources);
    assert_eq!(
        cycles(&module_graph(&edges)),
        vec![vec!["kernel".to_string(), "sched".to_string()]]
    );
    assert!(violations(&edges)
        .iter()
        .any(|v| v == "a cycle of modules: kernel -> sched"));
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
    let lib = "mod error;\nmod device;\npub mod kernel;\npub use error::{Error, Result};\npub use device::Device;\n#[cfg(feature = \"fpga\")]\npub use device::Fpga;\npub use rimms_macros::{api, kernel};\n#[doc(hidden)]\npub mod __private {}";
    let map = root_reexports(lib);
    assert_eq!(map.get("Error").map(String::as_str), Some("error"));
    assert_eq!(map.get("Device").map(String::as_str), Some("device"));
    assert_eq!(map.get("Fpga").map(String::as_str), Some("device"));
    assert_eq!(
        map.get("kernel"),
        None,
        "a module is not the macro of its name"
    );
    assert_eq!(
        map.get("api"),
        None,
        "another crate's re-export is no module of this one"
    );
    assert_eq!(
        code_of("use a;\n// use crate::runtime;\n#[cfg(test)]\nmod tests { use crate::runtime; }"),
        "use a;\n"
    );
    assert_eq!(
        code_of("#[cfg(test)]\nmod tests;\nuse b;"),
        "use b;\n",
        "a test module in its own file hides nothing after its declaration"
    );
}

/// The `crate::…` paths of non-test code whose first segment is no module of the crate (a
/// root re-export such as `crate::Error`): import paths are written one way, through the
/// module that defines the item, so the graph above is exact.
fn root_reexport_paths(lib: &str, sources: &[(ModPath, String)]) -> Vec<String> {
    let modules: Vec<String> = code_of(lib)
        .split(';')
        .filter_map(|s| {
            let s = without_attributes(s);
            s.strip_prefix("pub mod ")
                .or_else(|| s.strip_prefix("mod "))
                .map(|m| ident_at(m).to_string())
        })
        .collect();
    let mut found = Vec::new();
    for (module, text) in sources {
        if module.is_empty() {
            continue; // the crate root declares the re-exports
        }
        for first in crate_paths(&code_of(text)) {
            if !modules.contains(&first) && first != "__private" {
                found.push(format!("{} names crate::{first}", show(module)));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn import_paths_name_the_module_that_defines_the_item() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let sources: Vec<(ModPath, String)> = files
        .iter()
        .map(|file| {
            (
                module_of(&src, file),
                fs::read_to_string(file).expect("read"),
            )
        })
        .collect();
    let found = root_reexport_paths(&lib, &sources);
    assert!(
        found.is_empty(),
        "paths through the crate root's re-exports:\n  {}",
        found.join("\n  ")
    );
    // And the check sees one.
    let injected = [(vec!["kernel".to_string()], "use crate::Error;".to_string())];
    assert_eq!(
        root_reexport_paths("mod hal;\npub use hal::Error;", &injected),
        ["kernel names crate::Error"]
    );
}

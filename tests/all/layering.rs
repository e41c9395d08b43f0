//! The modules of `host/src` form layers, and a module only uses modules of lower layers:
//!
//! ```text
//! cli
//! config                      the file: composes every section, builds a Runtime
//! serve   agent               the front doors
//! runtime                     the pipeline
//! registry                    components → tools
//! sandbox   ledger   policy   execution, record, decisions
//! contract                    the vocabulary
//! ```
//!
//! Modules of one layer do not use each other either. This test reads every source file and
//! fails on any `crate::` path (or `super::super::` reaching another module) that points up or
//! sideways, and on any file over 500 lines whose first comment does not say why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::repo;

/// Each top-level module and its layer (0 lowest).
const LAYERS: &[(&str, u8)] = &[
    ("contract", 0),
    ("sandbox", 1),
    ("ledger", 1),
    ("policy", 1),
    ("registry", 2),
    ("runtime", 3),
    ("serve", 4),
    ("agent", 4),
    ("config", 5),
    ("cli", 6),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`None` for lib.rs and main.rs).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// What `crate::Name` means for each name `lib.rs` re-exports: the module it comes from.
fn root_reexports(src: &Path) -> BTreeMap<String, String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut map = BTreeMap::new();
    for line in lib.lines().filter(|l| l.starts_with("pub use ")) {
        let rest = line.trim_start_matches("pub use ").trim_end_matches(';');
        let module = rest.split("::").next().unwrap().to_string();
        let names = match rest.split_once("::{") {
            Some((_, list)) => list.trim_end_matches('}').to_string(),
            None => rest.rsplit("::").next().unwrap().to_string(),
        };
        for n in names.split(',') {
            map.insert(n.trim().to_string(), module.clone());
        }
    }
    map
}

/// The modules one source text names through `crate::`, with the line of each use.
fn uses(text: &str, reexports: &BTreeMap<String, String>) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let names: Vec<&str> = if let Some(list) = rest.strip_prefix('{') {
                let end = list.find('}').unwrap_or(list.len());
                list[..end].split(',').collect()
            } else {
                vec![rest]
            };
            for name in names {
                let ident: String = name
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let module = if layer(&ident).is_some() {
                    Some(ident)
                } else {
                    reexports.get(&ident).cloned()
                };
                if let Some(m) = module {
                    out.push((m, n + 1));
                }
            }
        }
    }
    out
}

/// No module uses a module of its own layer or above.
#[test]
fn modules_only_use_lower_layers() {
    let src = repo().join("host/src");
    let reexports = root_reexports(&src);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(own) = layer(&module) else {
            wrong.push(format!(
                "{}: module `{module}` has no layer",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            !text.contains("super::super::super"),
            "{}: reach other modules through crate::",
            file.display()
        );
        for (used, line) in uses(&text, &reexports) {
            seen += 1;
            if used != module && layer(&used).is_some_and(|l| l >= own) {
                wrong.push(format!(
                    "{}:{line}: `{module}` (layer {own}) uses `{used}` (layer {})",
                    file.strip_prefix(&src).unwrap().display(),
                    layer(&used).unwrap()
                ));
            }
        }
    }
    assert!(
        seen > 100,
        "only {seen} crate:: uses found: the scan is broken"
    );
    assert!(
        wrong.is_empty(),
        "upward or sideways uses:\n{}",
        wrong.join("\n")
    );
}

/// The scan sees what it must: a root re-export, a braced list, a path in an expression.
#[test]
fn the_scan_finds_every_form_of_use() {
    let mut re = BTreeMap::new();
    re.insert("Runtime".to_string(), "runtime".to_string());
    let found = uses(
        "use crate::{Runtime, contract::Code};\nlet x = crate::serve::Shared::new(); // crate::cli\n",
        &re,
    );
    let modules: Vec<&str> = found.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(modules, ["runtime", "contract", "serve"]);
}

/// Every source file is under 500 lines, or its first comment says why it is not.
#[test]
fn files_are_small_or_say_why() {
    let src = repo().join("host/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut long = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = text.lines().count();
        let head: String = text
            .lines()
            .take_while(|l| l.starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        if lines >= 500 && !head.contains("Longer than 500 lines") {
            long.push(format!(
                "{} ({lines} lines)",
                file.strip_prefix(&src).unwrap().display()
            ));
        }
    }
    assert!(
        long.is_empty(),
        "files of 500 lines or more whose first comment does not say why \
         (\"Longer than 500 lines: …\"):\n{}",
        long.join("\n")
    );
}

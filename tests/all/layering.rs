//! The modules of `host/src` and the crates re-exported there form layers, and a module only
//! uses modules of lower layers:
//!
//! ```text
//! cli
//! config                      the file: composes every section, builds a Runtime
//! serve   agent               the front doors
//! runtime                     the pipeline
//! registry                    components → tools
//! sandbox   ledger   policy   oci   execution, record, decisions, fetching
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
    ("telemetry", 0),
    ("sandbox", 1),
    ("ledger", 1),
    ("policy", 1),
    ("oci", 1),
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

/// `text` with every `//` comment blanked (lengths kept, so offsets still give lines).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => format!("{}{}", &l[..i], " ".repeat(l.len() - i)),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path one source text names, as `(segments from the crate root, line)`: `crate::a::b`,
/// and `super::…` resolved against `module` (the file's own path from the crate root). A
/// braced group — on one line or several — gives one path per member's first name.
fn paths(text: &str, module: &[String]) -> Vec<(Vec<String>, usize)> {
    let code = without_comments(text);
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let starts_path = at == 0
            || !(bytes[at - 1].is_ascii_alphanumeric()
                || bytes[at - 1] == b'_'
                || bytes[at - 1] == b':');
        let (base, mut tail): (Vec<String>, &str) = if starts_path && rest.starts_with("crate::") {
            (Vec::new(), &rest["crate::".len()..])
        } else if starts_path && rest.starts_with("super::") {
            let mut base = module.to_vec();
            let mut tail = rest;
            while let Some(t) = tail.strip_prefix("super::") {
                base.pop();
                tail = t;
            }
            (base, tail)
        } else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // Walk plain segments (`a::b::`), then the last name or a braced group.
        let mut base = base;
        loop {
            let name = ident(tail);
            let after = &tail[tail.len() - tail.trim_start().len() + name.len()..];
            if !name.is_empty() && after.starts_with("::") && !after[2..].starts_with('{') {
                base.push(name);
                tail = &after[2..];
                continue;
            }
            if !name.is_empty() && after.starts_with("::{") {
                base.push(name);
                tail = &after[2..];
            }
            break;
        }
        if let Some(group) = tail.trim_start().strip_prefix('{') {
            // The members of a group, nested groups flattened to their first names.
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let offset = group.as_ptr() as usize - code.as_ptr() as usize;
            let mut level = 0;
            let mut start = 0;
            let members = group[..end]
                .char_indices()
                .chain(std::iter::once((end, ',')));
            for (i, c) in members {
                match c {
                    '{' => level += 1,
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        let member = &group[start..i];
                        let name = ident(member);
                        // The member's own line: after the whitespace that precedes it.
                        let line =
                            line_of(offset + start + member.len() - member.trim_start().len());
                        let mut path = base.clone();
                        if name != "self" && !name.is_empty() {
                            path.push(name);
                        }
                        if !path.is_empty() {
                            out.push((path, line));
                        }
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(tail);
            let mut path = base;
            if !name.is_empty() {
                path.push(name);
            }
            out.push((path, line_of(at)));
        }
        at += 1;
    }
    out
}

/// The modules one source text names from outside its own module, with the line of each
/// use: the first segment of each path from the crate root (a name `lib.rs` re-exports counts
/// as the module it comes from).
fn uses(
    text: &str,
    module: &[String],
    reexports: &BTreeMap<String, String>,
) -> Vec<(String, usize)> {
    paths(text, module)
        .into_iter()
        .filter_map(|(path, line)| {
            let first = path.first()?;
            let m = if layer(first).is_some() {
                first.clone()
            } else {
                reexports.get(first)?.clone()
            };
            Some((m, line))
        })
        .collect()
}

/// The module path of a source file from the crate root (`crates/ledger-sqlite/src/rows.rs` →
/// `[ledger, sqlite, rows]`; a `mod.rs` is its folder).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
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
        for (used, line) in uses(&text, &module_path(&src, file), &reexports) {
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

/// The ledger facade's own parts (`crates/ledger/src`) and their layers (0 lowest): the lower
/// crates' parts it names (the stored values and interfaces, the backends), then the null
/// store, the group writer, the facade's concerns, the call's journal, and `lib.rs`, which
/// assembles (`mod`).
const LEDGER_UNITS: &[(&str, u8)] = &[
    ("chain", 0),
    ("codec", 0),
    ("error", 0),
    ("events", 0),
    ("limits", 0),
    ("outcome", 0),
    ("store", 0),
    ("task_record", 0),
    ("verdicts", 0),
    ("write", 0),
    ("sqlite", 0),
    ("postgres", 0),
    ("owner", 1),
    ("receipt_key", 1),
    ("group", 1),
    ("null", 1),
    ("claims", 2),
    ("admission", 2),
    ("audit", 2),
    ("tokens", 2),
    ("transcript", 2),
    ("recovery", 2),
    ("reconcile", 2),
    ("receipt", 2),
    ("tasks", 2),
    ("owed", 2),
    ("config", 2),
    ("journal", 3),
    ("waiting", 4),
    ("mod", 5),
];

/// Files that only tests compile: they may reach any part.
fn is_test_file(name: &str) -> bool {
    name == "tests" || name == "testing" || name == "bench" || name.ends_with("_tests")
}

/// What `crate::Name` means for each name the facade's `lib.rs` imports or re-exports: the
/// part it comes from; a name it defines itself is `mod`.
fn ledger_names(src: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = ["pub use ", "pub(crate) use ", "use "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let Some((unit, names)) = rest.split_once("::") else {
            continue;
        };
        let names = names.trim_start_matches('{').trim_end_matches('}');
        for n in names.split(',') {
            map.insert(n.trim().to_string(), unit.to_string());
        }
    }
    map
}

/// Inside the ledger facade, a part uses only parts of lower layers (so there is no import
/// circle); the crates below it (the store crate, each backend) are held apart by the compiler
/// (`crates_follow_the_layer_table`).
#[test]
fn ledger_parts_only_use_lower_parts() {
    let src = repo().join("crates/ledger/src");
    let names = ledger_names(&src);
    let unit_layer = |u: &str| LEDGER_UNITS.iter().find(|(n, _)| *n == u).map(|(_, l)| *l);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let (mut wrong, mut seen) = (Vec::new(), 0);
    for file in &files {
        let module = module_path(&src, file);
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        let own = module.first().cloned().unwrap_or_else(|| "mod".into());
        if is_test_file(&own) {
            continue;
        }
        let Some(own_layer) = unit_layer(&own) else {
            wrong.push(format!("{rel}: ledger part `{own}` has no layer"));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        // A file's inline test module may reach any part, as test files may.
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for (path, line) in paths(text, &module) {
            let Some(first) = path.first() else {
                continue;
            };
            let used = if unit_layer(first).is_some() {
                first.clone()
            } else {
                names.get(first).cloned().unwrap_or_else(|| "mod".into())
            };
            seen += 1;
            if used == own {
                continue;
            }
            let used_layer = unit_layer(&used).unwrap_or(u8::MAX);
            // The facade's concerns (layer 2 and up) use `Ledger` itself, which `lib.rs` defines.
            let facade_uses_root = own_layer >= 2 && used == "mod";
            if used_layer >= own_layer && !facade_uses_root {
                wrong.push(format!(
                    "{rel}:{line}: ledger part `{own}` (layer {own_layer}) uses `{used}` (layer {used_layer})"
                ));
            }
        }
    }
    assert!(
        seen > 60,
        "only {seen} uses inside the ledger found: the scan is broken"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Each database driver is named by its backend's crate only: the facade, the runtime and
/// everything else see the ledger's interfaces, never `rusqlite` or `tokio_postgres` (test
/// files may, to inspect a database behind the ledger).
#[test]
fn drivers_are_named_only_in_their_backends() {
    let homes = [
        ("rusqlite", "crates/ledger-sqlite/"),
        ("tokio_postgres", "crates/ledger-postgres/"),
    ];
    let mut files = Vec::new();
    for src in source_roots() {
        rust_files(&src, &mut files);
    }
    let root = repo();
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        let stem = file.file_stem().unwrap().to_string_lossy();
        if is_test_file(&stem) {
            continue;
        }
        let code = without_comments(&std::fs::read_to_string(file).unwrap());
        for (driver, home) in homes {
            if code.contains(driver) && !rel.starts_with(home) {
                wrong.push(format!("{rel} names {driver} (only {home} may)"));
            }
        }
    }
    for (name, deps) in workspace_crates() {
        for (driver, home) in homes {
            let package = driver.replace('_', "-");
            let own = format!(
                "toolhost-{}",
                home.trim_start_matches("crates/").trim_end_matches('/')
            );
            if deps.normal.contains(&package) && name != own {
                wrong.push(format!("{name} depends on {package} (only {own} may)"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The workspace's crates and their layers (0 lowest): a crate depends only on crates of lower
/// layers, so the compiler holds the layers that `modules_only_use_lower_layers` reads in the
/// `toolhost` crate's text.
const CRATE_LAYERS: &[(&str, u8)] = &[
    ("toolhost-contract", 0),
    ("toolhost-telemetry", 0),
    ("toolhost-ledger-store", 1),
    ("toolhost-ledger-sqlite", 2),
    ("toolhost-ledger-postgres", 2),
    ("toolhost-ledger", 3),
    ("toolhost-sandbox", 3),
    ("toolhost-policy", 3),
    ("toolhost-oci", 3),
    ("toolhost-registry", 4),
    ("toolhost-runtime", 5),
    ("toolhost-serve", 6),
    ("toolhost-agent", 6),
    ("toolhost", 9),
];

/// A crate's dependencies on the workspace's own crates, as its `Cargo.toml` lists them.
struct CrateDeps {
    normal: Vec<String>,
    dev: Vec<String>,
}

/// Every crate of the workspace (`host` and `crates/*`) by its package name.
fn workspace_crates() -> BTreeMap<String, CrateDeps> {
    let mut dirs = vec![repo().join("host")];
    for e in std::fs::read_dir(repo().join("crates")).unwrap() {
        dirs.push(e.unwrap().path());
    }
    let mut out = BTreeMap::new();
    for dir in dirs {
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let toml: toml::Value = toml::from_str(&text).unwrap();
        let names = |table: &str| -> Vec<String> {
            toml.get(table)
                .and_then(|t| t.as_table())
                .map(|t| t.keys().cloned().collect())
                .unwrap_or_default()
        };
        let name = toml["package"]["name"].as_str().unwrap().to_string();
        out.insert(
            name,
            CrateDeps {
                normal: names("dependencies"),
                dev: names("dev-dependencies"),
            },
        );
    }
    out
}

/// The crate graph is the layer table: every crate has a layer, depends only on crates below
/// it, and the ledger's inner crates (its stored values, its backends) are depended on by
/// ledger crates only.
#[test]
fn crates_follow_the_layer_table() {
    let layer = |c: &str| CRATE_LAYERS.iter().find(|(n, _)| *n == c).map(|(_, l)| *l);
    let crates = workspace_crates();
    assert!(crates.len() >= 13, "only {} crates found", crates.len());
    let mut wrong = Vec::new();
    for (name, deps) in &crates {
        let Some(own) = layer(name) else {
            wrong.push(format!("crate {name} has no layer"));
            continue;
        };
        for dep in deps.normal.iter().filter(|d| d.starts_with("toolhost")) {
            match layer(dep) {
                Some(l) if l < own => {}
                l => wrong.push(format!(
                    "{name} (layer {own}) depends on {dep} (layer {l:?})"
                )),
            }
            let inner = dep.starts_with("toolhost-ledger-");
            if inner && !name.starts_with("toolhost-ledger") {
                wrong.push(format!("{name} depends on the ledger's inner crate {dep}"));
            }
        }
        for dep in deps.dev.iter().filter(|d| d.starts_with("toolhost")) {
            if layer(dep).is_none_or(|l| l >= own) {
                wrong.push(format!("{name} (layer {own}) has the dev-dependency {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// No crate root hides a public module or re-export from its documentation (`#[doc(hidden)]`
/// over `pub mod` or `pub use`): the tests, benches and fuzz targets depend on the crate they
/// need instead of reaching through a hidden door in another.
#[test]
fn no_crate_root_hides_a_public_module() {
    let mut roots = vec![repo().join("host/src/lib.rs")];
    for e in std::fs::read_dir(repo().join("crates")).unwrap() {
        roots.push(e.unwrap().path().join("src/lib.rs"));
    }
    let mut hidden = Vec::new();
    for root in &roots {
        let text = std::fs::read_to_string(root).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, pair) in lines.windows(2).enumerate() {
            let public = pair[1].starts_with("pub mod ") || pair[1].starts_with("pub use ");
            if pair[0] == "#[doc(hidden)]" && public {
                hidden.push(format!("{}:{}: {}", root.display(), i + 2, pair[1]));
            }
        }
    }
    assert!(roots.len() >= 13, "only {} crate roots found", roots.len());
    assert!(hidden.is_empty(), "{}", hidden.join("\n"));
}

/// The scan sees what it must: a root re-export, a braced list over several lines, a path in
/// an expression, and `super::` paths that leave the file's module.
#[test]
fn the_scan_finds_every_form_of_use() {
    let mut re = BTreeMap::new();
    re.insert("Runtime".to_string(), "runtime".to_string());
    let here = ["serve".to_string(), "http".to_string()];
    let found = uses(
        "use crate::{\n    Runtime,\n    contract::{Code, Status},\n};\nlet x = crate::serve::Shared::new(); // crate::cli\nuse super::super::agent::Run;\nuse super::pending::P;\n",
        &here,
        &re,
    );
    let modules: Vec<(&str, usize)> = found.iter().map(|(m, l)| (m.as_str(), *l)).collect();
    assert_eq!(
        modules,
        [
            ("runtime", 2),
            ("contract", 3),
            ("serve", 5),
            ("agent", 6),
            ("serve", 7)
        ]
    );
}

/// The source folders: the `toolhost` crate's and each crate's under `crates/`.
fn source_roots() -> Vec<PathBuf> {
    let mut roots = vec![repo().join("host/src")];
    for e in std::fs::read_dir(repo().join("crates")).unwrap() {
        let src = e.unwrap().path().join("src");
        if src.is_dir() {
            roots.push(src);
        }
    }
    roots.sort();
    roots
}

/// Every source file is under 500 lines, or its first comment says why it is not.
#[test]
fn files_are_small_or_say_why() {
    let mut files = Vec::new();
    for src in source_roots() {
        rust_files(&src, &mut files);
    }
    let src = repo();
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

/// The front doors (the crates `toolhost-serve` and `toolhost-agent`) hand calls, tasks,
/// approvals and transcripts to the runtime only: neither depends on the ledger or the policy
/// crate, nor calls the runtime's `ledger()` or `policy()` accessors.
#[test]
fn front_doors_reach_past_the_runtime_nowhere() {
    let crates = workspace_crates();
    let mut wrong = Vec::new();
    for door in ["toolhost-serve", "toolhost-agent"] {
        let deps = &crates.get(door).expect("the front door's crate").normal;
        for below in ["toolhost-ledger", "toolhost-policy"] {
            if deps.iter().any(|d| d.starts_with(below)) {
                wrong.push(format!("{door} depends on {below}"));
            }
        }
    }
    let mut looked = 0;
    for dir in ["crates/serve/src", "crates/agent/src"] {
        let src = repo().join(dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in &files {
            looked += 1;
            let rel = file.strip_prefix(repo()).unwrap().display().to_string();
            let code = without_comments(&std::fs::read_to_string(file).unwrap());
            for accessor in [".ledger()", ".policy()"] {
                if code.contains(accessor) {
                    wrong.push(format!("{rel}: calls the runtime's `{accessor}`"));
                }
            }
        }
    }
    assert!(
        looked > 30,
        "only {looked} front-door files: the scan is broken"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A call is put in canonical form in one place (`crates/runtime/src/prepared.rs`, once per
/// call, which `once_per_call` counts); the other files that canonicalise JSON do so for something that is
/// not a call on its way through the pipeline, each named here with what it is.
#[test]
fn calls_are_canonicalised_in_one_place() {
    const ALLOWED: &[(&str, &str)] = &[
        (
            "crates/contract/src/canonical.rs",
            "the canonical forms themselves",
        ),
        (
            "crates/runtime/src/prepared.rs",
            "the one place a call is canonicalised",
        ),
        (
            "crates/runtime/src/approvals.rs",
            "arguments an operator passes to `toolhost approve`",
        ),
        ("crates/runtime/src/stages/admit.rs", "its unit test"),
        (
            "crates/policy/src/approval.rs",
            "handles minted from plain arguments (the CLI's path)",
        ),
        (
            "crates/serve/src/task_view.rs",
            "the stored arguments of a task `tasks/get` shows",
        ),
        (
            "crates/agent/src/step.rs",
            "the repeat key of arguments that did not parse",
        ),
        (
            "crates/registry/src/lock.rs",
            "tool definitions, digested once when a component loads",
        ),
        (
            "crates/policy/src/lib.rs",
            "the rules' revision, digested once when the policy loads",
        ),
    ];
    let mut files = Vec::new();
    for src in source_roots() {
        rust_files(&src, &mut files);
    }
    let src = repo();
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        let code = without_comments(&std::fs::read_to_string(file).unwrap());
        let canonicalises = ["canonical_json(", "canonical_call("]
            .iter()
            .any(|f| code.contains(f));
        if canonicalises && !ALLOWED.iter().any(|(f, _)| *f == rel) {
            wrong.push(rel);
        }
    }
    assert!(
        wrong.is_empty(),
        "canonicalised outside the listed places (prepare the call once and read its \
         canonical form from the Prepared):\n{}",
        wrong.join("\n")
    );
}

/// Every source file by its module path (`runtime/stages/admit.rs` → `[runtime, stages, admit]`).
fn files_by_module(src: &Path) -> BTreeMap<Vec<String>, String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap().display().to_string();
            (module_path(src, f), rel)
        })
        .collect()
}

/// The file a path from the crate root lands in: the longest prefix that is a file's module.
fn file_of<'a>(modules: &'a BTreeMap<Vec<String>, String>, path: &[String]) -> Option<&'a str> {
    (1..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n]))
        .map(String::as_str)
}

/// The import edges between the files of one top-level module (`one_module`: of the whole
/// crate, for a crate that is one module of the layers): `a` uses something of `b`.
/// A module's root (its `mod.rs`, or `x.rs` beside `x/`) declares and re-exports its
/// children, so its edges to them are not counted; a child's use of its root is.
fn import_edges(
    src: &Path,
    one_module: bool,
) -> BTreeMap<String, std::collections::BTreeSet<String>> {
    let modules = files_by_module(src);
    let mut edges: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (module, rel) in &modules {
        if module.is_empty() || module.iter().any(|m| is_test_file(m)) {
            continue;
        }
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        // Unit tests (`mod tests { use super::*; … }`) are not the file's own imports.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for (path, _) in paths(text, module) {
            let Some(target) = file_of(&modules, &path) else {
                continue;
            };
            let target_module = module_path(src, &src.join(target));
            let same_top = one_module || target_module.first() == module.first();
            let own_child = target_module.starts_with(module);
            if target != rel && same_top && !own_child {
                edges
                    .entry(rel.clone())
                    .or_default()
                    .insert(target.to_string());
            }
        }
    }
    edges
}

/// The import circles among `edges`: each strongly connected group of two or more files.
fn circles(edges: &BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(f) = todo.pop() {
            for next in edges.get(&f).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, _> = edges.keys().map(|f| (f, reaches(f))).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for (f, from_f) in &reach {
        let mut group: Vec<String> = from_f
            .iter()
            .filter(|g| reach.get(g).is_some_and(|r| r.contains(*f)))
            .cloned()
            .collect();
        if !group.is_empty() {
            group.sort();
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
    }
    groups
}

/// No two files of a module import each other, directly or round a circle: helpers are
/// leaves, a module's root only declares and re-exports, and a dispatcher only dispatches.
#[test]
fn no_import_circle_inside_a_module() {
    let mut found = Vec::new();
    let mut count = 0;
    for src in source_roots() {
        let one_module = !src.starts_with(repo().join("host"));
        let edges = import_edges(&src, one_module);
        count += edges.values().map(|e| e.len()).sum::<usize>();
        found.extend(circles(&edges));
    }
    assert!(count > 100, "only {count} edges found: the scan is broken");
    assert!(
        found.is_empty(),
        "import circles:\n{}",
        found
            .iter()
            .map(|g| g.join(" ⇄ "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The scan finds a circle, and only a circle.
#[test]
fn the_circle_scan_finds_circles() {
    let mut edges: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "d")] {
        edges.entry(a.into()).or_default().insert(b.into());
    }
    assert_eq!(circles(&edges), vec![vec!["a", "b", "c"]]);
}

//! `toolhost new NAME --lang rust|python|js`: a tool project that builds anywhere, from the
//! templates in `host/templates/` and the host's own WIT, all compiled into the binary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::report::usage_message;
use crate::registry::docs::TOOL_WIT;

/// The languages a tool can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// Longest project name: it names a WIT package, a world and a file.
const MAX_NAME_LEN: usize = 40;

/// WIT keywords, which cannot name a package or world unescaped.
const WIT_KEYWORDS: &[&str] = &[
    "as",
    "async",
    "bool",
    "borrow",
    "char",
    "constructor",
    "enum",
    "export",
    "f32",
    "f64",
    "flags",
    "from",
    "func",
    "future",
    "import",
    "include",
    "interface",
    "list",
    "option",
    "own",
    "package",
    "record",
    "resource",
    "result",
    "s16",
    "s32",
    "s64",
    "s8",
    "static",
    "stream",
    "string",
    "tuple",
    "type",
    "u16",
    "u32",
    "u64",
    "u8",
    "use",
    "variant",
    "with",
    "world",
];

/// Files every project gets, and each language's own: (path in the project, template).
const COMMON: &[(&str, &str)] = &[
    (
        "wit/world.wit",
        include_str!("../../templates/common/world.wit"),
    ),
    ("test.sh", include_str!("../../templates/common/test.sh")),
    (
        ".gitignore",
        include_str!("../../templates/common/gitignore"),
    ),
    (
        "README.md",
        include_str!("../../templates/common/README.md"),
    ),
];
const RUST: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/rust/Cargo.toml"),
    ),
    ("src/lib.rs", include_str!("../../templates/rust/lib.rs")),
    ("build.sh", include_str!("../../templates/rust/build.sh")),
];
const PYTHON: &[(&str, &str)] = &[
    ("app.py", include_str!("../../templates/python/app.py")),
    ("build.sh", include_str!("../../templates/python/build.sh")),
];
const JS: &[(&str, &str)] = &[
    ("tool.js", include_str!("../../templates/js/tool.js")),
    (
        "package.json",
        include_str!("../../templates/js/package.json"),
    ),
    ("build.sh", include_str!("../../templates/js/build.sh")),
];

impl Lang {
    fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Lang::Rust => RUST,
            Lang::Python => PYTHON,
            Lang::Js => JS,
        }
    }

    /// What the project README says of this language: (language, source, notes, needs).
    fn readme(self) -> [&'static str; 4] {
        match self {
            Lang::Rust => [
                "Rust",
                "`src/lib.rs`",
                "`wit_bindgen::generate!` turns the WIT into a `Guest` trait; a `#[link_section]` \
                 static embeds the WIT, docs included, in the component.",
                "`rustup` (build.sh adds the `wasm32-wasip2` target) and `toolhost`",
            ],
            Lang::Python => [
                "Python",
                "`app.py`",
                "componentize-py generates the `wit_world` module from the WIT; the build then \
                 embeds the WIT with `toolhost embed-wit`, because componentize-py drops its docs.",
                "`python3` (build.sh installs componentize-py 0.25.1 into `.venv`) and `toolhost` \
                 (`$TOOLHOST`, else the PATH's, else the binary that wrote the project)",
            ],
            Lang::Js => [
                "JavaScript",
                "`tool.js`",
                "componentize-js maps the WIT to the exported `tools` object; the build drops the \
                 `wasi:http` imports the engine adds (see build.sh) and embeds the WIT with \
                 `toolhost embed-wit`, because componentize-js drops its docs.",
                "Node.js 18 or later (build.sh runs `npm install`; componentize-js 0.23.0) and \
                 `toolhost` (`$TOOLHOST`, else the PATH's, else the binary that wrote the \
                 project)",
            ],
        }
    }
}

/// Whether `name` can name the project's WIT package and world, its component file and, for
/// Python, sit beside the `app` module.
pub fn check_name(name: &str, lang: Lang) -> Result<(), String> {
    let kebab = name.split('-').all(|part| {
        part.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    });
    if name.is_empty() || name.len() > MAX_NAME_LEN || !kebab {
        return Err(format!(
            "{name:?} is not a tool project name: use 1 to {MAX_NAME_LEN} characters of \
             lowercase words joined by `-` (e.g. `greet`, `web-search`), each starting with a \
             letter"
        ));
    }
    if WIT_KEYWORDS.contains(&name) {
        return Err(format!("{name:?} is a WIT keyword; choose another name"));
    }
    if lang == Lang::Python && name == "app" {
        return Err("\"app\" is the Python module of the project; choose another name".into());
    }
    Ok(())
}

/// `text` as one shell word: single-quoted, each `'` in it written `'\''`.
fn shell_word(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The binary that writes the project, as the word its scripts fall back to when `toolhost` is
/// neither in `$TOOLHOST` nor on the PATH (`./target/release/toolhost new …` works as written).
fn this_binary() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(shell_word))
        .unwrap_or_else(|| "toolhost".to_string())
}

/// The project's files: (path in the project, contents).
pub fn project_files(name: &str, lang: Lang) -> Vec<(&'static str, String)> {
    let [language, source, notes, needs] = lang.readme();
    let toolhost = this_binary();
    let fill = |t: &str| {
        t.replace("{{name}}", name)
            .replace("{{toolhost}}", &toolhost)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{language}}", language)
            .replace("{{source}}", source)
            .replace("{{notes}}", notes)
            .replace("{{needs}}", needs)
    };
    let mut files: Vec<_> = COMMON
        .iter()
        .chain(lang.files())
        .map(|(path, template)| (*path, fill(template)))
        .collect();
    files.push(("wit/deps/toolhost/tool.wit", TOOL_WIT.to_string()));
    files
}

/// `toolhost new`: write the project into `dir` (default `./NAME`), which must not exist yet,
/// and print the commands that build and call it.
pub(super) fn new_project(name: &str, lang: Lang, dir: Option<PathBuf>) -> ExitCode {
    if let Err(e) = check_name(name, lang) {
        return usage_message(e);
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if let Err(e) = write_project(&dir, &project_files(name, lang)) {
        return usage_message(e);
    }
    out!(
        "Created the {} tool `{name}` in {}. Build it and call it:\n\n  cd {}\n  sh build.sh\n  \
         toolhost call --component {name}.wasm greet '{{\"name\":\"Ada\"}}'",
        lang.readme()[0],
        dir.display(),
        dir.display(),
    );
    ExitCode::SUCCESS
}

/// Create `dir` (which must not exist) and the files in it.
fn write_project(dir: &Path, files: &[(&str, String)]) -> Result<(), String> {
    if dir.symlink_metadata().is_ok() {
        return Err(format!(
            "{} already exists; name a new directory (--dir)",
            dir.display()
        ));
    }
    let io = |what: &Path, e: std::io::Error| format!("cannot write {}: {e}", what.display());
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for (path, contents) in files {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        std::fs::write(&file, contents).map_err(|e| io(&file, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names that cannot be a WIT package, a world or a Python module beside `app` are refused
    /// with a message that says what to use.
    #[test]
    fn names_are_checked() {
        for ok in ["greet", "web-search", "a1", "x-y2"] {
            check_name(ok, Lang::Python).unwrap();
        }
        for bad in [
            "",
            "Greet",
            "web_search",
            "-a",
            "a-",
            "a--b",
            "1a",
            "a-1b",
            "a b",
            "../x",
            "é",
        ] {
            let e = check_name(bad, Lang::Rust).unwrap_err();
            assert!(e.contains("lowercase words"), "{bad}: {e}");
        }
        assert!(check_name(&"a".repeat(MAX_NAME_LEN + 1), Lang::Js).is_err());
        assert!(check_name("world", Lang::Js)
            .unwrap_err()
            .contains("keyword"));
        assert!(check_name("app", Lang::Python).is_err());
        check_name("app", Lang::Js).unwrap();
    }

    /// Every template placeholder is filled, and each project's WIT parses with its docs.
    #[test]
    fn projects_are_filled_in() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let files = project_files("web-search", lang);
            for (path, text) in &files {
                assert!(!text.contains("{{"), "{lang:?} {path}: {text}");
            }
            let world = &files.iter().find(|(p, _)| *p == "wit/world.wit").unwrap().1;
            let docs = crate::registry::docs::parse_docs(world).unwrap();
            assert!(docs
                .get("local:web-search/tools@0.1.0", "greet")
                .unwrap()
                .starts_with("Greet someone by name."));
        }
    }

    /// A path becomes one shell word whatever it holds.
    #[test]
    fn paths_are_one_shell_word() {
        assert_eq!(shell_word("/usr/bin/toolhost"), "'/usr/bin/toolhost'");
        assert_eq!(shell_word("/a b/it's"), "'/a b/it'\\''s'");
    }

    /// A directory that exists (even empty) is never written into.
    #[test]
    fn an_existing_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = write_project(dir.path(), &project_files("greet", Lang::Rust)).unwrap_err();
        assert!(e.contains("already exists"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

//! Bad configs get errors that name what is wrong and how to fix it: each
//! `tests/ui/invalid/X.toml` fails to load, through the real binary with exit status 2, with
//! every line of `X.expected` in the message.

use crate::support::{repo, toolhost};

/// Every invalid config is refused with its expected message.
#[test]
fn invalid_configs_are_refused_with_their_message() {
    crate::support::guest("template");
    crate::support::guest("ungranted");
    let dir = repo().join("tests/ui/invalid");
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
    {
        let expected = std::fs::read_to_string(path.with_extension("expected"))
            .unwrap_or_else(|_| panic!("{} has no .expected file", path.display()));
        let out = toolhost(&["tools", "--config", path.to_str().unwrap()]);
        assert_eq!(out.status, 2, "{}: {}", path.display(), out.stderr);
        assert!(out.stdout.is_empty(), "{}: {}", path.display(), out.stdout);
        for line in expected.lines().filter(|l| !l.is_empty()) {
            assert!(
                out.stderr.contains(line),
                "{}: expected {line:?} in:\n{}",
                path.display(),
                out.stderr
            );
        }
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} invalid configs found");
}

//! `just demo`, run as a user runs it: every row of its table and of its scripted agent session
//! ends as `tests/demo.sh` says it should, the approval round trip completes once, and the
//! ledger's chain and the approved call's receipt check out.

use std::process::Command;

use crate::support::repo;

/// `status code` of the row labelled `label` in the session part of the demo's output.
fn session_row<'a>(out: &'a str, label: &str) -> Option<&'a str> {
    out.lines()
        .find(|l| l.starts_with(label) && l[label.len()..].starts_with(' '))
        .map(|l| {
            l[label.len()..]
                .split('|')
                .next()
                .unwrap_or_default()
                .trim()
        })
}

/// `status code` of the first table row for `tool`.
fn table_row<'a>(out: &'a str, tool: &str) -> Option<(&'a str, &'a str)> {
    out.lines().find_map(|l| {
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        (cells.len() > 3 && cells[1] == tool).then(|| (cells[2], cells[3]))
    })
}

/// The demo exits 0 with no row marked unexpected, its approval round trip runs the approved
/// write once (and refuses the token's second use), and its hostile guests end with the codes
/// the README shows.
#[test]
fn the_demo_tells_its_story() {
    let out = Command::new("bash")
        .arg("tests/demo.sh")
        .current_dir(repo())
        .env("TOOLHOST", env!("CARGO_BIN_EXE_toolhost"))
        .env_remove("RUST_LOG")
        .output()
        .expect("bash runs the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("<- expected"), "{stdout}");
    for (label, want) in [
        ("valid call", "completed"),
        ("invalid arguments", "failed invalid_arguments"),
        ("unauthorized principal", "failed unknown_tool"),
        ("destructive tool, no approval", "failed approval_required"),
        ("resubmitted with the token", "completed"),
        ("the token again", "failed approval_reused"),
        ("duplicate id, other arguments", "failed duplicate_call_id"),
        ("same id, same arguments: replay", "completed"),
        ("hostile guest", "failed fuel_exhausted"),
    ] {
        assert_eq!(session_row(&stdout, label), Some(want), "{label}: {stdout}");
    }
    // What the ledger keeps of it: the chain whole, the approved write's receipt valid.
    for (label, start) in [
        ("the ledger's chain", "intact: "),
        (
            "c5's receipt, checked offline",
            "valid: write_text completed, signed by sha256:",
        ),
    ] {
        let row = session_row(&stdout, label).unwrap_or_default();
        assert!(row.starts_with(start), "{label}: {stdout}");
    }
    // The rows the README's table shows.
    for (tool, status, code) in [
        ("convert_length", "completed", "-"),
        ("http_get", "completed", "-"),
        ("spin", "failed", "fuel_exhausted"),
        ("sleep_forever", "failed", "deadline_exceeded"),
        ("balloon", "failed", "memory_exceeded"),
        ("flood_stdout", "failed", "output_too_large"),
        ("exfiltrate", "completed", "-"),
    ] {
        assert_eq!(
            table_row(&stdout, tool),
            Some((status, code)),
            "{tool}: {stdout}"
        );
    }
}
